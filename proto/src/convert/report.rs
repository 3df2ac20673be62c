//! The agent protocol's reports as validated types: what an agent sends is converted once, as
//! the controller receives it, so the hub, the store and placement take domain types only. An
//! agent is attacker input: a value that breaks a rule is an error naming the field, never
//! echoing the value.

use einsora_core::accelerator::AcceleratorKind;
use einsora_core::agent::{Mode, StatusCode};
use einsora_core::ids::WorkloadId;
use einsora_core::kind::WorkloadKind;
use einsora_core::machine::{
    CpuCores, Device, GpuNote, GpuSample, Inventory, ModelFile, VmHost, is_model_path,
};
use einsora_core::output::{MAX_LINE_BYTES, OutputStream, PrintedLine, PrintedOutput};

use super::{ConvertError, Problem, ProtoEnum, parse_id};
use crate::agent::v1 as pb;
use crate::common::v1 as common_pb;

/// What one report may hold. Every message is also bounded by the decoding limit of the port
/// that receives it.
pub mod bounds {
    /// Workloads in one statuses report: far more than a machine runs.
    pub const MAX_WORKLOADS: usize = 512;
    /// A workload ID (a UUID) or a driver's name.
    pub const MAX_NAME: usize = 64;
    /// A Unix socket's path (the kernel's own limit is 108 bytes).
    pub const MAX_SOCKET_PATH: usize = 256;
    /// A workload's own token.
    pub const MAX_SECRET: usize = 512;
    /// Devices and drivers in one inventory.
    pub const MAX_DEVICES: usize = 64;
    pub const MAX_DRIVERS: usize = 32;
    /// Model files in one inventory (what the agent lists at most).
    pub const MAX_MODELS: usize = 256;
    /// A text an inventory reports (hostname, OS, architecture, a device's model or UUID, the
    /// agent's version).
    pub const MAX_TEXT: usize = 128;
    /// CPUs a machine may say it has.
    pub const MAX_CPUS: u32 = 4096;
    /// The least memory a machine may say it has.
    pub const MIN_MEMORY: u64 = 64 << 20;
    /// Lines in one output report.
    pub const MAX_OUTPUT_LINES: usize = 2048;
}
use bounds::*;

/// What a machine has, as its agent measured it, and what it can run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InventoryReport {
    /// Each device's UUID once; the hostname empty when the agent doesn't know it.
    pub machine: Inventory,
    /// Names from Einsora's driver table (their isolation comes from that table).
    pub drivers: Vec<String>,
    pub agent_version: String,
    /// Paths an endpoint can name, each once.
    pub models: Vec<ModelFile>,
    /// Why its GPUs can't be given to workloads, if they can't.
    pub gpu_note: Option<GpuNote>,
    /// How it runs VMs, where one of its drivers does.
    pub vm: Option<VmHost>,
}

/// One workload's status as its machine reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadStatus {
    pub workload_id: WorkloadId,
    pub attempt: u32,
    pub mode: Mode,
    pub code: StatusCode,
    /// The driver that runs it; empty when none took it.
    pub driver: String,
    /// Where a ready notebook or endpoint listens.
    pub access_target: Option<AccessTarget>,
}

/// A ready workload's Unix socket (an absolute path) and its own token. Kept in memory only:
/// never stored, logged, exported or put in a URL.
#[derive(Clone, PartialEq, Eq)]
pub struct AccessTarget {
    pub socket_path: String,
    /// SECRET.
    pub token: String,
}

impl std::fmt::Debug for AccessTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessTarget")
            .field("socket_path", &self.socket_path)
            .finish_non_exhaustive()
    }
}

/// A statuses report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkloadStatuses {
    pub workloads: Vec<WorkloadStatus>,
    /// How often a driver crashed and was restarted since the agent started.
    pub driver_restarts: u32,
}

impl WorkloadStatuses {
    /// The report's well-formed entries, and what was wrong with each of the others: a
    /// malformed entry decides nothing, and doesn't cost the report its good ones (a malformed
    /// access target costs its entry the target only).
    pub fn received(raw: pb::WorkloadStatuses) -> (WorkloadStatuses, Vec<ConvertError>) {
        let mut problems = Vec::new();
        let workloads = raw
            .workloads
            .into_iter()
            .enumerate()
            .filter_map(|(i, mut s)| {
                let within = format!("workloads[{i}]");
                // A target that doesn't read costs the status its target only: the workload
                // reads as not ready to open, and its status still counts.
                let target = s.access_target.take().and_then(|t| {
                    AccessTarget::try_from(t)
                        .map_err(|e| problems.push(e.within(&within)))
                        .ok()
                });
                let mut status = WorkloadStatus::try_from(s)
                    .map_err(|e| problems.push(e.within(&within)))
                    .ok()?;
                status.access_target = target;
                Some(status)
            })
            .collect();
        let statuses = WorkloadStatuses {
            workloads,
            driver_restarts: raw.driver_restarts,
        };
        (statuses, problems)
    }
}

