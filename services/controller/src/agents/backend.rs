//! The agent backend: workloads run on node agents. Run, park and delete only wake the
//! machine's stream, whose desired state is computed from the store; what a workload is doing
//! is what its machine last reported, for the attempt and mode the store expects. A machine
//! that is offline makes its workloads' status unknown, which decides nothing.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use einsora_core::agent::{Mode, StatusCode};
use einsora_core::backend::{Backend, BackendError, Observation, Spec, Target};
use einsora_core::reasons::Reason;

use super::hub::Hub;

#[derive(Debug)]
pub struct AgentBackend {
    hub: Arc<Hub>,
    /// Offline this long, a machine's workloads fail (stopping ones are stopped).
    offline_fail: std::time::Duration,
}

impl AgentBackend {
    pub fn new(hub: Arc<Hub>, offline_fail: std::time::Duration) -> Self {
        AgentBackend { hub, offline_fail }
    }

    fn wake(&self, target: &Target) {
        if let Some(machine) = target.machine {
            self.hub.wake(machine);
        }
    }
}

#[async_trait]
impl Backend for AgentBackend {
    /// Agents are placed on by machine (`placement::agents`), not by class.
    async fn capacity(&self) -> Result<BTreeMap<String, u64>, BackendError> {
        Ok(BTreeMap::new())
    }

    async fn run(&self, spec: &Spec) -> Result<(), BackendError> {
        self.wake(&spec.target);
        Ok(())
    }

    async fn park(&self, target: &Target) -> Result<(), BackendError> {
        self.wake(target);
        Ok(())
    }

    async fn delete(&self, target: &Target) -> Result<(), BackendError> {
        self.wake(target);
        Ok(())
    }

    async fn observe(&self, target: &Target) -> Result<Observation, BackendError> {
        let Some(machine) = target.machine else {
            return Ok(Observation::Absent);
        };
        let reported = match self.hub.status(machine, target.workload) {
            Ok(reported) => reported,
            Err(offline) if offline >= self.offline_fail => {
                return Ok(Observation::Failed(Reason::MachineOfflineTooLong {
                    after: self.offline_fail,
                }));
            }
            Err(_) => return Ok(Observation::Unknown),
        };
        // Before the machine applied this attempt (or reported at all), it is in progress.
        let Some(r) = reported.filter(|r| r.attempt == target.attempt.get()) else {
            return Ok(Observation::Starting);
        };
        Ok(match (r.mode, r.code) {
            (_, code) if code.is_failure() => Observation::Failed(Reason::Reported(code)),
            (Mode::Run, StatusCode::Ready) => Observation::Ready,
            (Mode::Run, StatusCode::Stopped | StatusCode::Removed) => Observation::Parked,
            (Mode::Park, StatusCode::Stopped) => Observation::Parked,
            (Mode::Remove, StatusCode::Removed) => Observation::Absent,
            _ => Observation::Starting,
        })
    }
}
