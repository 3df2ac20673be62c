//! Park (stopping → stopped once the runtime shows its stopped form) and remove (deleting →
//! deleted once everything belonging to it is gone, volumes included).

use einsora_core::backend::{Observation, Target};
use einsora_core::lifecycle::State;
use einsora_core::reasons::Reason;
use einsora_core::workload::Workload;
use einsora_store::StoreError;

use super::{Look, Reconciler};

impl Reconciler {
    pub(super) async fn park(&mut self, w: &Workload) -> Result<Look, StoreError> {
        let target = Target::of(w);
        if let Err(e) = self.backend.park(&target).await {
            tracing::warn!(workload = %w.id, error = %e, "the runtime refused to stop it");
            self.writer.note_once(w, &Reason::RetryingPark).await?;
            return Ok(Look::busy(None));
        }
        Ok(match self.backend.observe(&target).await {
            Ok(Observation::Parked | Observation::Absent) => {
                Look::done(Some((State::Stopped, Reason::ResourcesReleased)))
            }
            // Failed on the way (or its machine gone too long): stopped all the same.
            Ok(Observation::Failed(reason)) => Look::done(Some((State::Stopped, reason))),
            Ok(Observation::Unknown) => {
                self.writer.note_once(w, &Reason::MachineOffline).await?;
                Look::busy(None)
            }
            Ok(Observation::Ready | Observation::Starting) => Look::busy(None),
            Err(e) => {
                tracing::warn!(workload = %w.id, error = %e, "couldn't read its status from the runtime");
                self.writer.note_once(w, &Reason::StatusUnreadable).await?;
                Look::busy(None)
            }
        })
    }

    /// Deleted once the runtime shows nothing of it any more.
    pub(super) async fn remove(&mut self, w: &Workload) -> Result<Look, StoreError> {
        let target = Target::of(w);
        if let Err(e) = self.backend.delete(&target).await {
            tracing::warn!(workload = %w.id, error = %e, "the runtime refused to remove it");
            self.writer.note_once(w, &Reason::RetryingRemove).await?;
            return Ok(Look::busy(None));
        }
        Ok(match self.backend.observe(&target).await {
            Ok(Observation::Absent) => Look::done(Some((State::Deleted, Reason::Gone))),
            Ok(Observation::Unknown) => {
                self.writer.note_once(w, &Reason::MachineOffline).await?;
                Look::busy(None)
            }
            Ok(_) => Look::busy(None),
            Err(e) => {
                tracing::warn!(workload = %w.id, error = %e, "couldn't read its status from the runtime");
                self.writer.note_once(w, &Reason::StatusUnreadable).await?;
                Look::busy(None)
            }
        })
    }
}
