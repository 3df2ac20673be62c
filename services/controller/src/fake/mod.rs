//! The fake backend: an in-memory runtime with units per class, a delay before ready, and
//! faults injected by workload name. Used by `einsora dev`, `einsora up` until node agents
//! arrive, and tests.

mod config;
mod state;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
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
    changed: AtomicBool,
}

/// What the fake runtime holds for one workload.
#[derive(Debug, Clone)]
struct Entry {
    attempt: Attempt,
    running: bool,
    since: Instant,
    name: String,
    /// A vanishing workload has been seen ready once.
    seen_ready: bool,
}

impl FakeBackend {
    /// The runtime as its state file (if any) left it; kept saved there from now on.
    pub fn start(cfg: FakeConfig) -> Arc<Self> {
        let now = Instant::now();
        let saved = cfg
            .state_file
            .as_deref()
            .map(state::load)
            .unwrap_or_default();
        let runtime = saved
            .into_iter()
            .map(|(id, s)| {
                let entry = Entry {
                    attempt: Attempt::new(s.attempt),
                    running: s.running,
                    since: now,
                    name: s.name,
                    seen_ready: s.seen_ready,
                };
                (id, entry)
            })
            .collect();
        let path = cfg.state_file.clone();
        let backend = Arc::new(FakeBackend {
            cfg,
            runtime: Mutex::new(runtime),
            changed: AtomicBool::new(false),
        });
        if let Some(path) = path {
            state::keep_saved(&backend, path);
        }
        backend
    }

    fn runtime(&self) -> std::sync::MutexGuard<'_, HashMap<WorkloadId, Entry>> {
        // A panic while holding the map can't leave an entry half-written: keep going.
        self.runtime
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn changed(&self) {
        self.changed.store(true, Ordering::Release);
    }

    fn snapshot_if_changed(&self) -> Option<HashMap<uuid::Uuid, state::Saved>> {
        if !self.changed.swap(false, Ordering::AcqRel) {
            return None;
        }
        let snapshot = self
            .runtime()
            .iter()
            .map(|(id, e)| {
                let saved = state::Saved {
                    attempt: e.attempt.get(),
                    running: e.running,
                    name: e.name.clone(),
                    seen_ready: e.seen_ready,
                };
                (*id.as_uuid(), saved)
            })
            .collect();
        Some(snapshot)
    }

    fn fault(&self, entry: &Entry) -> Option<Fault> {
        self.cfg.fault_for(&entry.name)
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
                name: spec.name.clone(),
                seen_ready: false,
            },
        );
        self.changed();
        Ok(())
    }

    async fn park(&self, target: &Target) -> Result<(), BackendError> {
        let mut runtime = self.runtime();
        if target.kind == WorkloadKind::Endpoint {
            runtime.remove(&target.workload);
        } else if let Some(entry) = runtime.get_mut(&target.workload) {
            entry.running = false;
        }
        self.changed();
        Ok(())
    }

    async fn delete(&self, target: &Target) -> Result<(), BackendError> {
        if self.runtime().remove(&target.workload).is_some() {
            self.changed();
        }
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
        let fault = self.fault(entry);
        if fault == Some(Fault::Unreadable) {
            return Err(BackendError(format!(
                "the fake runtime can't tell {}'s status (injected fault)",
                target.workload
            )));
        }
        if entry.since.elapsed() < self.cfg.ready_delay {
            return Ok(Observation::Starting);
        }
        Ok(match fault {
            Some(Fault::Fail) => Observation::Failed(Reason::BackendFailure(FAILED)),
            Some(Fault::Vanish) if entry.seen_ready => {
                runtime.remove(&target.workload);
                self.changed();
                Observation::Absent
            }
            Some(Fault::Vanish) => {
                entry.seen_ready = true;
                self.changed();
                Observation::Ready
            }
            _ => Observation::Ready,
        })
    }
}
