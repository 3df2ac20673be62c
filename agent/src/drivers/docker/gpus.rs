//! How this machine's Docker engine gives NVIDIA GPUs to containers, read from its `/info`
//! when the agent starts: through the NVIDIA runtime (the container toolkit's `nvidia`), or
//! through CDI devices the engine lists by the GPU's UUID (`nvidia.com/gpu=GPU-…`, Docker
//! 28.2 and later). Either way a container gets exactly the GPUs placement reserved, by UUID;
//! an index-named CDI device is never used, since an index can name another GPU after a
//! reboot or a driver change.

use std::collections::BTreeSet;

use einsora_core::machine::GpuNote;
use serde_json::{Value, json};

use super::engine::EngineInfo;

/// The CDI kind of NVIDIA's GPUs: a device is `nvidia.com/gpu=<name>`.
const CDI_KIND: &str = "nvidia.com/gpu";

/// Which of the engine's device drivers a container's GPUs are asked of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuPath {
    /// The `nvidia` device driver the NVIDIA runtime registers, GPUs by UUID.
    Runtime,
    /// The engine's `cdi` device driver, GPUs as the CDI devices named by their UUIDs.
    Cdi,
}

impl GpuPath {
    /// The create body's `DeviceRequests` for exactly `uuids`.
    pub fn device_requests(self, uuids: &[String]) -> Value {
        match self {
            GpuPath::Runtime => json!([{
                "Driver": "nvidia",
                "DeviceIDs": uuids,
                "Capabilities": [["gpu"]],
            }]),
            GpuPath::Cdi => {
                let ids: Vec<String> = uuids.iter().map(|u| format!("{CDI_KIND}={u}")).collect();
                json!([{ "Driver": "cdi", "DeviceIDs": ids }])
            }
        }
    }
}

/// What the engine can give containers of NVIDIA's GPUs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpuAccess {
    runtime: bool,
    /// GPUs the engine lists as CDI devices named by their UUIDs.
    cdi_uuids: BTreeSet<String>,
    /// Whether it lists any NVIDIA CDI device at all (by UUID, index or `all`).
    cdi_nvidia: bool,
}

impl GpuAccess {
    pub fn of(info: &EngineInfo) -> GpuAccess {
        let names: Vec<&str> = info
            .cdi_devices
            .iter()
            .filter_map(|id| id.strip_prefix(CDI_KIND)?.strip_prefix('='))
            .collect();
        GpuAccess {
            runtime: info.runtimes.iter().any(|r| r == "nvidia"),
            cdi_uuids: names
                .iter()
                .filter(|n| n.starts_with("GPU-"))
                .map(|n| (*n).to_owned())
                .collect(),
            cdi_nvidia: !names.is_empty(),
        }
    }

    /// How to ask the engine for exactly `uuids`, if it can give them all; none for no GPUs (a
    /// GPU class given none is never run on CPU). The runtime comes first: a machine that has
    /// it keeps the containers it made with it.
    pub fn path_for(&self, uuids: &[String]) -> Option<GpuPath> {
        if uuids.is_empty() {
            None
        } else if self.runtime {
            Some(GpuPath::Runtime)
        } else if uuids.iter().all(|u| self.cdi_uuids.contains(u)) {
            Some(GpuPath::Cdi)
        } else {
            None
        }
    }

    /// Whether it can give containers any NVIDIA GPU at all.
    pub fn any(&self) -> bool {
        self.runtime || !self.cdi_uuids.is_empty()
    }

