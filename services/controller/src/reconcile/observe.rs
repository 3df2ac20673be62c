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

use super::{Look, Reconciler};
use crate::placement;

impl Reconciler {
    pub(super) async fn observe(&mut self, w: &Workload) -> Result<Look, StoreError> {
        let observation = match self.backend.observe(&Target::of(w)).await {
            Ok(observation) => observation,
            Err(e) => {
                tracing::warn!(workload = %w.id, error = %e, "couldn't read its status from the runtime");
                self.writer.note_once(w, &Reason::StatusUnreadable).await?;
                return self.unless_timed_out(w).await;
            }
        };
        match (w.state, observation) {
            (_, Observation::Unknown) => {
                self.writer.note_once(w, &Reason::MachineOffline).await?;
                Ok(Look::busy(None))
            }
            (_, Observation::Failed(reason)) => self.fail(w, reason).await,
            (State::Provisioning, Observation::Ready) => {
                Ok(Look::done(Some((State::Running, Reason::Ready))))
            }
            (State::Provisioning, Observation::Starting) => {
                self.writer.settled(w.id);
                self.unless_timed_out(w).await
            }
            (State::Provisioning, Observation::Absent | Observation::Parked) => {
                let look = self.unless_timed_out(w).await?;
                if look.step.is_some() {
                    return Ok(look);
                }
                self.run_admitted(w).await
            }
            (_, Observation::Absent) => self.fail(w, Reason::Vanished).await,
            (_, Observation::Parked) => self.fail(w, Reason::Reported(StatusCode::Exited)).await,
            (_, Observation::Ready | Observation::Starting) => {
                self.writer.settled(w.id);
                Ok(Look::done(None))
            }
        }
    }

    /// Runs an admitted workload; a refusal becomes one note per episode, and observe runs it
    /// again next pass. One whose class or image left the catalog can't run: it fails.
    pub(super) async fn run_admitted(&mut self, w: &Workload) -> Result<Look, StoreError> {
        let spec = match placement::spec(w, &self.catalog) {
            Ok(spec) => spec,
            Err(reason) => return self.fail(w, reason).await,
        };
        match self.backend.run(&spec).await {
            Ok(()) => self.writer.settled(w.id),
            Err(e) => {
                tracing::warn!(workload = %w.id, error = %e, "the runtime refused to run it");
                self.writer.note_once(w, &Reason::RetryingRun).await?;
            }
        }
        Ok(Look::busy(None))
    }

    /// Still waiting, unless it has been provisioning for longer than the timeout: then it fails.
    async fn unless_timed_out(&mut self, w: &Workload) -> Result<Look, StoreError> {
        let after = self.timers.provisioning_timeout;
        if w.state != State::Provisioning || OffsetDateTime::now_utc() - w.updated_at < after {
            return Ok(Look::busy(None));
        }
        self.fail(w, Reason::ProvisioningTimedOut { after }).await
    }

    /// The step to failed, once the runtime has released it (keeping its data): until then
    /// its devices are still taken, so it keeps holding them in the store too.
    async fn fail(&mut self, w: &Workload, reason: Reason) -> Result<Look, StoreError> {
        if let Err(e) = self.backend.park(&Target::of(w)).await {
            tracing::warn!(workload = %w.id, error = %e, "the runtime refused to release it");
            self.writer.note_once(w, &Reason::RetryingPark).await?;
            return Ok(Look::busy(None));
        }
        Ok(Look::done(Some((State::Failed, reason))))
    }
}
