//! Park (stopping → stopped once the runtime shows its stopped form) and remove (deleting →
//! deleted once everything belonging to it is gone, volumes included).

use einsora_core::backend::{BackendError, Observation, Target};
use einsora_core::lifecycle::State;
use einsora_core::reasons::{MachineGone, Reason};
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

    /// Deleted once the runtime shows nothing of it any more, or without its machine's word
    /// when the machine is revoked or away past the failure threshold (then it is told to
    /// remove it if it returns).
    pub(super) async fn remove(&mut self, w: &Workload) -> Result<Look, StoreError> {
        let target = Target::of(w);
        if let Err(e) = self.backend.delete(&target).await {
            tracing::warn!(workload = %w.id, error = %e, "the runtime refused to remove it");
            self.writer.note_once(w, &Reason::RetryingRemove).await?;
            return Ok(Look::busy(None));
        }
        let observed = self.backend.observe(&target).await;
        if !matches!(observed, Ok(Observation::Absent))
            && let Some(gone) = self.machine_gone(w, &observed).await?
        {
            let reason = Reason::DeletedWithoutItsMachine(gone);
            return Ok(Look::done(Some((State::Deleted, reason))));
        }
        Ok(match observed {
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

    /// Why the workload's machine can't confirm its removal, if it can't. A machine away too
    /// long is told to remove it if it returns (remembered before the workload is deleted).
    async fn machine_gone(
        &self,
        w: &Workload,
        observed: &Result<Observation, BackendError>,
    ) -> Result<Option<MachineGone>, StoreError> {
        let Some(machine) = w.machine_id.filter(|_| self.agents.is_some()) else {
            return Ok(None);
        };
        if self.store.machine_gone(machine).await? {
            return Ok(Some(MachineGone::Revoked));
        }
        if let Ok(Observation::Failed(Reason::MachineOfflineTooLong { after })) = observed {
            self.store.pend_removal(w.id, machine).await?;
            return Ok(Some(MachineGone::Away { after: *after }));
        }
        Ok(None)
    }
}
