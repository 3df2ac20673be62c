//! A machine's inventory, as the store records it: the agent measured it, the store knows who
//! the machine is. A report that doesn't convert (`einsora_proto::convert::InventoryReport`) is
//! refused before it gets here, and the machine keeps what it had.

use einsora_proto::convert::InventoryReport;
use einsora_store::{MachineRecord, MachineRegistration};
use time::OffsetDateTime;

/// The registration `report` makes of `known`: its identity, owner, region and sharing stay
/// the store's; only what the agent measures changes.
pub fn registration(
    known: &MachineRecord,
    report: InventoryReport,
    now: OffsetDateTime,
) -> MachineRegistration {
    let measured = report.machine;
    let mut machine = known.machine.clone();
    if !measured.hostname.is_empty() {
        machine.name = measured.hostname;
    }
    machine.os = measured.os;
    machine.arch = measured.arch;
    machine.cpus = measured.cpus;
    machine.memory_bytes = measured.memory_bytes;
    machine.devices = measured.devices;
    machine.cores = measured.cores;
    MachineRegistration {
        machine,
        drivers: report.drivers,
        models: report.models,
        gpu_note: report.gpu_note,
        vm: report.vm,
        last_seen_at: Some(now),
    }
}

#[cfg(test)]
mod tests {
    use einsora_core::ids::{MachineId, TenantId};
    use einsora_core::machine::Machine;
    use einsora_core::machine::{CpuCores, Inventory, ModelFile};
    use einsora_core::region::Region;
    use einsora_core::sharing::SharingLevel;

    use super::*;

    fn known() -> MachineRecord {
        MachineRecord {
            machine: Machine {
                trusted_users: Vec::new(),
                owner_user: None,
                id: MachineId::new(),
                owner: TenantId::new(),
                name: "box".into(),
                region: Region::new("local").unwrap(),
                os: "linux".into(),
                arch: "x86_64".into(),
                cpus: 4,
                memory_bytes: 8 << 30,
                devices: vec![],
                sharing: SharingLevel::Private,
                cores: None,
            },
            drivers: vec![],
            models: vec![],
            gpu_note: None,
            vm: None,
            gpu_usage: vec![],
            gpu_usage_at: None,
            last_seen_at: None,
            revoked_at: None,
            created_at: OffsetDateTime::UNIX_EPOCH,
            workload_count: 0,
            flag: None,
        }
    }

    /// What the agent measures replaces what the store had; who the machine is doesn't.
    #[test]
    fn the_agent_measures_and_the_store_names() {
        let known = known();
        let report = InventoryReport {
            machine: Inventory {
                hostname: "gpu-box".into(),
                os: "linux".into(),
                arch: "aarch64".into(),
                cpus: 16,
                memory_bytes: 64 << 30,
                devices: vec![],
                cores: Some(CpuCores {
                    performance: 12,
                    efficiency: 4,
                }),
            },
            drivers: vec!["docker".into()],
            agent_version: "0.1.0".into(),
            models: vec![ModelFile {
                path: "tiny.gguf".into(),
                size_bytes: 10,
            }],
            gpu_note: None,
            vm: None,
        };
        let now = OffsetDateTime::now_utc();
        let reg = registration(&known, report.clone(), now);
        assert_eq!(reg.machine.id, known.machine.id);
        assert_eq!(reg.machine.owner, known.machine.owner);
        assert_eq!(reg.machine.sharing, known.machine.sharing);
        assert_eq!(reg.machine.name, "gpu-box");
        assert_eq!(
            (reg.machine.cpus, reg.machine.arch.as_str()),
            (16, "aarch64")
        );
        assert_eq!(reg.machine.cores, report.machine.cores);
        assert_eq!(reg.models, report.models);
        assert_eq!(reg.last_seen_at, Some(now));
        let mut nameless = report;
        nameless.machine.hostname.clear();
        assert_eq!(registration(&known, nameless, now).machine.name, "box");
    }
}
