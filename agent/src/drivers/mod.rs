//! Drivers: how a machine runs workloads. `docker` runs notebooks and endpoints as containers;
//! `linux-native` runs them as sandboxed processes where there is no Docker; `local` is what
//! those two share; `process` is the supervisor the native drivers build on; `macos` is the
//! macos-native driver's, being built (its sandbox profile so far); `libvirt` runs VMs; `sim`
//! runs nothing, for development and tests.

pub mod docker;
pub mod libvirt;
pub mod local;
pub mod macos;
pub mod native;
pub mod process;
pub mod sim;

use einsora_core::agent::{Mode, StatusCode};
use einsora_core::driver::Isolation;
use einsora_core::machine::GpuNote;
use einsora_core::run_dirs::MACOS_DRIVER;
use einsora_proto::agent::v1 as pb;
use einsora_proto::convert::{
    AccessTarget, DesiredWorkload, PlacedSpec, ProtoEnum, WorkloadStatus, WorkloadStatuses,
};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::Notify;

use crate::models::Limits;
use crate::models::listing::Listing;

/// The drivers this agent has, and what it last was told to run.
#[derive(Debug)]
pub struct Drivers {
    docker: Option<docker::Docker>,
    native: Option<native::Native>,
    /// macos-native: the same machinery as linux-native, on a Mac's sandbox.
    macos: Option<native::Native>,
    /// VMs, where the owner turned it on and guests can run.
    libvirt: Option<libvirt::Libvirt>,
    /// Where endpoints' models may come from, and the model files found there (kept between
    /// scans).
    models_dir: Option<PathBuf>,
    listing: Arc<Mutex<Listing>>,
    /// Notified when a driver's statuses changed between the sync loop's checks.
    changed: Arc<Notify>,
    sim: Option<sim::Sim>,
    /// Workloads no driver takes here, and why.
    refused: Vec<(String, u32, Mode, StatusCode)>,
    /// The machine's GPUs by UUID, as its latest inventory read listed them; `None` until one
    /// read (then nothing is refused for a missing GPU).
    gpus: Option<std::collections::HashSet<String>>,
    /// Every GPU an inventory read listed, by UUID, as last listed.
    listed_gpus: std::collections::HashMap<String, einsora_core::machine::Device>,
    /// The desired state last applied; `None` before the first (applying nothing would park
    /// every workload).
    desired: Option<Vec<pb::DesiredWorkload>>,
    /// The sync stream desired states now come on, counting from 1.
    stream: u64,
    /// What workloads print, from the drivers to the sync loop.
    inbox: local::output::Inbox,
}

impl Drivers {
    /// `docker` when its engine answers; `linux-native` when turned on, or by default where
    /// there is no docker driver, and bubblewrap works; `sim` only when asked for (development
    /// and tests).
    pub async fn start(
        state_dir: &std::path::Path,
        docker: Option<docker::DockerConfig>,
        native: Option<native::NativeConfig>,
        macos: Option<native::NativeConfig>,
        libvirt: Option<libvirt::LibvirtConfig>,
        sim: bool,
    ) -> Drivers {
        let changed = Arc::new(Notify::new());
        let (outbox, inbox) = local::output::outbox();
        let models_dir = docker
            .as_ref()
            .and_then(|c| c.models_dir.clone())
            .or_else(|| native.as_ref().and_then(|c| c.models_dir.clone()))
            .or_else(|| macos.as_ref().and_then(|c| c.models_dir.clone()));
        let docker = match docker {
            Some(config) => {
                docker::Docker::detect(config, Arc::clone(&changed), outbox.clone()).await
            }
            None => None,
        };
        let native = match native {
            Some(config) if docker.is_none() || config.enabled == native::Enabled::On => {
                native::Native::detect(config, Arc::clone(&changed), outbox.clone()).await
            }
            _ => None,
        };
        let macos = match macos {
            Some(config) => {
                native::Native::detect(config, Arc::clone(&changed), outbox.clone()).await
            }
            None => None,
        };
        let libvirt = match libvirt {
            Some(config) => libvirt::Libvirt::detect(config, Arc::clone(&changed), outbox).await,
            None => None,
        };
        Drivers {
            docker,
            native,
            macos,
            libvirt,
            models_dir,
            listing: Arc::default(),
            changed,
            sim: sim.then(|| sim::Sim::open(state_dir.join("sim.json"))),
            refused: Vec::new(),
            gpus: None,
            listed_gpus: std::collections::HashMap::new(),
            desired: None,
            stream: 0,
            inbox,
        }
    }

