//! Placement on node agents (seeds: "Admission and placement", the agent bullets): a machine
//! and a driver for a waiting workload, or the reason it waits.
//!
//! - the machine can host the tenant's workload in its region (`Machine::can_host`);
//! - a driver the catalog enables, the machine's agent has, the image lists for the class's
//!   accelerator and kind (`Image::drivers_for`), and the trust matrix allows
//!   (`Machine::permits`: weak isolation only for the owner's own workloads);
//! - the class's devices, CPUs and memory are free there: NVIDIA and AMD devices by model, a
//!   Mac's GPU by the largest Apple class its memory holds; a driver's per-machine limit holds;
//! - the workload is given concrete devices, by UUID, that no workload holding capacity on the
//!   machine holds (in the admission's own transaction: two waiting workloads never get one);
//! - a VM or notebook that ran before returns to the machine and driver holding its disk, and
//!   waits for them;
//! - a CPU workload on macos-native also holds its Mac's Apple GPU, exclusively (its code can
//!   use Metal), and waits while another holds it.

use std::collections::{HashMap, HashSet};

use einsora_core::accelerator::AcceleratorKind;
use einsora_core::catalog::{Catalog, ComputeClass};
use einsora_core::kind::WorkloadKind;
use einsora_core::machine::{Device, Machine};
use einsora_core::reasons::{CapacityUnit, Placement, Reason};
use einsora_core::workload::Workload;
use einsora_store::Admission;

use super::{Decision, fallback, resolve};

/// The driver whose CPU workloads can still use a Mac's GPU.
const MACOS_NATIVE: &str = "macos-native";

/// A machine as placement sees it.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub machine: Machine,
    /// The drivers its agent has.
    pub drivers: Vec<String>,
    /// At most this many VMs at once, as its owner set, beside each driver's own limit from
    /// the driver table.
    pub vm_limit: Option<u32>,
    /// Online, with an inventory that fits it: offered for placement.
    pub offered: bool,
    /// What the workloads already placed there hold.
    pub held: Held,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Held {
    pub cpus: u32,
    pub memory_bytes: u64,
    /// Devices taken, by class.
    pub devices: HashMap<String, u32>,
    /// Devices taken, by UUID (workloads admitted before devices were recorded hold a count
    /// only).
    pub device_uuids: HashSet<String>,
    /// Workloads per driver.
    pub per_driver: HashMap<String, u32>,
    /// VMs, whichever driver runs them.
    pub vms: u32,
}

/// Decides for one waiting workload on its requested class, taking what it needs from its
/// machine's `held`. A `trusted` tenant's wait for capacity says how much the roomiest machine
/// has free.
pub fn place(
    w: &Workload,
    catalog: &Catalog,
    trusted: bool,
    machines: &mut [Candidate],
) -> Decision {
    place_on(w, &w.gpu_class, catalog, trusted, machines)
}

/// Tries its fallback classes in order (`open` says which it may take now) on the machines it
/// may use, taking the first with room; `None` if none has. A VM or notebook that ran before
/// still goes back to its machine and driver.
pub fn place_fallback(
    w: &Workload,
    catalog: &Catalog,
    machines: &mut [Candidate],
    open: impl Fn(&ComputeClass) -> bool,
) -> Option<Decision> {
    fallback::classes(w, catalog)
        .into_iter()
        .filter(|class| open(class))
        .find_map(
            |class| match place_on(w, class.name(), catalog, false, machines) {
                admit @ Decision::Admit { .. } => Some(fallback::admitted_as_fallback(admit, w)),
                Decision::Wait(_) | Decision::Fail(_) => None,
            },
        )
}

