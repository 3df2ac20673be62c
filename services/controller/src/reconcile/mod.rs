//! One reconcile pass (seeds: "Reconcile loop"): admit, observe, park (and park idle endpoints:
//! `idle.rs`), remove, for one region,
//! by its lease holder. Each step lives in its own file; this one orders them and decides which
//! store errors end the pass.

mod admit;
pub(crate) mod idle;
mod observe;
mod settle;

use std::collections::HashSet;
use std::sync::Arc;

use einsora_core::backend::Backend;
use einsora_core::catalog::Catalog;
use einsora_core::lifecycle::State;
use einsora_core::region::Region;
use einsora_store::{Store, StoreError, WorkloadFilter};

use einsora_core::reasons::Reason;

use crate::config::Timers;
use crate::writer::{Fenced, Step};

#[derive(Debug)]
pub struct Reconciler {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) catalog: Arc<Catalog>,
    pub(crate) region: Region,
    pub(crate) timers: Timers,
    pub(crate) writer: Fenced,
    /// With the agent backend: its machines' live state, for placement on them.
    pub(crate) agents: Option<Arc<crate::agents::Hub>>,
}

/// What a pass leaves behind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Some workload is on its way somewhere (starting, stopping): look again soon.
    pub busy: bool,
}

/// The states the observe, park and remove steps look at.
const ACTIVE: [State; 4] = [
    State::Provisioning,
    State::Running,
    State::Stopping,
    State::Deleting,
];

impl Reconciler {
    /// Runs every step once. A lost lease or an unavailable store ends the pass (the caller
    /// stops or retries); a workload another writer moved meanwhile is left for the next pass.
    pub async fn pass(&mut self) -> Result<Outcome, StoreError> {
        let mut outcome = Outcome::default();
        let waiting = self.admit().await?;
        let active = self
            .store
            .workloads(&WorkloadFilter {
                region: Some(self.region.clone()),
                states: ACTIVE.to_vec(),
                ..WorkloadFilter::default()
            })
            .await?;
        let mut seen: HashSet<_> = waiting.into_iter().collect();
        let mut steps = Vec::new();
        for w in active {
            seen.insert(w.id);
            let look = match w.state {
                State::Provisioning | State::Running => self.observe(&w).await,
                State::Stopping => self.park(&w).await,
                State::Deleting => self.remove(&w).await,
                _ => Ok(Look::default()),
            };
            let look = look?;
            outcome.busy |= look.busy;
            if let Some((to, reason)) = look.step {
                steps.push(Step::to(w, to, reason));
            }
        }
        // Endpoints idle past their time, unless a step above moves them already.
        let moving: HashSet<_> = steps.iter().map(|s| s.workload.id).collect();
        let idle = self.idle(&|w| moving.contains(&w.id)).await?;
        outcome.busy |= !idle.is_empty();
        steps.extend(idle);
        // The pass's steps in one transaction: one lock and one commit, however many.
        self.writer.apply(&steps).await?;
        self.writer.retain(|id| seen.contains(&id));
        Ok(outcome)
    }
}

/// What looking at one workload decided.
#[derive(Debug, Default)]
pub(super) struct Look {
    /// The step to write, if any.
    pub step: Option<(State, Reason)>,
    /// Still on its way somewhere: look again soon.
    pub busy: bool,
}

impl Look {
    fn busy(step: Option<(State, Reason)>) -> Look {
        Look { step, busy: true }
    }

    fn done(step: Option<(State, Reason)>) -> Look {
        Look { step, busy: false }
    }
}

#[cfg(test)]
mod tests;
