//! Machines and the trust matrix: where a workload may run, and under which drivers.

use crate::accelerator::AcceleratorKind;
use crate::driver::{DriverInfo, Isolation};
use crate::ids::{MachineId, TenantId, UserId};
use crate::region::Region;
use crate::sharing::SharingLevel;
use crate::words::word_enum;

/// One accelerator device as an agent reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    pub vendor: AcceleratorKind,
    pub model: String,
    pub uuid: String,
    pub memory_bytes: u64,
}

/// How busy one of a machine's GPUs is, as its agent last sampled it (nvidia-smi).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuSample {
    pub uuid: String,
    /// Of the last sample period, 0 to 100.
    pub utilization_percent: u32,
    /// Never more than the device's memory.
    pub memory_used_bytes: u64,
}

/// A model file an agent found in its machine's models directory and validated: what an
/// endpoint on that machine can be started with, by `path`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ModelFile {
    /// Relative to the models directory (see [`is_model_path`]).
    pub path: String,
    pub size_bytes: u64,
}

/// The longest model path an endpoint may name.
pub const MAX_MODEL_PATH: usize = 256;

/// Whether `path` names a file in a models directory the way endpoints must: relative path
/// segments of letters, digits, `-`, `_` and `.`, none empty, `.` or `..`, 256 bytes at most.
pub fn is_model_path(path: &str) -> bool {
    !path.is_empty()
        && path.len() <= MAX_MODEL_PATH
        && path.split('/').all(|seg| {
            !seg.is_empty()
                && seg != "."
                && seg != ".."
                && seg
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        })
}

/// What a machine's agent reports about it: its resources, and its hostname as a label. Never
/// its identity, owner or region, which come from its certificate and its registration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inventory {
    /// A label only: renaming the machine changes nothing else.
    pub hostname: String,
    /// `linux` or `macos`, as Rust spells them.
    pub os: String,
    /// `x86_64` or `aarch64`, as Rust spells them.
    pub arch: String,
    /// CPUs the agent may use.
    pub cpus: u32,
    pub memory_bytes: u64,
    pub devices: Vec<Device>,
    /// Its CPUs by kind, where they are of two kinds (a Mac's).
    pub cores: Option<CpuCores>,
}

/// A CPU's cores by kind: Apple Silicon's performance and efficiency cores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuCores {
    pub performance: u32,
    pub efficiency: u32,
}

word_enum! {
    /// How a machine's VMs run.
    pub enum VmAccel ("VM acceleration") {
        /// Hardware virtualisation (KVM), where a probe guest booted under it.
        Kvm = "kvm",
        /// qemu's emulation (TCG): where KVM doesn't run guests and the machine's owner
        /// allowed it (`EINSORA_VM_ACCEL=tcg`). Slow: for tests and small guests.
        Tcg = "tcg",
    }
}

/// What a machine offers VMs, as its agent says: how they run, and at most how many at once
/// its owner allows (`EINSORA_VM_LIMIT`; the driver table's own limit holds as well).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VmHost {
    pub accel: VmAccel,
    pub limit: Option<u32>,
}

impl VmHost {
    /// The most VMs one machine may say it runs at once.
    pub const MAX_LIMIT: u32 = 1024;
}

word_enum! {
    /// Why a machine's GPUs aren't offered for placement: its agent found them and has no
    /// driver that can give them to workloads. A GPU request never becomes CPU instead.
    pub enum GpuNote ("GPU note") {
        /// `nvidia-smi` lists GPUs, but the Docker engine has neither the NVIDIA runtime nor
        /// CDI devices for them.
        NvidiaUnusable = "nvidia_unusable",
        /// The engine has CDI devices from NVIDIA, but not one named by the UUID of each GPU
        /// `nvidia-smi` lists (a spec naming them by index, or made before a GPU was added).
        NvidiaCdiIncomplete = "nvidia_cdi_incomplete",
    }
}

impl GpuNote {
    /// Whether `d` is one of the devices the note keeps from placement.
    pub fn hides(self, d: &Device) -> bool {
        match self {
            GpuNote::NvidiaUnusable | GpuNote::NvidiaCdiIncomplete => {
                d.vendor == AcceleratorKind::Nvidia
            }
        }
    }

