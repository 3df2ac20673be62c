//! A machine's inventory report, checked before it is recorded: a report that doesn't fit a
//! machine is refused (the machine keeps what it had), whatever else the stream does.

use einsora_core::accelerator::AcceleratorKind;
use einsora_core::machine::Device;
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
        last_seen_at: Some(now),
    })
}