    /// Why the GPUs `nvidia-smi` lists (`uuids`, at least one) can't all be given to
    /// containers, if they can't.
    pub fn note(&self, uuids: &[String]) -> Option<GpuNote> {
        match self.path_for(uuids) {
            Some(_) => None,
            None if self.cdi_nvidia => Some(GpuNote::NvidiaCdiIncomplete),
            None => Some(GpuNote::NvidiaUnusable),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(runtimes: &[&str], cdi: &[&str]) -> GpuAccess {
        GpuAccess::of(&EngineInfo {
            runtimes: runtimes.iter().map(|s| (*s).to_owned()).collect(),
            cdi_devices: cdi.iter().map(|s| (*s).to_owned()).collect(),
        })
    }

    fn uuids(of: &[&str]) -> Vec<String> {
        of.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_nvidia_runtime_gives_any_gpu_by_uuid() {
        let access = info(&["runc", "nvidia"], &[]);
        let gpus = uuids(&["GPU-a"]);
        assert_eq!(access.path_for(&gpus), Some(GpuPath::Runtime));
        assert_eq!(
            access.path_for(&[]),
            None,
            "a GPU class given no GPU runs nowhere"
        );
        assert_eq!(access.note(&gpus), None);
        assert_eq!(
            GpuPath::Runtime.device_requests(&gpus),
            json!([{ "Driver": "nvidia", "DeviceIDs": ["GPU-a"], "Capabilities": [["gpu"]] }])
        );
    }

    #[test]
    fn cdi_gives_the_gpus_it_names_by_uuid_and_no_other() {
        let access = info(
            &["runc"],
            &[
                "nvidia.com/gpu=0",
                "nvidia.com/gpu=GPU-a",
                "nvidia.com/gpu=all",
            ],
        );
        let a = uuids(&["GPU-a"]);
        assert_eq!(access.path_for(&a), Some(GpuPath::Cdi));
        assert_eq!(
            GpuPath::Cdi.device_requests(&a),
            json!([{ "Driver": "cdi", "DeviceIDs": ["nvidia.com/gpu=GPU-a"] }])
        );
        let both = uuids(&["GPU-a", "GPU-b"]);
        assert_eq!(access.path_for(&both), None, "GPU-b isn't listed");
        assert_eq!(access.note(&both), Some(GpuNote::NvidiaCdiIncomplete));
    }

    #[test]
    fn index_named_cdi_devices_are_never_used() {
        let access = info(&["runc"], &["nvidia.com/gpu=0", "nvidia.com/gpu=all"]);
        let gpus = uuids(&["GPU-a"]);
        assert_eq!(access.path_for(&gpus), None);
        assert!(!access.any());
        assert_eq!(access.note(&gpus), Some(GpuNote::NvidiaCdiIncomplete));
    }

    #[test]
    fn another_vendors_cdi_devices_say_nothing_of_nvidia() {
        let access = info(
            &["runc"],
            &["vendor.com/gpu=GPU-a", "nvidia.com/gpuX=GPU-a"],
        );
        let gpus = uuids(&["GPU-a"]);
        assert_eq!(access.path_for(&gpus), None);
        assert_eq!(access.note(&gpus), Some(GpuNote::NvidiaUnusable));
    }

    /// `/info` as Docker 28.2 answers it with CDI on (only the fields read here), and as
    /// Debian's 20.10 does: no `DiscoveredDevices` at all.
    #[test]
    fn the_engines_info_is_read_as_documented() {
        let new = json!({
            "Runtimes": { "runc": { "path": "runc" } },
            "CDISpecDirs": ["/etc/cdi", "/var/run/cdi"],
            "DiscoveredDevices": [
                { "Source": "cdi", "ID": "nvidia.com/gpu=GPU-a" },
                { "Source": "other", "ID": "nvidia.com/gpu=GPU-b" },
                { "Source": "cdi" },
                "not a device",
            ],
        });
        let read = EngineInfo::read(&new);
        assert_eq!(read.runtimes, ["runc"]);
        assert_eq!(read.cdi_devices, ["nvidia.com/gpu=GPU-a"]);
        let old = json!({ "Runtimes": { "runc": {}, "nvidia": {} } });
        assert_eq!(EngineInfo::read(&old).cdi_devices, Vec::<String>::new());
        assert_eq!(EngineInfo::read(&Value::Null), EngineInfo::default());
    }
}
