//! The fake backend: an in-memory runtime with units per class, a delay before ready, and
//! faults injected by workload name; what it runs is journaled, so it outlives its controller.
//! Used by `einsora dev`, `einsora up` until node agents arrive, and tests.

mod config;
mod state;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use async_trait::async_trait;
use einsora_core::backend::{Backend, BackendError, Observation, Spec, Target};
use einsora_core::ids::WorkloadId;
use einsora_core::kind::WorkloadKind;
use einsora_core::reasons::Reason;

pub use config::{CAPACITY, FAULTS, FakeConfig, Fault, READY_DELAY, STATE};
use state::{Journal, Saved};

/// The failure sentence of the fake runtime's own vocabulary.
const FAILED: &str = "the fake runtime failed it (injected fault)";

#[derive(Debug)]
pub struct FakeBackend {
    cfg: FakeConfig,
    runtime: Mutex<Runtime>,
}

#[derive(Debug)]
struct Runtime {
    entries: HashMap<WorkloadId, Entry>,
    journal: Option<Journal>,
}

/// What the fake runtime holds for one workload.
#[derive(Debug, Clone)]
struct Entry {
    saved: Saved,
    /// When it was run (or, after a restart, found again).
    since: Instant,
}

impl Runtime {
    fn put(&mut self, id: WorkloadId, entry: Entry) {
        if let Some(journal) = &mut self.journal {
            journal.record(id, Some(&entry.saved));
        }
        self.entries.insert(id, entry);
    }

    fn remove(&mut self, id: WorkloadId) {
        if self.entries.remove(&id).is_some()
            && let Some(journal) = &mut self.journal
        {
            journal.record(id, None);
        }
    }
}

impl FakeBackend {
    /// The runtime as its journal (if any) left it.
    pub fn start(cfg: FakeConfig) -> std::sync::Arc<Self> {
        let now = Instant::now();
        let (journal, saved) = match cfg.state_file.as_deref().map(Journal::open) {
            Some(Ok((journal, saved))) => (Some(journal), saved),
            Some(Err(e)) => {
                tracing::warn!(error = %e, "can't use the fake runtime's journal; it starts empty and unsaved");
                (None, HashMap::new())
            }
            None => (None, HashMap::new()),
        };
        let entries = saved
            .into_iter()
            .map(|(id, saved)| (id, Entry { saved, since: now }))
            .collect();
        std::sync::Arc::new(FakeBackend {
            cfg,
            runtime: Mutex::new(Runtime { entries, journal }),
        })
    }

    fn runtime(&self) -> MutexGuard<'_, Runtime> {
        // A panic while holding the map can't leave an entry half-written: keep going.
        self.runtime.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait]
impl Backend for FakeBackend {
    async fn capacity(&self) -> Result<BTreeMap<String, u64>, BackendError> {
        Ok(self.cfg.capacity.clone())
    }

    async fn run(&self, spec: &Spec) -> Result<(), BackendError> {
        if self.cfg.fault_for(&spec.name) == Some(Fault::Refuse) {
            return Err(BackendError(format!(
                "the fake runtime refuses {} (injected fault)",
                spec.target.workload
            )));
        }
        let attempt = spec.target.attempt.get();
        let mut runtime = self.runtime();
        let current = runtime.entries.get(&spec.target.workload);
        if current.is_some_and(|e| e.saved.running && e.saved.attempt == attempt) {
            return Ok(());
        }
        let saved = Saved {
            attempt,
            running: true,
            name: spec.name.clone(),
            seen_ready: false,
        };
        let entry = Entry {
            saved,
            since: Instant::now(),
        };
        runtime.put(spec.target.workload, entry);
        Ok(())
    }

    async fn park(&self, target: &Target) -> Result<(), BackendError> {
        let mut runtime = self.runtime();
        if target.kind == WorkloadKind::Endpoint {
            runtime.remove(target.workload);
            return Ok(());
        }
        if let Some(entry) = runtime.entries.get(&target.workload)
            && entry.saved.running
        {
            let mut parked = entry.clone();
            parked.saved.running = false;
            runtime.put(target.workload, parked);
        }
        Ok(())
    }

    async fn delete(&self, target: &Target) -> Result<(), BackendError> {
        self.runtime().remove(target.workload);
        Ok(())
    }

    async fn observe(&self, target: &Target) -> Result<Observation, BackendError> {
        let mut runtime = self.runtime();
        let Some(entry) = runtime.entries.get(&target.workload).cloned() else {
            return Ok(Observation::Absent);
        };
        if entry.saved.attempt != target.attempt.get() {
            return Ok(Observation::Absent);
        }
        if !entry.saved.running {
            return Ok(Observation::Parked);
        }
        let fault = self.cfg.fault_for(&entry.saved.name);
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
            Some(Fault::Vanish) if entry.saved.seen_ready => {
                runtime.remove(target.workload);
                Observation::Absent
            }
            Some(Fault::Vanish) => {
                let mut seen = entry;
                seen.saved.seen_ready = true;
                runtime.put(target.workload, seen);
                Observation::Ready
            }
            _ => Observation::Ready,
        })
    }
}
