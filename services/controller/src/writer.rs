//! The controller's only way to write: every transition and note carries the region lease, so
//! a controller that lost it (paused past its lease, partitioned) commits nothing.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use einsora_core::ids::WorkloadId;
use einsora_core::lifecycle::State;
use einsora_core::reasons::Reason;
use einsora_core::workload::Workload;
use einsora_store::{Admission, Lease, Store, StoreError, Transition};

/// The most steps one transaction writes.
const BATCH: usize = 256;

/// One step a pass decided on.
#[derive(Debug, Clone)]
pub struct Step {
    pub workload: Workload,
    pub to: State,
    pub reason: Reason,
    /// Only with the move to provisioning.
    pub admission: Option<Admission>,
}

impl Step {
    pub fn to(workload: Workload, to: State, reason: Reason) -> Step {
        Step {
            workload,
            to,
            reason,
            admission: None,
        }
    }
}

#[derive(Debug)]
pub struct Fenced {
    store: Arc<dyn Store>,
    lease: Lease,
    notes: Episodes,
    /// The latest reason noted for each queued workload, at its version.
    waits: HashMap<WorkloadId, (i64, String)>,
    /// Queued workloads noted as holding back smaller requests (aging), at their version.
    aged: HashMap<WorkloadId, i64>,
}

impl Fenced {
    pub fn new(store: Arc<dyn Store>, lease: Lease) -> Self {
        Fenced {
            store,
            lease,
            notes: Episodes::default(),
            waits: HashMap::new(),
            aged: HashMap::new(),
        }
    }

    /// Writes a pass's steps, in transactions of up to `BATCH`. Each answers on its own: the
    /// workload as it is now, or `None` where it wasn't written (another writer moved it
    /// first: the next pass sees the new state). A lost lease or an unavailable store ends the
    /// pass.
    pub async fn apply(&mut self, steps: &[Step]) -> Result<Vec<Option<Workload>>, StoreError> {
        let mut written = Vec::with_capacity(steps.len());
        for chunk in steps.chunks(BATCH) {
            let changes: Vec<Transition<'_>> = chunk
                .iter()
                .map(|s| Transition {
                    workload: &s.workload,
                    to: s.to,
                    reason: &s.reason,
                    admission: s.admission.as_ref(),
                    fence: Some(&self.lease),
                })
                .collect();
            let results = self.store.transitions(&changes).await?;
            for (step, result) in chunk.iter().zip(results) {
                match result {
                    Ok(w) => {
                        self.notes.end(w.id);
                        written.push(Some(w));
                    }
                    Err(e) => {
                        unwritten(step.workload.id, e)?;
                        written.push(None);
                    }
                }
            }
        }
        Ok(written)
    }

    /// Notes `reason` once per episode: again only after the condition ended (`settled`) or the
    /// workload moved on, never once per pass. The store doesn't repeat the timeline's latest
    /// note either, so a restarted controller doesn't note an ongoing condition again.
    pub async fn note_once(&mut self, w: &Workload, reason: &Reason) -> Result<(), StoreError> {
        let text = reason.text();
        if self.notes.already(w, &text) {
            return Ok(());
        }
        match self.store.note(w, reason, Some(&self.lease)).await {
            Ok(()) => self.notes.begin(w, text),
            Err(e) => unwritten(w.id, e)?,
        }
        Ok(())
    }

    /// Why a queued workload waits, noted when it changes (capacity, its machine offline, no
    /// driver: the timeline always says the current one), first against the reason it was
    /// queued with; the same reason again writes nothing.
    pub async fn note_wait(&mut self, w: &Workload, reason: &Reason) -> Result<(), StoreError> {
        let text = reason.text();
        let latest = match self.waits.get(&w.id) {
            Some((version, noted)) if *version == w.version => noted.as_str(),
            _ => w.reason.as_str(),
        };
        if latest == text {
            return Ok(());
        }
        match self.store.note(w, reason, Some(&self.lease)).await {
            Ok(()) => {
                self.waits.insert(w.id, (w.version, text));
            }
            Err(e) => unwritten(w.id, e)?,
        }
        Ok(())
    }

    /// That a queued workload holds back smaller requests (aging), once while it stays queued:
    /// its waits noted meanwhile don't repeat it.
    pub async fn note_aging(&mut self, w: &Workload, reason: &Reason) -> Result<(), StoreError> {
        if self.aged.get(&w.id) == Some(&w.version) {
            return Ok(());
        }
        match self.store.note(w, reason, Some(&self.lease)).await {
            Ok(()) => {
                self.aged.insert(w.id, w.version);
            }
            Err(e) => unwritten(w.id, e)?,
        }
        Ok(())
    }

    /// The conditions noted for it are over: the next one is a new episode.
    pub fn settled(&mut self, id: WorkloadId) {
        self.notes.end(id);
    }

    /// Forgets episodes of workloads no longer looked at.
    pub fn retain(&mut self, live: impl Fn(WorkloadId) -> bool) {
        self.notes.0.retain(|id, _| live(*id));
        self.waits.retain(|id, _| live(*id));
        self.aged.retain(|id, _| live(*id));
    }
}

/// A write that didn't happen: another writer moving the workload first is expected (the next
/// pass sees the new state); a step the store refused is a controller bug, logged, and the pass
/// goes on; a lost lease or an unavailable store ends the pass.
fn unwritten(id: WorkloadId, err: StoreError) -> Result<(), StoreError> {
    match err {
        StoreError::Conflict { .. } | StoreError::NotFound => Ok(()),
        StoreError::LeaseLost(_) | StoreError::Unavailable(_) => Err(err),
        other => {
            tracing::error!(workload = %id, error = %other, "the store refused a controller write");
            Ok(())
        }
    }
}

/// Open note episodes: the workload's version and the notes written at it.
#[derive(Debug, Default)]
struct Episodes(HashMap<WorkloadId, (i64, BTreeSet<String>)>);

impl Episodes {
    fn already(&self, w: &Workload, text: &str) -> bool {
        self.0
            .get(&w.id)
            .is_some_and(|(version, noted)| *version == w.version && noted.contains(text))
    }

    fn begin(&mut self, w: &Workload, text: String) {
        let entry = self.0.entry(w.id).or_default();
        if entry.0 != w.version {
            *entry = (w.version, BTreeSet::new());
        }
        entry.1.insert(text);
    }

    fn end(&mut self, id: WorkloadId) {
        self.0.remove(&id);
    }
}
