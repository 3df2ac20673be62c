//! Admit: pending and queued workloads, first come first, each placed and moved to
//! provisioning, then run; or queued with the reason. A workload that doesn't fit waits while
//! later ones that do fit go ahead (backfill). A pass's decisions are written in one
//! transaction.

use einsora_core::ids::WorkloadId;
use einsora_core::lifecycle::State;
use einsora_core::reasons::Reason;
use einsora_store::StoreError;

use super::Reconciler;
use crate::placement::{self, Decision, Free};
use crate::writer::Step;

impl Reconciler {
    /// Returns the workloads it looked at.
    pub(super) async fn admit(&mut self) -> Result<Vec<WorkloadId>, StoreError> {
        let waiting = self.store.waiting(&self.region).await?;
        let ids = waiting.iter().map(|e| e.workload.id).collect();
        if waiting.is_empty() {
            return Ok(ids);
        }
        let totals = match self.backend.capacity().await {
            Ok(totals) => totals,
            Err(e) => {
                tracing::warn!(error = %e, region = %self.region, "couldn't read the runtime's capacity");
                for entry in &waiting {
                    self.writer
                        .note_once(&entry.workload, &Reason::CapacityUnreadable)
                        .await?;
                }
                return Ok(ids);
            }
        };
        for entry in &waiting {
            self.writer.settled(entry.workload.id);
        }
        let held = self.store.capacity_held(&self.region).await?;
        let mut free = Free::new(totals, &held);
        let mut steps = Vec::new();
        for entry in waiting {
            let w = entry.workload;
            match placement::place(&w, &self.catalog, entry.tenant_trusted, &mut free) {
                Decision::Admit { admission, reason } => steps.push(Step {
                    admission: Some(admission),
                    ..Step::to(w, State::Provisioning, reason)
                }),
                Decision::Wait(reason) if w.state == State::Pending => {
                    steps.push(Step::to(w, State::Queued, reason));
                }
                Decision::Wait(_) => {}
                Decision::Fail(reason) => steps.push(Step::to(w, State::Failed, reason)),
            }
        }
        let written = self.writer.apply(&steps).await?;
        let mut failed = Vec::new();
        for admitted in written.into_iter().flatten() {
            if admitted.state != State::Provisioning {
                continue;
            }
            if let Some((to, reason)) = self.run_admitted(&admitted).await?.step {
                failed.push(Step::to(admitted, to, reason));
            }
        }
        self.writer.apply(&failed).await?;
        Ok(ids)
    }
}
