//! Park (stopping → stopped once the runtime shows its stopped form) and remove (deleting →
//! deleted once everything belonging to it is gone, volumes included).

use einsora_core::backend::{Observation, Target};
use einsora_core::lifecycle::State;
use einsora_core::reasons::Reason;
use einsora_core::workload::Workload;
use einsora_store::StoreError;

use super::{Reconciler, tolerate};

impl Reconciler {
    /// Returns whether it is still stopping.
    pub(super) async fn park(&mut self, w: &Workload) -> Result<bool, StoreError> {
        let target = Target::of(w);
        if let Err(e) = self.backend.park(&target).await {
            tracing::warn!(workload = %w.id, error = %e, "the runtime refused to stop it");
            tolerate(self.writer.note_once(w, &Reason::RetryingPark).await)?;
            return Ok(true);
        }
        match self.backend.observe(&target).await {
            Ok(Observation::Parked | Observation::Absent | Observation::Failed(_)) => {
                tolerate(
                    self.writer
                        .step(w, State::Stopped, &Reason::ResourcesReleased)
                        .await,
                )?;
                Ok(false)
            }
            Ok(Observation::Unknown) => {
                tolerate(self.writer.note_once(w, &Reason::MachineOffline).await)?;
                Ok(true)
            }
            Ok(Observation::Ready | Observation::Starting) => Ok(true),
            Err(e) => {
                tracing::warn!(workload = %w.id, error = %e, "couldn't read its status from the runtime");
                tolerate(self.writer.note_once(w, &Reason::StatusUnreadable).await)?;
                Ok(true)
            }
        }
    }

    /// Returns whether it is still being removed.
    pub(super) async fn remove(&mut self, w: &Workload) -> Result<bool, StoreError> {
        match self.backend.delete(&Target::of(w)).await {
            Ok(()) => {
                tolerate(self.writer.step(w, State::Deleted, &Reason::Gone).await)?;
                Ok(false)
            }
            Err(e) => {
                tracing::warn!(workload = %w.id, error = %e, "the runtime refused to remove it");
                tolerate(self.writer.note_once(w, &Reason::RetryingRemove).await)?;
                Ok(true)
            }
        }
    }
}
