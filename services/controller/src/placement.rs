//! Placement: the one place that decides where a workload runs and whether it fits now. On a
//! cluster backend that is the requested class, if the region has its units free; on node
//! agents, a machine and a driver (`agents`). Either way, a workload that has waited long enough
//! for its class tries its opt-in fallbacks (`fallback`).

use std::collections::BTreeMap;

pub mod agents;
pub mod fallback;

use einsora_core::backend::{Spec, Target};
use einsora_core::catalog::{Catalog, ComputeClass, Image};
use einsora_core::kind::WorkloadKind;
use einsora_core::reasons::{CapacityUnit, CatalogEntry, Reason};
use einsora_core::workload::Workload;
use einsora_store::Admission;

/// Units free per class in the region: what the backend has, less what the store says is held.
/// Admissions in a pass take from it, so one pass never over-admits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Free(BTreeMap<String, u64>);

impl Free {
    pub fn new(totals: BTreeMap<String, u64>, held: &BTreeMap<String, u64>) -> Self {
        Free(
            totals
                .into_iter()
                .map(|(class, total)| {
                    let taken = held.get(&class).copied().unwrap_or(0);
                    (class, total.saturating_sub(taken))
                })
                .collect(),
        )
    }

    pub fn of(&self, class: &str) -> u64 {
        self.0.get(class).copied().unwrap_or(0)
    }

    fn take(&mut self, class: &str, units: u64) {
        if let Some(free) = self.0.get_mut(class) {
            *free = free.saturating_sub(units);
        }
    }
}

/// What admission does with a waiting workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Admit {
        admission: Admission,
        reason: Reason,
    },
    Wait(Reason),
    /// Its class or image left the catalog: it can never start as asked.
    Fail(Reason),
}

/// The catalog entries a workload on `class` needs, or why it can't have them any more.
fn resolve<'c>(
    w: &Workload,
    class: &str,
    catalog: &'c Catalog,
) -> Result<(&'c ComputeClass, &'c Image), Reason> {
    let gone = |entry, name: &str| Reason::NoLongerOffered {
        entry,
        name: name.to_owned(),
    };
    let class = catalog
        .class(class)
        .ok_or_else(|| gone(CatalogEntry::GpuClass, class))?;
    let image = catalog
        .image(&w.image)
        .filter(|i| i.supports(w.kind) && i.runs_on(class))
        .ok_or_else(|| gone(CatalogEntry::Image, &w.image))?;
    Ok((class, image))
}

/// Decides for one waiting workload on its requested class, taking its units from `free` when
/// it is admitted.
pub fn place(w: &Workload, catalog: &Catalog, trusted: bool, free: &mut Free) -> Decision {
    place_on(w, &w.gpu_class, catalog, trusted, free)
}

/// Tries its fallback classes in order (`open` says which it may take now), taking the first
/// with room; `None` if none has.
pub fn place_fallback(
    w: &Workload,
    catalog: &Catalog,
    free: &mut Free,
    open: impl Fn(&ComputeClass) -> bool,
) -> Option<Decision> {
    fallback::classes(w, catalog)
        .into_iter()
        .filter(|class| open(class))
        .find_map(
            |class| match place_on(w, class.name(), catalog, false, free) {
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
    free: &mut Free,
) -> Decision {
    let (class, image) = match resolve(w, class, catalog) {
        Ok(found) => found,
        Err(reason) => return Decision::Fail(reason),
    };
    let units = u64::from(w.units);
    let available = free.of(class.name());
    if available < units {
        // A CPU class's units are counted in its CPUs, as its workloads take them.
        let unit = CapacityUnit::of(class.accelerator());
        let per_unit = match unit {
            CapacityUnit::Cpus => u64::from(class.cpus()),
            CapacityUnit::Gpus => 1,
        };
        let count = |n: u64| u32::try_from(n.saturating_mul(per_unit)).unwrap_or(u32::MAX);
        return Decision::Wait(Reason::WaitingForCapacity {
            class: class.name().to_owned(),
            unit,
            requested: count(units),
            free: trusted.then(|| count(available)),
        });
    }
    free.take(class.name(), units);
    let served_by = (w.kind == WorkloadKind::Endpoint)
        .then(|| image.runtime_for(class.accelerator()))
        .flatten()
        .map(|r| r.name().to_owned());
    Decision::Admit {
        admission: Admission {
            placed_class: class.name().to_owned(),
            machine_id: None,
            driver: None,
            devices: Vec::new(),
        },
        reason: Reason::Admitted {
            units: w.units,
            class: class.name().to_owned(),
            served_by,
            on: None,
            fallback: None,
        },
    }
}

/// An admitted workload as its backend runs it: on its placed class.
pub fn spec(w: &Workload, catalog: &Catalog) -> Result<Spec, Reason> {
    let placed = w.placed_class.as_deref().unwrap_or(&w.gpu_class);
    let (class, image) = resolve(w, placed, catalog)?;
    let runtime = image
        .runtime_for(class.accelerator())
        .map(|r| r.name().to_owned())
        .unwrap_or_default();
    Ok(Spec {
        target: Target::of(w),
        tenant: w.tenant_id,
        name: w.name.clone(),
        class: class.name().to_owned(),
        units: w.units,
        image: image.name().to_owned(),
        runtime,
        driver: w.driver.clone(),
        params: w.params.clone(),
    })
}

#[cfg(test)]
mod tests;
