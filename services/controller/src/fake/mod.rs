//! The fake backend: an in-memory runtime with units per class, a delay before ready, and
//! faults injected by workload name. Used by `einsora dev`, `einsora up` until node agents
//! arrive, and tests.

mod config;

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Instant;

use async_trait::async_trait;
use einsora_core::attempt::Attempt;
use einsora_core::backend::{Backend, BackendError, Observation, Spec, Target};
use einsora_core::ids::WorkloadId;
use einsora_core::kind::WorkloadKind;
use einsora_core::reasons::Reason;

pub use config::{CAPACITY, FAULTS, FakeConfig, Fault, READY_DELAY};

/// The failure sentence of the fake runtime's own vocabulary.
const FAILED: &str = "the fake runtime failed it (injected fault)";

#[derive(Debug)]
pub struct FakeBackend {
    cfg: FakeConfig,
    runtime: Mutex<HashMap<WorkloadId, Entry>>,
}

/// What the fake runtime holds for one workload.
#[derive(Debug, Clone)]
struct Entry {
    attempt: Attempt,
    running: bool,
    since: Instant,
    fault: Option<Fault>,
    /// A vanishing workload has been seen ready once.
    seen_ready: bool,
}

impl FakeBackend {
    pub fn new(cfg: FakeConfig) -> Self {
        FakeBackend {
            cfg,
            runtime: Mutex::new(HashMap::new()),
        }
    }

    fn runtime(&self) -> std::sync::MutexGuard<'_, HashMap<WorkloadId, Entry>> {
        // A panic while holding the map can't leave an entry half-written: keep going.
        self.runtime
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[async_trait]
impl Backend for FakeBackend {
    async fn capacity(&self) -> Result<BTreeMap<String, u64>, BackendError> {
        Ok(self.cfg.capacity.clone())
    }

    async fn run(&self, spec: &Spec) -> Result<(), BackendError> {
        let fault = self.cfg.fault_for(&spec.name);
        if fault == Some(Fault::Refuse) {
            return Err(BackendError(format!(
                "the fake runtime refuses {} (injected fault)",
                spec.target.workload
            )));
        }
        let mut runtime = self.runtime();
        let current = runtime.get(&spec.target.workload);
        if current.is_some_and(|e| e.running && e.attempt == spec.target.attempt) {
            return Ok(());
        }
        runtime.insert(
            spec.target.workload,
            Entry {
                attempt: spec.target.attempt,
                running: true,
                since: Instant::now(),
                fault,
                seen_ready: false,
            },
        );
        Ok(())
    }

    async fn park(&self, target: &Target) -> Result<(), BackendError> {
        let mut runtime = self.runtime();
        if target.kind == WorkloadKind::Endpoint {
            runtime.remove(&target.workload);
        } else if let Some(entry) = runtime.get_mut(&target.workload) {
            entry.running = false;
        }
        Ok(())
    }

    async fn delete(&self, target: &Target) -> Result<(), BackendError> {
        self.runtime().remove(&target.workload);
        Ok(())
    }

    async fn observe(&self, target: &Target) -> Result<Observation, BackendError> {
        let mut runtime = self.runtime();
        let Some(entry) = runtime.get_mut(&target.workload) else {
            return Ok(Observation::Absent);
        };
        if entry.attempt != target.attempt {
            return Ok(Observation::Absent);
        }
        if !entry.running {
            return Ok(Observation::Parked);
        }
        if entry.fault == Some(Fault::Unreadable) {
            return Err(BackendError(format!(
                "the fake runtime can't tell {}'s status (injected fault)",
                target.workload
            )));
        }
        if entry.since.elapsed() < self.cfg.ready_delay {
            return Ok(Observation::Starting);
        }
        Ok(match entry.fault {
            Some(Fault::Fail) => Observation::Failed(Reason::BackendFailure(FAILED)),
            Some(Fault::Vanish) if entry.seen_ready => {
                runtime.remove(&target.workload);
                Observation::Absent
            }
            Some(Fault::Vanish) => {
                entry.seen_ready = true;
                Observation::Ready
            }
            _ => Observation::Ready,
        })
    }
}