    /// A new sync stream starts: its first desired state sets where each workload's output is
    /// read from again.
    pub fn new_stream(&mut self) {
        self.stream += 1;
    }

    /// The sync stream desired states now come on.
    pub fn stream(&self) -> u64 {
        self.stream
    }

    /// Batches of workloads' output, for the sync loop to send.
    pub fn inbox(&self) -> local::output::Inbox {
        Arc::clone(&self.inbox)
    }

    pub fn names(&self) -> Vec<String> {
        let docker = self.docker.iter().map(|_| docker::NAME);
        let native = self.natives().map(native::Native::name);
        let libvirt = self.libvirt.iter().map(|_| libvirt::NAME);
        let sim = self.sim.iter().map(|_| sim::NAME);
        docker
            .chain(native)
            .chain(libvirt)
            .chain(sim)
            .map(str::to_owned)
            .collect()
    }

    /// linux-native and macos-native, where they are.
    fn natives(&self) -> impl Iterator<Item = &native::Native> {
        self.native.iter().chain(self.macos.iter())
    }

    /// Notified when statuses changed (the sync loop also checks every few seconds).
    pub fn changed(&self) -> Arc<Notify> {
        Arc::clone(&self.changed)
    }

    /// The model files endpoints can be started with here, sorted by path.
    pub async fn model_files(&self) -> Vec<einsora_core::machine::ModelFile> {
        let Some(dir) = self.models_dir.clone() else {
            return Vec::new();
        };
        let listing = Arc::clone(&self.listing);
        tokio::task::spawn_blocking(move || {
            let mut listing = listing.lock().unwrap_or_else(PoisonError::into_inner);
            listing.scan(&dir, &Limits::default())
        })
        .await
        .unwrap_or_default()
    }

    /// The machine's GPUs as an inventory read just listed them: a workload given one that
    /// isn't among them isn't started (`gpu_missing`).
    /// When they changed, the last desired state is applied again, so no workload starts on a
    /// GPU that just went.
    pub fn know_gpus(&mut self, uuids: impl IntoIterator<Item = String>) {
        let now = Some(uuids.into_iter().collect());
        if now != self.gpus {
            self.gpus = now;
            if let Some(last) = self.desired.take() {
                self.apply(&last);
            }
        }
    }

    /// `devices` as the machine has them: what nvidia-smi listed, and the GPUs its VMs hold,
    /// which the host's nvidia-smi doesn't list while they are passed through (as last listed
    /// by this agent; one held since before it started isn't known, and stays unlisted until
    /// its VM ends).
    pub fn with_passed_through(&mut self, devices: &mut Vec<einsora_core::machine::Device>) {
        let passed = self
            .libvirt
            .as_ref()
            .map(libvirt::Libvirt::passed_through)
            .unwrap_or_default();
        keep_passed_through(&mut self.listed_gpus, devices, &passed);
    }

    /// How this machine runs VMs, where it has a VM driver.
    pub fn vm_host(&self) -> Option<einsora_core::machine::VmHost> {
        self.libvirt.as_ref().map(libvirt::Libvirt::vm_host)
    }

    /// Why the machine's GPUs can't be given to workloads here, if they can't: NVIDIA GPUs
    /// need the linux-native driver with the NVIDIA driver's device nodes, the docker driver
    /// with an engine that can give each of them to containers (docker/gpus.rs), or the
    /// libvirt driver, which passes them to VMs whole (its IOMMU checks are per VM, at start);
    /// the sim driver, which runs nothing, takes anything. The machine then offers CPU only,
    /// and says why.
    pub fn gpu_note(&self, devices: &[einsora_core::machine::Device]) -> Option<GpuNote> {
        let nvidia: Vec<String> = devices
            .iter()
            .filter(|d| d.vendor == einsora_core::accelerator::AcceleratorKind::Nvidia)
            .map(|d| d.uuid.clone())
            .collect();
        if nvidia.is_empty()
            || self.sim.is_some()
            || self.libvirt.is_some()
            || self.native.as_ref().is_some_and(native::Native::nvidia)
        {
            return None;
        }
        match &self.docker {
            Some(docker) => docker.gpus().note(&nvidia),
            None => Some(GpuNote::NvidiaUnusable),
        }
    }

