//! A machine's inventory report, checked before it is recorded: a report that doesn't fit a
//! machine is refused (the machine keeps what it had), whatever else the stream does.

use einsora_core::accelerator::AcceleratorKind;
use einsora_core::machine::{Device, ModelFile, is_model_path};
use einsora_proto::agent::v1 as pb;
use einsora_proto::convert::ProtoEnum;
use einsora_store::{MachineRecord, MachineRegistration};
use time::OffsetDateTime;

use super::limits::{MAX_DEVICES, MAX_TEXT};

const MAX_CPUS: u32 = 4096;
const MIN_MEMORY: u64 = 64 << 20;

/// The registration `report` makes of `known`: its identity, owner, region and sharing stay
/// the store's; only what the agent measures changes. `Err` says what doesn't fit.
pub fn registration(
    known: &MachineRecord,
    report: &pb::Inventory,
    now: OffsetDateTime,
) -> Result<MachineRegistration, String> {
    let text = |what: &str, v: &str, empty_ok: bool| -> Result<String, String> {
        if (!empty_ok && v.is_empty()) || v.len() > MAX_TEXT || v.chars().any(char::is_control) {
            return Err(format!(
                "{what} is empty, too long or has control characters"
            ));
        }
        Ok(v.to_owned())
    };
    if report.cpus == 0 || report.cpus > MAX_CPUS {
        return Err(format!("{} CPUs", report.cpus));
    }
    if report.memory_bytes < MIN_MEMORY {
        return Err(format!("{} bytes of memory", report.memory_bytes));
    }
    if report.devices.len() > MAX_DEVICES {
        return Err(format!("{} devices", report.devices.len()));
    }
    let mut devices = Vec::with_capacity(report.devices.len());
    for (i, d) in report.devices.iter().enumerate() {
        let vendor = AcceleratorKind::from_field(&format!("devices[{i}].vendor"), d.vendor)
            .map_err(|e| e.to_string())?;
        let uuid = text("a device's uuid", &d.uuid, false)?;
        if devices.iter().any(|x: &Device| x.uuid == uuid) {
            return Err(format!("device {uuid} twice"));
        }
        devices.push(Device {
            vendor,
            model: text("a device's model", &d.model, false)?,
            uuid,
            memory_bytes: d.memory_bytes,
        });
    }
    let mut models: Vec<ModelFile> = Vec::with_capacity(report.models.len());
    for m in &report.models {
        if !is_model_path(&m.path) {
            return Err(format!("a model path an endpoint can't name: {:?}", m.path));
        }
        if models.iter().any(|x| x.path == m.path) {
            return Err(format!("model {} twice", m.path));
        }
        models.push(ModelFile {
            path: m.path.clone(),
            size_bytes: m.size_bytes,
        });
    }
    for driver in &report.drivers {
        if einsora_core::driver::lookup(driver).is_none() {
            return Err(format!("an unknown driver {driver:?}"));
        }
    }
    let hostname = text("the hostname", &report.hostname, true)?;
    let mut machine = known.machine.clone();
    if !hostname.is_empty() {
        machine.name = hostname;
    }
    machine.os = text("the OS", &report.os, false)?;
    machine.arch = text("the architecture", &report.arch, false)?;
    machine.cpus = report.cpus;
    machine.memory_bytes = report.memory_bytes;
    machine.devices = devices;
    Ok(MachineRegistration {
        machine,
        drivers: report.drivers.clone(),
        models,
        last_seen_at: Some(now),
    })
}

#[cfg(test)]
mod tests {
    use einsora_core::ids::{MachineId, TenantId};
    use einsora_core::machine::Machine;
    use einsora_core::region::Region;
    use einsora_core::sharing::SharingLevel;
    use einsora_proto::common::v1 as common_pb;

    use super::*;

    fn known() -> MachineRecord {
        MachineRecord {
            machine: Machine {
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
            },
            drivers: vec![],
            models: vec![],
            last_seen_at: None,
            revoked_at: None,
            created_at: OffsetDateTime::UNIX_EPOCH,
            workload_count: 0,
            flag: None,
        }
    }

    fn reporting(models: &[&str]) -> pb::Inventory {
        pb::Inventory {
            os: "linux".into(),
            arch: "x86_64".into(),
            cpus: 4,
            memory_bytes: 8 << 30,
            drivers: vec!["docker".into()],
            models: models
                .iter()
                .map(|path| common_pb::ModelFile {
                    path: (*path).into(),
                    size_bytes: 10,
                })
                .collect(),
            ..pb::Inventory::default()
        }
    }

    /// The model files a machine offers are paths an endpoint can name, each once; anything
    /// else refuses the whole report, and the machine keeps what it had.
    #[test]
    fn model_files_are_paths_an_endpoint_can_name() {
        let now = OffsetDateTime::now_utc();
        let reg = registration(&known(), &reporting(&["tiny.gguf", "team/b.gguf"]), now).unwrap();
        let paths: Vec<_> = reg.models.iter().map(|m| m.path.as_str()).collect();
        assert_eq!(paths, ["tiny.gguf", "team/b.gguf"]);
        assert_eq!(reg.models[0].size_bytes, 10);
        for (bad, why) in [
            ("/etc/passwd", "can't name"),
            ("../outside.gguf", "can't name"),
            ("a b.gguf", "can't name"),
            ("", "can't name"),
        ] {
            let err = registration(&known(), &reporting(&[bad]), now).unwrap_err();
            assert!(err.contains(why), "{bad:?}: {err}");
        }
        let err = registration(&known(), &reporting(&["a.gguf", "a.gguf"]), now).unwrap_err();
        assert!(err.contains("twice"), "{err}");
    }
}
