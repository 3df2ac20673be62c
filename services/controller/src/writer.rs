//! The controller's only way to write: every transition and note carries the region lease, so
//! a controller that lost it (paused past its lease, partitioned) commits nothing.

use std::collections::HashMap;
use std::sync::Arc;

use einsora_core::ids::WorkloadId;
use einsora_core::lifecycle::State;
use einsora_core::reasons::Reason;
use einsora_core::workload::Workload;
use einsora_store::{Admission, Lease, Store, StoreError, Transition};

use crate::reconcile::tolerate;

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
}

impl Fenced {
    pub fn new(store: Arc<dyn Store>, lease: Lease) -> Self {
        Fenced {
            store,
            lease,
            notes: Episodes::default(),
        }
    }

    /// Writes a pass's steps in one transaction. Each answers on its own: the workload as it
    /// is now, or `None` where another writer moved it first (the next pass sees the new
    /// state). A lost lease or an unavailable store fails the whole batch.
    pub async fn apply(&mut self, steps: &[Step]) -> Result<Vec<Option<Workload>>, StoreError> {
        let mut written = Vec::with_capacity(steps.len());
        // Bounded transactions, so a big pass never holds the write lock long enough to stall
        // the API's writes.
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
            for result in self.store.transitions(&changes).await? {
                let next = tolerate(result)?;
                if let Some(w) = &next {
                    self.notes.end(w.id);
                }
                written.push(next);
            }
        }
        Ok(written)
    }

    /// Notes `reason` once per episode: again only after the condition ended (`settled`) or the
    /// workload moved on, never once per pass.
    pub async fn note_once(&mut self, w: &Workload, reason: &Reason) -> Result<(), StoreError> {
        let text = reason.text();
        if self.notes.already(w, &text) {
            return Ok(());
        }
        self.store.note(w, reason, Some(&self.lease)).await?;
        self.notes.begin(w, text);
        Ok(())
    }

    /// The condition a note was about is over: the next one is a new episode.
    pub fn settled(&mut self, id: WorkloadId) {
        self.notes.end(id);
    }

    /// Forgets episodes of workloads no longer looked at.
    pub fn retain(&mut self, live: impl Fn(WorkloadId) -> bool) {
        self.notes.0.retain(|id, _| live(*id));
    }
}

/// Open note episodes: the workload's version and the note's text.
#[derive(Debug, Default)]
struct Episodes(HashMap<WorkloadId, (i64, String)>);

impl Episodes {
    fn already(&self, w: &Workload, text: &str) -> bool {
        self.0
            .get(&w.id)
            .is_some_and(|(version, noted)| *version == w.version && noted == text)
    }

    fn begin(&mut self, w: &Workload, text: String) {
        self.0.insert(w.id, (w.version, text));
    }

    fn end(&mut self, id: WorkloadId) {
        self.0.remove(&id);
    }
}