    /// Applies a complete desired state: each listed workload to its driver; a workload it
    /// wasn't told about is stopped and kept, never removed.
    /// Each is converted here, once (`einsora_proto::convert::DesiredWorkload`): one that
    /// doesn't read is refused (`start_failed`, logged), never run on a default.
    pub fn apply(&mut self, desired: &[pb::DesiredWorkload]) {
        self.refused.clear();
        let listed: Vec<&str> = desired.iter().map(|d| d.workload_id.as_str()).collect();
        let (mut on_docker, mut on_native, mut on_macos) = (Vec::new(), Vec::new(), Vec::new());
        let mut on_libvirt = Vec::new();
        for raw in desired {
            let d = match DesiredWorkload::try_from(raw.clone()) {
                Ok(d) => d,
                Err(e) => {
                    tracing::warn!(workload = %raw.workload_id, error = %e, "refused a desired workload that doesn't read");
                    if let Ok(mode) = Mode::from_field("mode", raw.mode) {
                        let code = StatusCode::StartFailed;
                        self.refused
                            .push((raw.workload_id.clone(), raw.attempt, mode, code));
                    }
                    continue;
                }
            };
            let id = d.workload_id.to_string();
            if let Some(code) = refusal(&d.spec, d.mode) {
                self.refused.push((id, d.attempt, d.mode, code));
                continue;
            }
            let gpus_missing = gpus_missing(&d.spec, self.gpus.as_ref());
            match (&mut self.sim, &self.docker, d.spec.driver.as_str()) {
                // Like a real driver, never started without the GPUs it was given.
                (Some(sim), _, sim::NAME)
                    if gpus_missing && d.mode == Mode::Run && !sim.has_attempt(&id, d.attempt) =>
                {
                    let code = StatusCode::GpuMissing;
                    self.refused.push((id, d.attempt, d.mode, code));
                }
                (Some(sim), _, sim::NAME) => sim.apply(&id, d.attempt, d.mode),
                (_, Some(_), docker::NAME) => {
                    on_docker.push(wanted(id, d, gpus_missing, self.stream));
                }
                _ if d.spec.driver == libvirt::NAME && self.libvirt.is_some() => {
                    on_libvirt.push(wanted(id, d, gpus_missing, self.stream));
                }
                _ if d.spec.driver == native::NAME && self.native.is_some()
                    || d.spec.driver == MACOS_DRIVER && self.macos.is_some() =>
                {
                    let on = if d.spec.driver == native::NAME {
                        &mut on_native
                    } else {
                        &mut on_macos
                    };
                    on.push(wanted(id, d, gpus_missing, self.stream));
                }
                _ => {
                    let code = StatusCode::DriverMissing;
                    self.refused.push((id, d.attempt, d.mode, code));
                }
            }
        }
        if let Some(docker) = &self.docker {
            docker.handle().apply(on_docker);
        }
        if let Some(native) = &self.native {
            native.handle().apply(on_native);
        }
        if let Some(macos) = &self.macos {
            macos.handle().apply(on_macos);
        }
        if let Some(libvirt) = &self.libvirt {
            libvirt.handle().apply(on_libvirt);
        }
        if let Some(sim) = &mut self.sim {
            sim.park_unlisted(&listed);
            sim.forget_removed(&listed);
        }
        self.desired = Some(desired.to_vec());
    }