impl ConvertError {
    /// The same error, its field named within `parent`.
    fn within(self, parent: &str) -> ConvertError {
        ConvertError::new(format!("{parent}.{}", self.field), self.problem)
    }
}

/// A text that is short, has no control characters and (unless `empty_ok`) isn't empty.
fn text(field: &str, v: String, empty_ok: bool, max: usize) -> Result<String, ConvertError> {
    if v.is_empty() && !empty_ok {
        return Err(ConvertError::new(field, Problem::Missing));
    }
    if v.len() > max || v.chars().any(char::is_control) {
        return Err(ConvertError::invalid(
            field,
            format!("at most {max} bytes, no control characters"),
        ));
    }
    Ok(v)
}

/// `Err` when a list is longer than `max`.
fn at_most<T>(field: &str, list: &[T], max: usize) -> Result<(), ConvertError> {
    if list.len() > max {
        return Err(ConvertError::invalid(
            field,
            format!("at most {max} entries"),
        ));
    }
    Ok(())
}

/// An output report: at most [`MAX_OUTPUT_LINES`] lines of at most
/// [`einsora_core::output::MAX_LINE_BYTES`], each with its stream and time, their ends in order
/// and within what the source was read to.
pub fn output(raw: pb::WorkloadOutput) -> Result<PrintedOutput, ConvertError> {
    let workload_id = parse_id("workload_id", &raw.workload_id)?;
    at_most("lines", &raw.lines, MAX_OUTPUT_LINES)?;
    if i64::try_from(raw.to_offset).is_err() {
        return Err(ConvertError::invalid("to_offset", "at most 2^63 - 1"));
    }
    let mut lines = Vec::with_capacity(raw.lines.len());
    let mut end = 0;
    for (n, l) in raw.lines.into_iter().enumerate() {
        let field = |name: &str| format!("lines[{n}].{name}");
        if l.text.len() > MAX_LINE_BYTES {
            return Err(ConvertError::invalid(
                field("text"),
                format!("at most {MAX_LINE_BYTES} bytes"),
            ));
        }
        if l.end_offset < end || l.end_offset > raw.to_offset {
            return Err(ConvertError::invalid(
                field("end_offset"),
                "at least the line before's, at most to_offset",
            ));
        }
        end = l.end_offset;
        lines.push(PrintedLine {
            stream: OutputStream::from_field(&field("stream"), l.stream)?,
            printed_at: crate::convert::required_time(&field("printed_at"), l.printed_at.as_ref())?,
            text: l.text,
            dropped_before: l.dropped_before,
            gap_before: l.gap_before,
            end: l.end_offset,
        });
    }
    Ok(PrintedOutput {
        workload_id,
        attempt: raw.attempt,
        to: raw.to_offset,
        lines,
    })
}

impl From<PrintedOutput> for pb::WorkloadOutput {
    fn from(o: PrintedOutput) -> Self {
        pb::WorkloadOutput {
            workload_id: o.workload_id.to_string(),
            attempt: o.attempt,
            to_offset: o.to,
            lines: o
                .lines
                .into_iter()
                .map(|l| pb::OutputLine {
                    stream: l.stream.to_field(),
                    printed_at: Some(crate::convert::timestamp(l.printed_at)),
                    text: l.text,
                    dropped_before: l.dropped_before,
                    end_offset: l.end,
                    gap_before: l.gap_before,
                })
                .collect(),
        }
    }
}

/// A GPU usage report, as the machine whose inventory listed `devices` sent it: each GPU one
/// of those, once, at most 100% busy, using no more memory than it has.
pub fn gpu_usage(raw: pb::GpuUsage, devices: &[Device]) -> Result<Vec<GpuSample>, ConvertError> {
    at_most("gpus", &raw.gpus, MAX_DEVICES)?;
    let mut samples: Vec<GpuSample> = Vec::with_capacity(raw.gpus.len());
    for (n, g) in raw.gpus.into_iter().enumerate() {
        let field = |name: &str| format!("gpus[{n}].{name}");
        let Some(device) = devices.iter().find(|d| d.uuid == g.uuid) else {
            return Err(ConvertError::invalid(
                field("uuid"),
                "one of the machine's reported devices",
            ));
        };
        if samples.iter().any(|s| s.uuid == g.uuid) {
            return Err(ConvertError::invalid(field("uuid"), "each device once"));
        }
        if g.utilization_percent > 100 {
            return Err(ConvertError::invalid(
                field("utilization_percent"),
                "0 to 100",
            ));
        }
        if g.memory_used_bytes > device.memory_bytes {
            return Err(ConvertError::invalid(
                field("memory_used_bytes"),
                "at most the device's memory",
            ));
        }
        samples.push(GpuSample {
            uuid: g.uuid,
            utilization_percent: g.utilization_percent,
            memory_used_bytes: g.memory_used_bytes,
        });
    }
    Ok(samples)
}

