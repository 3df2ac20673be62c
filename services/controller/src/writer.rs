//! The controller's only way to write: every transition and note carries the region lease, so
//! a controller that lost it (paused past its lease, partitioned) commits nothing.

use std::collections::HashMap;
use std::sync::Arc;

use einsora_core::ids::WorkloadId;
use einsora_core::lifecycle::State;
use einsora_core::reasons::Reason;
use einsora_core::workload::Workload;
use einsora_store::{Admission, Lease, Store, StoreError, Transition};

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

    pub async fn step(
        &mut self,
        w: &Workload,
        to: State,
        reason: &Reason,
    ) -> Result<Workload, StoreError> {
        self.write(w, to, reason, None).await
    }

    /// The move to provisioning, recording the placement and a new attempt.
    pub async fn admit(
        &mut self,
        w: &Workload,
        admission: &Admission,
        reason: &Reason,
    ) -> Result<Workload, StoreError> {
        self.write(w, State::Provisioning, reason, Some(admission))
            .await
    }

    async fn write(
        &mut self,
        w: &Workload,
        to: State,
        reason: &Reason,
        admission: Option<&Admission>,
    ) -> Result<Workload, StoreError> {
        let next = self
            .store
            .transition(&Transition {
                workload: w,
                to,
                reason,
                admission,
                fence: Some(&self.lease),
            })
            .await?;
        self.notes.end(w.id);
        Ok(next)
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