    /// Every workload's status, for the controller. Workloads are named by the IDs this agent
    /// was given, so each parses; one that doesn't (a desired workload refused for its ID) has
    /// nothing to report under.
    pub fn statuses(&mut self) -> WorkloadStatuses {
        let status = |workload: &str, attempt, mode, code, driver: &str| {
            Some(WorkloadStatus {
                workload_id: workload.parse().ok()?,
                attempt,
                mode,
                code,
                driver: driver.to_owned(),
                access_target: None,
            })
        };
        let mut workloads: Vec<WorkloadStatus> = self
            .sim
            .iter_mut()
            .flat_map(|sim| sim.statuses())
            .filter_map(|s| status(&s.workload, s.attempt, s.mode, s.code, sim::NAME))
            .collect();
        let docker = self.docker.iter().flat_map(|d| d.handle().statuses());
        let docker = docker.map(|(id, seen)| (docker::NAME, id, seen));
        let native = self.natives().flat_map(|n| {
            let name = n.name();
            n.handle()
                .statuses()
                .into_iter()
                .map(move |(id, seen)| (name, id, seen))
        });
        let libvirt = self.libvirt.iter().flat_map(|l| l.handle().statuses());
        let libvirt = libvirt.map(|(id, seen)| (libvirt::NAME, id, seen));
        for (driver, id, seen) in docker.chain(native).chain(libvirt) {
            let Some(mut s) = status(&id, seen.attempt, seen.mode, seen.code, driver) else {
                continue;
            };
            s.access_target = seen
                .target
                .map(|(socket_path, token)| AccessTarget { socket_path, token });
            workloads.push(s);
        }
        workloads.extend(
            self.refused
                .iter()
                .filter_map(|(id, attempt, mode, code)| status(id, *attempt, *mode, *code, "")),
        );
        let driver_restarts = self
            .docker
            .iter()
            .map(docker::Docker::restarts)
            .sum::<u32>()
            + self.natives().map(native::Native::restarts).sum::<u32>()
            + self
                .libvirt
                .iter()
                .map(libvirt::Libvirt::restarts)
                .sum::<u32>();
        WorkloadStatuses {
            workloads,
            driver_restarts,
        }
    }
}

/// What a local driver is handed of desired workload `d` (`id`, its ID's text), on `stream`.
fn wanted(id: String, d: DesiredWorkload, gpus_missing: bool, stream: u64) -> local::Wanted {
    local::Wanted {
        gpus_missing,
        workload: id,
        attempt: d.attempt,
        mode: d.mode,
        spec: d.spec,
        output: d.output,
        stream,
    }
}

/// Whether a device `spec` needs is missing: fewer given than its class has (a workload
/// admitted before devices were given by UUID: never started without them), or one given that
/// isn't among the machine's GPUs (when they are known).
fn gpus_missing(spec: &PlacedSpec, gpus: Option<&std::collections::HashSet<String>>) -> bool {
    let Some(resources) = spec.resources.as_ref() else {
        return false;
    };
    let given = u32::try_from(resources.device_uuids.len()).unwrap_or(u32::MAX);
    given < resources.device_count
        || gpus.is_some_and(|gpus| resources.device_uuids.iter().any(|u| !gpus.contains(u)))
}

/// A weak-isolation driver refuses a workload that needs strong isolation: it never runs, so
/// stopping it is done and removing it leaves nothing.
fn refusal(spec: &PlacedSpec, mode: Mode) -> Option<StatusCode> {
    let weak =
        einsora_core::driver::lookup(&spec.driver).is_some_and(|i| i.isolation == Isolation::Weak);
    if !(spec.requires_strong_isolation && weak) {
        return None;
    }
    Some(match mode {
        Mode::Run => StatusCode::IsolationRefused,
        Mode::Park => StatusCode::Stopped,
        Mode::Remove => StatusCode::Removed,
    })
}

