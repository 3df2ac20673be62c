//! Admit: pending and queued workloads, first come first, each placed and moved to
//! provisioning in one transaction, then run; or queued with the reason. A workload that
//! doesn't fit waits while later ones that do fit go ahead (backfill).

use einsora_core::lifecycle::State;
use einsora_core::reasons::Reason;
use einsora_store::StoreError;

use super::{Reconciler, tolerate};
use crate::placement::{self, Decision, Free};

impl Reconciler {
    pub(super) async fn admit(&mut self) -> Result<(), StoreError> {
        let waiting = self.store.waiting(&self.region).await?;
        if waiting.is_empty() {
            return Ok(());
        }
        let totals = match self.backend.capacity().await {
            Ok(totals) => totals,
            Err(e) => {
                tracing::warn!(error = %e, region = %self.region, "couldn't read the runtime's capacity");
                for entry in &waiting {
                    tolerate(
                        self.writer
                            .note_once(&entry.workload, &Reason::CapacityUnreadable)
                            .await,
                    )?;
                }
                return Ok(());
            }
        };
        let held = self.store.capacity_held(&self.region).await?;
        let mut free = Free::new(totals, &held);
        for entry in waiting {
            let w = entry.workload;
            match placement::place(&w, &self.catalog, entry.tenant_trusted, &mut free) {
                Decision::Admit { admission, reason } => {
                    let Some(admitted) =
                        tolerate(self.writer.admit(&w, &admission, &reason).await)?
                    else {
                        continue;
                    };
                    self.start(&admitted).await?;
                }
                Decision::Wait(reason) if w.state == State::Pending => {
                    tolerate(self.writer.step(&w, State::Queued, &reason).await)?;
                }
                Decision::Wait(_) => {}
                Decision::Fail(reason) => {
                    tolerate(self.writer.step(&w, State::Failed, &reason).await)?;
                }
            }
        }
        Ok(())
    }
}