impl TryFrom<pb::Inventory> for InventoryReport {
    type Error = ConvertError;

    fn try_from(i: pb::Inventory) -> Result<Self, ConvertError> {
        if i.cpus == 0 || i.cpus > MAX_CPUS {
            return Err(ConvertError::invalid("cpus", format!("1 to {MAX_CPUS}")));
        }
        if i.memory_bytes < MIN_MEMORY {
            return Err(ConvertError::invalid(
                "memory_bytes",
                format!("at least {MIN_MEMORY}"),
            ));
        }
        at_most("devices", &i.devices, MAX_DEVICES)?;
        at_most("drivers", &i.drivers, MAX_DRIVERS)?;
        at_most("models", &i.models, MAX_MODELS)?;
        let mut devices: Vec<Device> = Vec::with_capacity(i.devices.len());
        for (n, d) in i.devices.into_iter().enumerate() {
            let field = |name: &str| format!("devices[{n}].{name}");
            let uuid = text(&field("uuid"), d.uuid, false, MAX_TEXT)?;
            if devices.iter().any(|x| x.uuid == uuid) {
                return Err(ConvertError::invalid(field("uuid"), "each device once"));
            }
            devices.push(Device {
                vendor: AcceleratorKind::from_field(&field("vendor"), d.vendor)?,
                model: text(&field("model"), d.model, false, MAX_TEXT)?,
                uuid,
                memory_bytes: d.memory_bytes,
            });
        }
        let mut models: Vec<ModelFile> = Vec::with_capacity(i.models.len());
        for (n, m) in i.models.into_iter().enumerate() {
            let field = format!("models[{n}].path");
            if !is_model_path(&m.path) {
                return Err(ConvertError::invalid(field, "a path an endpoint can name"));
            }
            if models.iter().any(|x| x.path == m.path) {
                return Err(ConvertError::invalid(field, "each model once"));
            }
            models.push(ModelFile {
                path: m.path,
                size_bytes: m.size_bytes,
            });
        }
        for (n, driver) in i.drivers.iter().enumerate() {
            if einsora_core::driver::lookup(driver).is_none() {
                return Err(ConvertError::invalid(
                    format!("drivers[{n}]"),
                    "a driver in Einsora's driver table",
                ));
            }
        }
        let cores = match i.cores {
            None => None,
            Some(c) => {
                let total = u64::from(c.performance) + u64::from(c.efficiency);
                if c.performance == 0 || total > u64::from(i.cpus) {
                    return Err(ConvertError::invalid(
                        "cores",
                        "performance cores (at least one) and efficiency cores adding up to at \
                         most its CPUs",
                    ));
                }
                Some(CpuCores {
                    performance: c.performance,
                    efficiency: c.efficiency,
                })
            }
        };
        let vm = vm_host(i.vm, &i.drivers)?;
        Ok(InventoryReport {
            machine: Inventory {
                hostname: text("hostname", i.hostname, true, MAX_TEXT)?,
                os: text("os", i.os, false, MAX_TEXT)?,
                arch: text("arch", i.arch, false, MAX_TEXT)?,
                cpus: i.cpus,
                memory_bytes: i.memory_bytes,
                devices,
                cores,
            },
            drivers: i.drivers,
            agent_version: text("agent_version", i.agent_version, true, MAX_TEXT)?,
            models,
            vm,
            gpu_note: match i.gpu_note.as_str() {
                "" => None,
                word => Some(word.parse().map_err(|_| {
                    ConvertError::invalid(
                        "gpu_note",
                        "a GPU note of Einsora's (nvidia_unusable, nvidia_cdi_incomplete)",
                    )
                })?),
            },
        })
    }
}

