//! Observe: provisioning and running workloads against the runtime. Ready means running;
//! provisioning but absent means run again (it's idempotent); a failure, a workload that
//! vanished, or a provisioning timeout releases it and fails it; an unknown status decides
//! nothing, not even the timeout.

use einsora_core::backend::{Observation, Target};
use einsora_core::lifecycle::State;
use einsora_core::reasons::Reason;
use einsora_core::workload::Workload;
use einsora_store::StoreError;
use time::OffsetDateTime;

use super::{Reconciler, tolerate};
use crate::placement;

impl Reconciler {
    /// Returns whether the workload is still on its way (look again soon).
    pub(super) async fn observe(&mut self, w: &Workload) -> Result<bool, StoreError> {
        let observation = match self.backend.observe(&Target::of(w)).await {
            Ok(observation) => observation,
            Err(e) => {
                tracing::warn!(workload = %w.id, error = %e, "couldn't read its status from the runtime");
                tolerate(self.writer.note_once(w, &Reason::StatusUnreadable).await)?;
                if w.state == State::Provisioning {
                    self.fail_if_timed_out(w).await?;
                }
                return Ok(true);
            }
        };
        match (w.state, observation) {
            (_, Observation::Unknown) => {
                tolerate(self.writer.note_once(w, &Reason::MachineOffline).await)?;
                Ok(true)
            }
            (_, Observation::Failed(reason)) => self.fail(w, &reason).await.map(|()| false),
            (State::Provisioning, Observation::Ready) => {
                tolerate(self.writer.step(w, State::Running, &Reason::Ready).await)?;
                Ok(false)
            }
            (State::Provisioning, Observation::Starting) => {
                self.writer.settled(w.id);
                self.fail_if_timed_out(w).await?;
                Ok(true)
            }
            (State::Provisioning, Observation::Absent | Observation::Parked) => {
                if !self.fail_if_timed_out(w).await? {
                    self.start(w).await?;
                }
                Ok(true)
            }
            (_, Observation::Absent) => self.fail(w, &Reason::Vanished).await.map(|()| false),
            (_, Observation::Parked) => {
                let exited = Reason::Reported(einsora_core::agent::StatusCode::Exited);
                self.fail(w, &exited).await.map(|()| false)
            }
            (_, Observation::Ready | Observation::Starting) => {
                self.writer.settled(w.id);
                Ok(false)
            }
        }
    }

    /// Runs an admitted workload; a refusal becomes one note per episode, and observe runs it
    /// again next pass.
    pub(super) async fn start(&mut self, w: &Workload) -> Result<(), StoreError> {
        let spec = match placement::spec(w, &self.catalog) {
            Ok(spec) => spec,
            Err(reason) => return self.fail(w, &reason).await,
        };
        match self.backend.run(&spec).await {
            Ok(()) => self.writer.settled(w.id),
            Err(e) => {
                tracing::warn!(workload = %w.id, error = %e, "the runtime refused to run it");
                tolerate(self.writer.note_once(w, &Reason::RetryingRun).await)?;
            }
        }
        Ok(())
    }

    async fn fail_if_timed_out(&mut self, w: &Workload) -> Result<bool, StoreError> {
        let after = self.timers.provisioning_timeout;
        if OffsetDateTime::now_utc() - w.updated_at < after {
            return Ok(false);
        }
        self.fail(w, &Reason::ProvisioningTimedOut { after })
            .await?;
        Ok(true)
    }

    /// Releases what the runtime holds of it (keeping its data) and moves it to failed.
    async fn fail(&mut self, w: &Workload, reason: &Reason) -> Result<(), StoreError> {
        if let Err(e) = self.backend.park(&Target::of(w)).await {
            tracing::warn!(workload = %w.id, error = %e, "couldn't release it on the runtime");
        }
        tolerate(self.writer.step(w, State::Failed, reason).await)?;
        Ok(())
    }
}