    /// What the machine's page says, in words its owner can act on.
    pub fn words(self) -> &'static str {
        match self {
            GpuNote::NvidiaUnusable => {
                "NVIDIA GPUs found, but Docker can't use them: install the NVIDIA container \
                 toolkit (its nvidia runtime, or CDI with Docker 28.2 or later), then restart \
                 the agent"
            }
            GpuNote::NvidiaCdiIncomplete => {
                "NVIDIA GPUs found, but Docker's CDI devices don't name each of them by UUID: \
                 regenerate the spec with `nvidia-ctk cdi generate --device-name-strategy=uuid \
                 --output=/etc/cdi/nvidia.yaml` (or install the nvidia runtime), then restart \
                 the agent"
            }
        }
    }
}

/// A machine as the store knows it. Its owner and region come from its registration (the
/// enrolment token), never from its agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    pub id: MachineId,
    pub owner: TenantId,
    /// The user whose enrolment token brought it in: weakly isolated drivers run only their
    /// workloads. `None` for a machine no user enrolled (it runs no weakly isolated workload).
    pub owner_user: Option<UserId>,
    /// Other users of its tenant the owning user trusts with it: weakly isolated drivers run
    /// their workloads too.
    pub trusted_users: Vec<UserId>,
    pub name: String,
    pub region: Region,
    pub os: String,
    pub arch: String,
    pub cpus: u32,
    pub memory_bytes: u64,
    pub devices: Vec<Device>,
    pub sharing: SharingLevel,
    /// Its CPUs by kind, as its agent last measured them (a Mac's).
    pub cores: Option<CpuCores>,
}

