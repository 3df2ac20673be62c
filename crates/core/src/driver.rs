//! The driver table. A driver's isolation comes from here, never from what an agent reports:
//! an agent can only say which of these drivers it has.

use crate::accelerator::AcceleratorKind;
use crate::kind::WorkloadKind;

/// How well a driver separates a workload from its machine and its owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// The workload shares the owner's kernel and user (macos-native, linux-native, plain
    /// docker, sim):
    /// only for the machine owner's own workloads.
    Weak,
    /// A VM or an equivalent boundary.
    Strong,
}

/// Operating systems an agent runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Os {
    Linux,
    MacOs,
    Any,
}

#[derive(Debug, PartialEq, Eq)]
pub struct DriverInfo {
    pub name: &'static str,
    pub isolation: Isolation,
    pub kinds: &'static [WorkloadKind],
    pub accelerators: &'static [AcceleratorKind],
    pub os: Os,
    /// How many of its workloads one machine may run at once (macos-vz: two macOS VMs per Mac).
    pub per_machine_limit: Option<u32>,
}

impl DriverInfo {
    pub fn runs(&self, kind: WorkloadKind, accelerator: AcceleratorKind) -> bool {
        self.kinds.contains(&kind) && self.accelerators.contains(&accelerator)
    }
}

use AcceleratorKind::{Amd, Apple, Cpu, Nvidia};
use WorkloadKind::{Endpoint, Notebook, Vm};

const DRIVERS: &[DriverInfo] = &[
    // Runs nothing: for development and tests.
    DriverInfo {
        name: "sim",
        isolation: Isolation::Weak,
        kinds: &[Vm, Notebook, Endpoint],
        accelerators: &[Nvidia, Apple, Amd, Cpu],
        os: Os::Any,
        per_machine_limit: None,
    },
    DriverInfo {
        name: "docker",
        isolation: Isolation::Weak,
        kinds: &[Notebook, Endpoint],
        accelerators: &[Nvidia, Cpu],
        os: Os::Linux,
        per_machine_limit: None,
    },
    // Sandboxed processes (bubblewrap) on Linux machines without Docker.
    DriverInfo {
        name: "linux-native",
        isolation: Isolation::Weak,
        kinds: &[Notebook, Endpoint],
        accelerators: &[Nvidia, Cpu],
        os: Os::Linux,
        per_machine_limit: None,
    },
    DriverInfo {
        name: "macos-native",
        isolation: Isolation::Weak,
        kinds: &[Notebook, Endpoint],
        accelerators: &[Apple, Cpu],
        os: Os::MacOs,
        per_machine_limit: None,
    },
    DriverInfo {
        name: "macos-container",
        isolation: Isolation::Strong,
        kinds: &[Notebook],
        accelerators: &[Cpu],
        os: Os::MacOs,
        per_machine_limit: None,
    },
    DriverInfo {
        name: "macos-vz",
        isolation: Isolation::Strong,
        kinds: &[Vm],
        accelerators: &[Apple, Cpu],
        os: Os::MacOs,
        per_machine_limit: Some(2),
    },
    // NVIDIA GPUs passed through whole with VFIO (the agent checks their IOMMU groups).
    DriverInfo {
        name: "libvirt",
        isolation: Isolation::Strong,
        kinds: &[Vm],
        accelerators: &[Nvidia, Cpu],
        os: Os::Linux,
        per_machine_limit: None,
    },
];

/// The driver called `name`, if Einsora has one.
pub fn lookup(name: &str) -> Option<&'static DriverInfo> {
    DRIVERS.iter().find(|d| d.name == name)
}

/// Every driver Einsora knows.
pub fn all() -> &'static [DriverInfo] {
    DRIVERS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weak_isolation_is_exactly_the_seeds_list() {
        let weak: Vec<_> = all()
            .iter()
            .filter(|d| d.isolation == Isolation::Weak)
            .map(|d| d.name)
            .collect();
        assert_eq!(weak, ["sim", "docker", "linux-native", "macos-native"]);
    }

    #[test]
    fn unknown_drivers_are_not_found() {
        assert!(lookup("docker").is_some());
        assert!(lookup("Docker").is_none());
        assert!(lookup("").is_none());
    }
}