/// Remembers each device `devices` lists, then adds those of `passed` (UUIDs) it no longer
/// lists, as they were last listed; one never listed can't be added.
fn keep_passed_through(
    listed: &mut std::collections::HashMap<String, einsora_core::machine::Device>,
    devices: &mut Vec<einsora_core::machine::Device>,
    passed: &std::collections::BTreeSet<String>,
) {
    for d in devices.iter() {
        listed.insert(d.uuid.clone(), d.clone());
    }
    for uuid in passed {
        if devices.iter().all(|d| &d.uuid != uuid)
            && let Some(d) = listed.get(uuid)
        {
            devices.push(d.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use einsora_proto::convert::ProtoEnum;

    fn desired(id: &str, spec: Option<pb::WorkloadSpec>) -> pb::DesiredWorkload {
        pb::DesiredWorkload {
            workload_id: id.into(),
            attempt: 1,
            mode: Mode::Run.to_field(),
            spec,
            output: None,
        }
    }

    /// A workload given a GPU its machine no longer lists is flagged not to start; until an
    /// inventory read lists the machine's GPUs, nothing is.
    #[test]
    fn a_gpu_the_machine_no_longer_lists_is_missing() {
        let spec = |uuids: &[&str]| {
            let raw = pb::WorkloadSpec {
                kind: einsora_core::kind::WorkloadKind::Notebook.to_field(),
                driver: docker::NAME.into(),
                resources: Some(pb::Resources {
                    device_count: u32::try_from(uuids.len()).unwrap(),
                    device_uuids: uuids.iter().map(|u| (*u).to_owned()).collect(),
                    ..pb::Resources::default()
                }),
                ..pb::WorkloadSpec::default()
            };
            PlacedSpec::try_from(raw).unwrap()
        };
        let listed: std::collections::HashSet<String> = ["GPU-1".to_owned()].into();
        assert!(!gpus_missing(&spec(&["GPU-1"]), Some(&listed)));
        assert!(gpus_missing(&spec(&["GPU-1", "GPU-2"]), Some(&listed)));
        assert!(!gpus_missing(&spec(&[]), Some(&listed)), "a CPU workload");
        assert!(!gpus_missing(&spec(&["GPU-9"]), None), "not known yet");
        // Admitted before devices were given by UUID: a count and none named. Never started
        // without its GPU.
        let mut unnamed = spec(&[]);
        unnamed.resources.as_mut().unwrap().device_count = 1;
        assert!(gpus_missing(&unnamed, None));
    }

    /// A new attempt given a GPU the machine no longer lists isn't started, on the sim driver
    /// as on a real one; one already started goes on, and a listed GPU starts.
    #[tokio::test]
    async fn a_new_attempt_on_a_gpu_that_went_is_not_started() {
        let dir = tempfile::tempdir().unwrap();
        let mut drivers = Drivers::start(dir.path(), None, None, None, None, true).await;
        let (started, new) = (
            einsora_core::ids::WorkloadId::new().to_string(),
            einsora_core::ids::WorkloadId::new().to_string(),
        );
        let on = |uuid: &str| pb::WorkloadSpec {
            kind: einsora_core::kind::WorkloadKind::Notebook.to_field(),
            driver: sim::NAME.into(),
            resources: Some(pb::Resources {
                device_count: 1,
                device_uuids: vec![uuid.to_owned()],
                ..pb::Resources::default()
            }),
            ..pb::WorkloadSpec::default()
        };
        drivers.know_gpus(["GPU-1".to_owned(), "GPU-2".to_owned()]);
        drivers.apply(&[desired(&started, Some(on("GPU-1")))]);
        drivers.know_gpus(["GPU-2".to_owned()]);
        drivers.apply(&[
            desired(&started, Some(on("GPU-1"))),
            desired(&new, Some(on("GPU-1"))),
        ]);
        assert_eq!(codes_of(&mut drivers, &started), StatusCode::Starting);
        assert_eq!(codes_of(&mut drivers, &new), StatusCode::GpuMissing);
        drivers.apply(&[desired(&new, Some(on("GPU-2")))]);
        assert_eq!(codes_of(&mut drivers, &new), StatusCode::Starting);
    }

    fn codes_of(drivers: &mut Drivers, id: &str) -> StatusCode {
        let statuses = drivers.statuses().workloads;
        statuses
            .iter()
            .find(|s| s.workload_id.to_string() == id)
            .unwrap()
            .code
    }

    /// NVIDIA GPUs no driver here can use are noted, so the machine offers CPU only and says
    /// why; the sim driver takes anything.
    #[tokio::test]
    async fn gpus_no_driver_can_use_are_noted() {
        let dir = tempfile::tempdir().unwrap();
        let gpu = einsora_core::machine::Device {
            vendor: einsora_core::accelerator::AcceleratorKind::Nvidia,
            model: "NVIDIA L40S".into(),
            uuid: "GPU-1".into(),
            memory_bytes: 48 << 30,
        };
        let bare = Drivers::start(dir.path(), None, None, None, None, false).await;
        assert_eq!(
            bare.gpu_note(std::slice::from_ref(&gpu)),
            Some(GpuNote::NvidiaUnusable)
        );
        assert_eq!(bare.gpu_note(&[]), None, "no GPUs, nothing to say");
        let sim = Drivers::start(dir.path(), None, None, None, None, true).await;
        assert_eq!(sim.gpu_note(&[gpu]), None);
    }

    /// Another tenant's workload (the controller says it needs strong isolation) is refused by
    /// each weak driver, docker and linux-native alike, whether or not the driver is here.
    #[tokio::test]
    async fn a_weak_driver_refuses_another_tenants_workload() {
        let dir = tempfile::tempdir().unwrap();
        let mut drivers = Drivers::start(dir.path(), None, None, None, None, true).await;
        for driver in [docker::NAME, native::NAME] {
            let id = einsora_core::ids::WorkloadId::new().to_string();
            let spec = pb::WorkloadSpec {
                kind: einsora_core::kind::WorkloadKind::Notebook.to_field(),
                driver: driver.into(),
                requires_strong_isolation: true,
                ..pb::WorkloadSpec::default()
            };
            drivers.apply(&[desired(&id, Some(spec))]);
            assert_eq!(
                codes_of(&mut drivers, &id),
                StatusCode::IsolationRefused,
                "{driver}"
            );
        }
    }

    /// A desired workload that doesn't read is refused with a status, never run on a default;
    /// a good one beside it runs.
    #[tokio::test]
    async fn a_desired_workload_that_doesnt_read_is_refused_and_the_rest_run() {
        let dir = tempfile::tempdir().unwrap();
        let mut drivers = Drivers::start(dir.path(), None, None, None, None, true).await;
        let good = einsora_core::ids::WorkloadId::new().to_string();
        let bad = einsora_core::ids::WorkloadId::new().to_string();
        let spec = pb::WorkloadSpec {
            kind: einsora_core::kind::WorkloadKind::Notebook.to_field(),
            driver: sim::NAME.into(),
            ..pb::WorkloadSpec::default()
        };
        drivers.apply(&[desired(&good, Some(spec)), desired(&bad, None)]);
        let statuses = drivers.statuses().workloads;
        let code = |id: &str| {
            let s = statuses.iter().find(|s| s.workload_id.to_string() == id);
            s.unwrap().code
        };
        assert_eq!(code(&bad), StatusCode::StartFailed, "no spec: refused");
        assert_eq!(code(&good), StatusCode::Starting);
    }

    /// A GPU a VM holds isn't listed by the host's nvidia-smi: the inventory keeps it as last
    /// listed, and only while a VM holds it; one never listed isn't made up.
    #[test]
    fn gpus_passed_to_vms_stay_in_the_inventory_as_last_listed() {
        use einsora_core::accelerator::AcceleratorKind;
        use einsora_core::machine::Device;
        let gpu = |uuid: &str| Device {
            vendor: AcceleratorKind::Nvidia,
            model: "NVIDIA L40S".into(),
            uuid: uuid.into(),
            memory_bytes: 48 << 30,
        };
        let mut listed = std::collections::HashMap::new();
        let mut devices = vec![gpu("GPU-a"), gpu("GPU-b")];
        keep_passed_through(&mut listed, &mut devices, &Default::default());
        assert_eq!(devices.len(), 2);
        let passed = std::collections::BTreeSet::from(["GPU-a".to_owned(), "GPU-z".to_owned()]);
        let mut devices = vec![gpu("GPU-b")];
        keep_passed_through(&mut listed, &mut devices, &passed);
        assert_eq!(devices, vec![gpu("GPU-b"), gpu("GPU-a")]);
        let mut devices = vec![gpu("GPU-b")];
        keep_passed_through(&mut listed, &mut devices, &Default::default());
        assert_eq!(devices, vec![gpu("GPU-b")], "its VM ended: as listed");
    }
}