fn place_on(
    w: &Workload,
    class: &str,
    catalog: &Catalog,
    trusted: bool,
    machines: &mut [Candidate],
) -> Decision {
    let (class, image) = match resolve(w, class, catalog) {
        Ok(found) => found,
        Err(reason) => return Decision::Fail(reason),
    };
    let returning = matches!(w.kind, WorkloadKind::Vm | WorkloadKind::Notebook)
        .then_some(w.machine_id)
        .flatten();
    let (mut any_host, mut any_driver, mut any_offered) = (false, false, false);
    // A machine whose drivers for it all isolate weakly, and it isn't its owning user's.
    let mut needs_isolation = false;
    let unit = CapacityUnit::of(class.accelerator());
    let requested = match unit {
        CapacityUnit::Gpus => devices_needed(w, class),
        CapacityUnit::Cpus => class.cpus(),
    };
    // The most any one offered machine has free, in the class's unit.
    let mut most_free = 0;
    // A Mac that would take it, but for its Apple GPU in another workload's hands.
    let mut waits_for_apple_gpu = false;
    // A machine that would take it, but for its driver's limit (or its owner's); and one
    // whose drivers had room (then what it lacks is capacity, not room).
    let (mut machines_at_a_limit, mut any_with_room) = (false, false);
    for candidate in machines.iter_mut() {
        let m = &candidate.machine;
        if !m.can_host(w.tenant_id, &w.region) || returning.is_some_and(|id| id != m.id) {
            continue;
        }
        // A machine without the class's devices can't run it, however idle.
        if devices_needed(w, class) > 0 && devices_of(m, class, catalog) == 0 {
            continue;
        }
        any_host = true;
        let (drivers, weak): (Vec<_>, Vec<_>) = image
            .drivers_for(w.kind, class.accelerator())
            .filter(|d| catalog.driver(d.name).is_some())
            .filter(|d| candidate.drivers.iter().any(|have| have == d.name))
            .filter(|d| returning.is_none() || w.driver.as_deref() == Some(d.name))
            .partition(|d| m.permits(d, w.tenant_id, w.owner));
        if drivers.is_empty() {
            needs_isolation |= !weak.is_empty();
            continue;
        }
        any_driver = true;
        if !candidate.offered {
            continue;
        }
        any_offered = true;
        // The first of its drivers with room here, and whose needs are free: on a Mac, a CPU
        // workload's macos-native needs the Apple GPU too, which macos-container doesn't.
        let apple_gpu_held = apple_gpu_held(m, &candidate.held, catalog);
        // The owner's limit counts the machine's VMs, whichever driver runs them; the driver
        // table's, each driver's workloads.
        let vms_full = w.kind == WorkloadKind::Vm
            && candidate
                .vm_limit
                .is_some_and(|limit| candidate.held.vms >= limit);
        let (with_room, full): (Vec<_>, Vec<_>) = drivers.into_iter().partition(|d| {
            !vms_full
                && d.per_machine_limit.is_none_or(|limit| {
                    candidate.held.per_driver.get(d.name).copied().unwrap_or(0) < limit
                })
        });
        if with_room.is_empty() && !full.is_empty() {
            machines_at_a_limit = true;
            continue;
        }
        any_with_room = true;
        let mut with_room = with_room.into_iter();
        let Some((driver, apple_gpu)) =
            with_room.find_map(|d| match reserved_apple_gpu(class, d.name, m) {
                Some(_) if apple_gpu_held => None,
                gpu => Some((d, gpu)),
            })
        else {
            // Every driver with room would need the Apple GPU another workload holds.
            let needs_the_gpu = || {
                let mut drivers = image
                    .drivers_for(w.kind, class.accelerator())
                    .filter(|d| candidate.drivers.iter().any(|have| have == d.name));
                drivers.any(|d| reserved_apple_gpu(class, d.name, m).is_some())
            };
            if apple_gpu_held && needs_the_gpu() {
                waits_for_apple_gpu = true;
            }
            continue;
        };
        let devices = devices_needed(w, class);
        let held_count = candidate
            .held
            .devices
            .get(class.name())
            .copied()
            .unwrap_or(0);
        let free: Vec<&Device> = matching(m, class, catalog)
            .filter(|d| !candidate.held.device_uuids.contains(&d.uuid))
            .collect();
        let counted_free = devices_of(m, class, catalog).saturating_sub(held_count);
        let free_devices = counted_free.min(u32::try_from(free.len()).unwrap_or(u32::MAX));
        let memory_fits = candidate.held.memory_bytes + class.memory_bytes() <= m.memory_bytes;
        let free_cpus = m.cpus.saturating_sub(candidate.held.cpus);
        let host_fits = class.cpus() <= free_cpus && memory_fits;
        most_free = most_free.max(match unit {
            // GPUs it can't have for want of the class's CPUs or memory aren't free to it.
            CapacityUnit::Gpus if host_fits => free_devices,
            // CPUs it can't have for want of memory aren't free to it.
            CapacityUnit::Cpus if memory_fits => free_cpus,
            CapacityUnit::Gpus | CapacityUnit::Cpus => 0,
        });
        let fits = host_fits && free_devices >= devices;
        if !fits {
            continue;
        }
        let given: Vec<String> = free
            .iter()
            .copied()
            .take(devices as usize)
            .chain(apple_gpu)
            .map(|d| d.uuid.clone())
            .collect();
        let held = &mut candidate.held;
        held.device_uuids.extend(given.iter().cloned());
        held.cpus += class.cpus();
        held.memory_bytes += class.memory_bytes();
        *held.devices.entry(class.name().to_owned()).or_default() += devices;
        *held.per_driver.entry(driver.name.to_owned()).or_default() += 1;
        if w.kind == WorkloadKind::Vm {
            held.vms += 1;
        }
        let served_by = (w.kind == WorkloadKind::Endpoint)
            .then(|| image.runtime_for(class.accelerator()))
            .flatten()
            .map(|r| r.name().to_owned());
        return Decision::Admit {
            admission: Admission {
                placed_class: class.name().to_owned(),
                machine_id: Some(m.id),
                driver: Some(driver.name.to_owned()),
                devices: given,
            },
            reason: Reason::Admitted {
                units: w.units,
                class: class.name().to_owned(),
                served_by,
                on: Some(Placement {
                    machine: m.name.clone(),
                    driver: driver.name.to_owned(),
                    reserves_apple_gpu: apple_gpu.is_some(),
                }),
                fallback: None,
            },
        };
    }
    let class_name = class.name().to_owned();
    if waits_for_apple_gpu {
        return Decision::Wait(Reason::WaitingForAppleGpu { class: class_name });
    }
    if machines_at_a_limit && !any_with_room {
        return Decision::Wait(Reason::WaitingForDriverRoom {
            kind: w.kind,
            class: class_name,
        });
    }
    Decision::Wait(match (returning, any_host, any_driver, any_offered) {
        (Some(_), _, _, false) => Reason::WaitingForItsMachine,
        (None, false, _, _) => Reason::WaitingForMachineForClass { class: class_name },
        (None, true, false, _) if needs_isolation => Reason::WaitingForIsolation {
            kind: w.kind,
            class: class_name,
        },
        (None, true, false, _) => Reason::WaitingForDriver {
            kind: w.kind,
            class: class_name,
        },
        (_, _, _, false) => Reason::WaitingForMachineForClass { class: class_name },
        (_, _, _, true) => Reason::WaitingForCapacity {
            class: class_name,
            unit,
            requested,
            free: trusted.then_some(most_free),
        },
    })
}