/// What a machine's registration claims, before validation.
#[derive(Debug, Clone, Default)]
pub struct MachineDraft {
    pub id: Option<MachineId>,
    pub owner: Option<TenantId>,
    pub name: String,
    pub regions: Vec<String>,
    pub os: String,
    pub arch: String,
    pub cpus: u32,
    pub memory_bytes: u64,
    pub devices: Vec<Device>,
    pub sharing: Option<SharingLevel>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidMachine {
    #[error("a machine needs exactly one region, got {0}")]
    RegionCount(usize),
    #[error(transparent)]
    Region(#[from] crate::region::InvalidRegion),
    #[error("a machine needs an owner")]
    NoOwner,
    #[error("a machine needs a name of 1 to 128 printable characters")]
    Name,
    #[error("a machine needs at least one CPU and some memory")]
    NoResources,
}

impl MachineDraft {
    pub fn validate(self) -> Result<Machine, InvalidMachine> {
        let [region] = self.regions.as_slice() else {
            return Err(InvalidMachine::RegionCount(self.regions.len()));
        };
        let region = Region::new(region)?;
        let owner = self.owner.ok_or(InvalidMachine::NoOwner)?;
        let name = self.name.trim();
        if name.is_empty() || name.chars().count() > 128 || name.chars().any(char::is_control) {
            return Err(InvalidMachine::Name);
        }
        if self.cpus == 0 || self.memory_bytes == 0 {
            return Err(InvalidMachine::NoResources);
        }
        Ok(Machine {
            id: self.id.unwrap_or_default(),
            owner,
            owner_user: None,
            trusted_users: Vec::new(),
            name: name.to_owned(),
            region,
            os: self.os,
            arch: self.arch,
            cpus: self.cpus,
            memory_bytes: self.memory_bytes,
            devices: self.devices,
            sharing: self.sharing.unwrap_or(SharingLevel::Private),
            cores: None,
        })
    }
}

impl Machine {
    /// Whether this machine may host a workload of `tenant` in `region`: only workloads of its
    /// own region, and only its owner's unless it is in a community pool (invite-only counts as
    /// private until invites exist).
    pub fn can_host(&self, tenant: TenantId, region: &Region) -> bool {
        &self.region == region && (tenant == self.owner || self.sharing == SharingLevel::Community)
    }

    /// The trust matrix: a weak-isolation driver runs only the workloads of the user who owns
    /// the machine (by user, not by tenant: another member of the owner's tenant is a guest
    /// here as much as another tenant is).
    pub fn permits(&self, driver: &DriverInfo, tenant: TenantId, user: Option<UserId>) -> bool {
        match driver.isolation {
            Isolation::Strong => true,
            Isolation::Weak => !self.requires_strong_isolation(tenant, user),
        }
    }

    /// Whether a workload of `tenant` created by `user` may run here only under strong
    /// isolation: unless it is the owning user's own, or a user's they trust with it.
    pub fn requires_strong_isolation(&self, tenant: TenantId, user: Option<UserId>) -> bool {
        let trusted = |u: UserId| Some(u) == self.owner_user || self.trusted_users.contains(&u);
        !(tenant == self.owner && self.owner_user.is_some() && user.is_some_and(trusted))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_paths_are_relative_segments_of_safe_characters() {
        for good in [
            "tiny.gguf",
            "team/my-model_v2.Q4_K_M.gguf",
            &"a".repeat(256),
        ] {
            assert!(is_model_path(good), "{good}");
        }
        for bad in [
            "",
            "/abs.gguf",
            "a//b.gguf",
            "./a.gguf",
            "../a.gguf",
            "a/../b",
            "a b.gguf",
            "a\\b",
            "mod\u{e9}l.gguf",
            "a/",
            &"a".repeat(257),
        ] {
            assert!(!is_model_path(bad), "{bad:?}");
        }
    }
    use crate::driver::lookup;

    fn draft(owner: TenantId) -> MachineDraft {
        MachineDraft {
            owner: Some(owner),
            name: "studio".into(),
            regions: vec!["local".into()],
            os: "linux".into(),
            arch: "x86_64".into(),
            cpus: 2,
            memory_bytes: 1 << 30,
            ..MachineDraft::default()
        }
    }

    #[test]
    fn a_machine_needs_exactly_one_valid_region() {
        let owner = TenantId::new();
        assert!(draft(owner).validate().is_ok());
        let none = MachineDraft {
            regions: vec![],
            ..draft(owner)
        };
        assert_eq!(none.validate(), Err(InvalidMachine::RegionCount(0)));
        let two = MachineDraft {
            regions: vec!["a".into(), "b".into()],
            ..draft(owner)
        };
        assert_eq!(two.validate(), Err(InvalidMachine::RegionCount(2)));
        let bad = MachineDraft {
            regions: vec!["Bad Region".into()],
            ..draft(owner)
        };
        assert!(matches!(bad.validate(), Err(InvalidMachine::Region(_))));
    }

    #[test]
    fn hosts_only_its_region_and_its_owner_unless_community() {
        let owner = TenantId::new();
        let guest = TenantId::new();
        let local = Region::new("local").unwrap();
        let other = Region::new("other").unwrap();
        let mut m = draft(owner).validate().unwrap();
        assert!(m.can_host(owner, &local));
        assert!(!m.can_host(owner, &other));
        assert!(!m.can_host(guest, &local));
        m.sharing = SharingLevel::InviteOnly;
        assert!(!m.can_host(guest, &local));
        m.sharing = SharingLevel::Community;
        assert!(m.can_host(guest, &local));
        assert!(!m.can_host(guest, &other));
    }

    #[test]
    fn weak_isolation_only_for_the_owning_user() {
        let owner = TenantId::new();
        let guest = TenantId::new();
        let (you, teammate) = (UserId::new(), UserId::new());
        let mut m = draft(owner).validate().unwrap();
        m.owner_user = Some(you);
        m.sharing = SharingLevel::Community;
        for weak in ["docker", "linux-native", "macos-native", "sim"] {
            let d = lookup(weak).unwrap();
            assert!(m.permits(d, owner, Some(you)), "{weak}");
            assert!(
                !m.permits(d, owner, Some(teammate)),
                "{weak}: a teammate is a guest"
            );
            assert!(!m.permits(d, owner, None), "{weak}: nobody's workload");
            assert!(
                !m.permits(d, guest, Some(you)),
                "{weak}: the user, another tenant"
            );
        }
        assert!(m.permits(lookup("libvirt").unwrap(), owner, Some(teammate)));
        assert!(m.permits(lookup("libvirt").unwrap(), guest, None));
        m.trusted_users = vec![teammate];
        let native = lookup("linux-native").unwrap();
        assert!(
            m.permits(native, owner, Some(teammate)),
            "a trusted teammate"
        );
        assert!(
            !m.permits(native, guest, Some(teammate)),
            "within the tenant only"
        );
        m.owner_user = None;
        assert!(m.requires_strong_isolation(owner, Some(teammate)));
        assert!(
            m.requires_strong_isolation(owner, None),
            "no owning user trusts nobody"
        );
    }
}
