//! Fallback placement (the seeds' ADR-0010, "Regions and fallback placement"): a workload's
//! `fallback` is an ordered list of other classes, or `cpu`, tried once it has waited
//! `fallback_after_s` for the class it requested. The requested class is kept (`gpu_class`, on
//! which quota is held) and the class it runs on is recorded (`placed_class`, on which usage is
//! counted). Freed capacity goes to the requested class's waiters first: admission tries every
//! waiting workload on its requested class before any on its fallbacks (`reconcile::admit`).
//!
//! `cpu` stands for the CPU class closest to the requested one: the smallest of the region's
//! CPU classes the image runs on with at least the requested class's CPUs and memory, or the
//! largest of them if none is that large (a model that needs a GPU's memory needs it in RAM).

use std::time::Duration;

use einsora_core::accelerator::AcceleratorKind;
use einsora_core::catalog::{Catalog, ComputeClass};
use einsora_core::reasons::{Fallback, FallbackTry, Reason};
use einsora_core::workload::Workload;

use super::Decision;

/// The entry of a fallback list that stands for a CPU class.
pub const CPU: &str = "cpu";

/// How long it waits for its requested class before its fallbacks are tried: its
/// `fallback_after_s`, or none at all without one.
pub fn after(w: &Workload) -> Duration {
    Duration::from_secs(w.fallback_after_s.map_or(0, u64::from))
}

/// Whether its fallbacks are tried now: it has some, and has waited `after` since it last went
/// to pending.
pub fn due(w: &Workload, waited: Duration) -> bool {
    !w.fallback.is_empty() && waited >= after(w)
}

/// The classes its fallback list names, in its order, each once and never the requested one:
/// those offered in its region that its image runs as its kind.
pub fn classes<'c>(w: &Workload, catalog: &'c Catalog) -> Vec<&'c ComputeClass> {
    let Some(image) = catalog.image(&w.image).filter(|i| i.supports(w.kind)) else {
        return Vec::new();
    };
    let usable = |c: &&ComputeClass| c.offered_in(&w.region) && image.runs_on(c);
    let mut found: Vec<&ComputeClass> = Vec::new();
    for name in &w.fallback {
        let class = if name == CPU {
            closest_cpu_class(w, catalog, &usable)
        } else {
            catalog.class(name).filter(usable)
        };
        if let Some(class) = class
            && class.name() != w.gpu_class
            && !found.iter().any(|f| f.name() == class.name())
        {
            found.push(class);
        }
    }
    found
}

fn closest_cpu_class<'c>(
    w: &Workload,
    catalog: &'c Catalog,
    usable: &impl Fn(&&'c ComputeClass) -> bool,
) -> Option<&'c ComputeClass> {
    let (cpus, memory) = catalog
        .class(&w.gpu_class)
        .map_or((0, 0), |c| (c.cpus(), c.memory_bytes()));
    let mut cpu: Vec<&ComputeClass> = catalog
        .classes()
        .iter()
        .filter(|c| c.accelerator() == AcceleratorKind::Cpu)
        .filter(usable)
        .collect();
    cpu.sort_by_key(|c| (c.cpus(), c.memory_bytes()));
    cpu.iter()
        .find(|c| c.cpus() >= cpus && c.memory_bytes() >= memory)
        .or(cpu.last())
        .copied()
}

/// An admission on a fallback class, its reason saying so.
pub(super) fn admitted_as_fallback(decision: Decision, w: &Workload) -> Decision {
    match decision {
        Decision::Admit {
            admission,
            reason:
                Reason::Admitted {
                    units,
                    class,
                    served_by,
                    on,
                    fallback: _,
                },
        } => Decision::Admit {
            admission,
            reason: Reason::Admitted {
                units,
                class,
                served_by,
                on,
                fallback: Some(Box::new(Fallback {
                    requested: w.gpu_class.clone(),
                    after: after(w),
                })),
            },
        },
        other => other,
    }
}

/// Why it waits, for a workload with fallbacks: when they are tried, or that they had no room
/// (`tried`) either. Without fallbacks, the wait as it is.
pub fn wait(w: &Workload, wait: Reason, tried: bool) -> Reason {
    if w.fallback.is_empty() {
        return wait;
    }
    Reason::WaitingWithFallbacks {
        wait: Box::new(wait),
        fallbacks: w.fallback.clone(),
        tried: if tried {
            FallbackTry::NoRoom
        } else {
            FallbackTry::After(after(w))
        },
    }
}