impl From<InventoryReport> for pb::Inventory {
    fn from(i: InventoryReport) -> Self {
        pb::Inventory {
            hostname: i.machine.hostname,
            os: i.machine.os,
            arch: i.machine.arch,
            cpus: i.machine.cpus,
            memory_bytes: i.machine.memory_bytes,
            devices: i
                .machine
                .devices
                .into_iter()
                .map(|d| pb::Device {
                    vendor: d.vendor.to_field(),
                    model: d.model,
                    uuid: d.uuid,
                    memory_bytes: d.memory_bytes,
                })
                .collect(),
            drivers: i.drivers,
            agent_version: i.agent_version,
            models: i
                .models
                .into_iter()
                .map(|m| common_pb::ModelFile {
                    path: m.path,
                    size_bytes: m.size_bytes,
                })
                .collect(),
            gpu_note: i
                .gpu_note
                .map(|n| n.as_str().to_owned())
                .unwrap_or_default(),
            cores: i.machine.cores.map(|c| common_pb::CpuCores {
                performance: c.performance,
                efficiency: c.efficiency,
            }),
            vm: i.vm.map(Into::into),
        }
    }
}

/// A reported VM host: only from a machine with a driver that runs VMs, with an acceleration
/// of Einsora's words and a limit within bounds (0: none).
fn vm_host(
    vm: Option<common_pb::VmHost>,
    drivers: &[String],
) -> Result<Option<VmHost>, ConvertError> {
    let Some(vm) = vm else { return Ok(None) };
    let runs_vms = drivers.iter().any(|d| {
        einsora_core::driver::lookup(d).is_some_and(|d| d.kinds.contains(&WorkloadKind::Vm))
    });
    if !runs_vms {
        return Err(ConvertError::invalid(
            "vm",
            "only from a machine with a driver that runs VMs",
        ));
    }
    let accel = vm
        .accel
        .parse()
        .map_err(|_| ConvertError::invalid("vm.accel", "kvm or tcg"))?;
    let limit = match vm.limit {
        0 => None,
        n if n <= VmHost::MAX_LIMIT => Some(n),
        _ => {
            return Err(ConvertError::invalid(
                "vm.limit",
                format!("at most {}", VmHost::MAX_LIMIT),
            ));
        }
    };
    Ok(Some(VmHost { accel, limit }))
}

impl From<VmHost> for common_pb::VmHost {
    fn from(vm: VmHost) -> Self {
        common_pb::VmHost {
            accel: vm.accel.as_str().to_owned(),
            limit: vm.limit.unwrap_or(0),
        }
    }
}

impl TryFrom<pb::AccessTarget> for AccessTarget {
    type Error = ConvertError;

    fn try_from(t: pb::AccessTarget) -> Result<Self, ConvertError> {
        if !t.socket_path.starts_with('/') || t.socket_path.len() > MAX_SOCKET_PATH {
            return Err(ConvertError::invalid(
                "access_target.socket_path",
                format!("an absolute path of at most {MAX_SOCKET_PATH} bytes"),
            ));
        }
        if t.token.is_empty() {
            return Err(ConvertError::new("access_target.token", Problem::Missing));
        }
        if t.token.len() > MAX_SECRET {
            return Err(ConvertError::invalid(
                "access_target.token",
                format!("at most {MAX_SECRET} bytes"),
            ));
        }
        Ok(AccessTarget {
            socket_path: t.socket_path,
            token: t.token,
        })
    }
}

impl TryFrom<pb::WorkloadStatus> for WorkloadStatus {
    type Error = ConvertError;

    fn try_from(s: pb::WorkloadStatus) -> Result<Self, ConvertError> {
        Ok(WorkloadStatus {
            workload_id: parse_id("workload_id", &s.workload_id)?,
            attempt: s.attempt,
            mode: Mode::from_field("mode", s.mode)?,
            code: StatusCode::from_field("code", s.code)?,
            driver: text("driver", s.driver, true, MAX_NAME)?,
            access_target: s.access_target.map(AccessTarget::try_from).transpose()?,
        })
    }
}

impl From<WorkloadStatus> for pb::WorkloadStatus {
    fn from(s: WorkloadStatus) -> Self {
        pb::WorkloadStatus {
            workload_id: s.workload_id.to_string(),
            attempt: s.attempt,
            mode: s.mode.to_field(),
            code: s.code.to_field(),
            driver: s.driver,
            access_target: s.access_target.map(|t| pb::AccessTarget {
                socket_path: t.socket_path,
                token: t.token,
            }),
        }
    }
}

impl From<WorkloadStatuses> for pb::WorkloadStatuses {
    fn from(s: WorkloadStatuses) -> Self {
        pb::WorkloadStatuses {
            workloads: s.workloads.into_iter().map(Into::into).collect(),
            driver_restarts: s.driver_restarts,
        }
    }
}

#[cfg(test)]
#[path = "report_tests.rs"]
mod tests;
