//! Observe: provisioning and running workloads against the runtime. Ready means running;
//! provisioning but absent means run again (it's idempotent); a failure, a workload that
//! vanished, or a provisioning timeout releases it and fails it; an unknown status decides
//! nothing, not even the timeout.

use einsora_core::agent::StatusCode;
use einsora_core::backend::{Observation, Target};
use einsora_core::lifecycle::State;
use einsora_core::reasons::Reason;
use einsora_core::workload::Workload;
use einsora_store::StoreError;
use time::OffsetDateTime;

use super::{Look, Reconciler, tolerate};
use crate::placement;

impl Reconciler {
    pub(super) async fn observe(&mut self, w: &Workload) -> Result<Look, StoreError> {
        let observation = match self.backend.observe(&Target::of(w)).await {
            Ok(observation) => observation,
            Err(e) => {
                tracing::warn!(workload = %w.id, error = %e, "couldn't read its status from the runtime");
                tolerate(self.writer.note_once(w, &Reason::StatusUnreadable).await)?;
                let timed_out = self.timed_out(w).await;
                return Ok(Look::busy(timed_out));
            }
        };
        Ok(match (w.state, observation) {
            (_, Observation::Unknown) => {
                tolerate(self.writer.note_once(w, &Reason::MachineOffline).await)?;
                Look::busy(None)
            }
            (_, Observation::Failed(reason)) => Look::done(Some(self.fail(w, reason).await)),
            (State::Provisioning, Observation::Ready) => {
                Look::done(Some((State::Running, Reason::Ready)))
            }
            (State::Provisioning, Observation::Starting) => {
                self.writer.settled(w.id);
                Look::busy(self.timed_out(w).await)
            }
            (State::Provisioning, Observation::Absent | Observation::Parked) => {
                match self.timed_out(w).await {
                    Some(failed) => Look::busy(Some(failed)),
                    None => Look::busy(self.start(w).await?),
                }
            }
            (_, Observation::Absent) => Look::done(Some(self.fail(w, Reason::Vanished).await)),
            (_, Observation::Parked) => {
                let exited = Reason::Reported(StatusCode::Exited);
                Look::done(Some(self.fail(w, exited).await))
            }
            (_, Observation::Ready | Observation::Starting) => {
                self.writer.settled(w.id);
                Look::default()
            }
        })
    }

    /// Runs an admitted workload; a refusal becomes one note per episode, and observe runs it
    /// again next pass. One whose class or image left the catalog can't run: the step to
    /// failed.
    pub(super) async fn start(
        &mut self,
        w: &Workload,
    ) -> Result<Option<(State, Reason)>, StoreError> {
        let spec = match placement::spec(w, &self.catalog) {
            Ok(spec) => spec,
            Err(reason) => return Ok(Some(self.fail(w, reason).await)),
        };
        match self.backend.run(&spec).await {
            Ok(()) => self.writer.settled(w.id),
            Err(e) => {
                tracing::warn!(workload = %w.id, error = %e, "the runtime refused to run it");
                tolerate(self.writer.note_once(w, &Reason::RetryingRun).await)?;
            }
        }
        Ok(None)
    }

    /// The failure of a workload still provisioning after the timeout, released.
    async fn timed_out(&mut self, w: &Workload) -> Option<(State, Reason)> {
        let after = self.timers.provisioning_timeout;
        if w.state != State::Provisioning || OffsetDateTime::now_utc() - w.updated_at < after {
            return None;
        }
        Some(self.fail(w, Reason::ProvisioningTimedOut { after }).await)
    }

    /// Releases what the runtime holds of it (keeping its data); the step to failed.
    async fn fail(&mut self, w: &Workload, reason: Reason) -> (State, Reason) {
        if let Err(e) = self.backend.park(&Target::of(w)).await {
            tracing::warn!(workload = %w.id, error = %e, "couldn't release it on the runtime");
        }
        (State::Failed, reason)
    }
}