/// Whether a workload holds the Mac's Apple GPU: by its UUID, or by a count of an Apple class
/// (workloads admitted before devices were recorded).
fn apple_gpu_held(m: &Machine, held: &Held, catalog: &Catalog) -> bool {
    let by_uuid = m
        .devices
        .iter()
        .any(|d| d.vendor == AcceleratorKind::Apple && held.device_uuids.contains(&d.uuid));
    let by_count = held.devices.iter().any(|(class, &count)| {
        count > 0
            && catalog
                .class(class)
                .is_some_and(|c| c.accelerator() == AcceleratorKind::Apple)
    });
    by_uuid || by_count
}

/// The Apple GPU a CPU workload reserves on a Mac, exclusively while it holds capacity: a
/// macos-native workload's code can use Metal whatever its class (seeds: "Native CPU on
/// Macs"). Its usage stays on its CPU class.
fn reserved_apple_gpu<'m>(
    class: &ComputeClass,
    driver: &str,
    m: &'m Machine,
) -> Option<&'m Device> {
    (class.accelerator() == AcceleratorKind::Cpu && driver == MACOS_NATIVE)
        .then(|| {
            m.devices
                .iter()
                .find(|d| d.vendor == AcceleratorKind::Apple)
        })
        .flatten()
}

fn devices_needed(w: &Workload, class: &ComputeClass) -> u32 {
    if class.accelerator() == AcceleratorKind::Cpu {
        0
    } else {
        w.units
    }
}

/// The machine's devices of the class, in the order its agent listed them.
fn matching<'m>(
    m: &'m Machine,
    class: &'m ComputeClass,
    catalog: &'m Catalog,
) -> impl Iterator<Item = &'m Device> {
    m.devices.iter().filter(move |d| {
        d.vendor == class.accelerator()
            && match class.accelerator() {
                AcceleratorKind::Apple => catalog
                    .class_for_apple_memory(d.memory_bytes)
                    .is_some_and(|c| c.name() == class.name()),
                _ => class.matches_device_model(&d.model),
            }
    })
}

/// How many of the class's devices the machine has.
fn devices_of(m: &Machine, class: &ComputeClass, catalog: &Catalog) -> u32 {
    u32::try_from(matching(m, class, catalog).count()).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests;
