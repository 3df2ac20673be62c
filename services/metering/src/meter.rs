//! A pass of usage accounting: recompute the records of the workloads that may have changed
//! from their whole timelines, and write only what differs. Recomputing from the timeline
//! (rather than adding to a running total) is what makes a replay or a restart harmless.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use einsora_core::ids::WorkloadId;
use einsora_core::workload::Workload;
use einsora_store::{ChangeSignal, Store, StoreError};
use time::OffsetDateTime;

use crate::accounting::hours_of_use;
use crate::records::usage_change;

/// A transition's time is read before it commits (on Postgres, well before, under load), and
/// writers' clocks differ a little: a row may appear after rows stamped later than it.
const COMMIT_MARGIN: Duration = Duration::from_secs(60);

/// Workloads whose timelines and records are read in one round trip each.
const BATCH: usize = 200;

/// Which workloads a pass recomputes (the first pass of a `Meter` recomputes every one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// Those whose row changed since the previous pass: cheap, for the change signal.
    Changes,
    /// Those, and every workload in a metered state, up to now: keeps running workloads'
    /// records current and completes each hour once it has passed.
    Sweep,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PassReport {
    /// Workloads whose records were recomputed.
    pub recomputed: usize,
    /// Of those, workloads whose records had to change.
    pub written: usize,
}

/// Accounts usage into the store; remembers between passes only what narrows the next one, so a
/// new `Meter` (a restart) starts with everything.
#[derive(Debug)]
pub struct Meter {
    store: Arc<dyn Store>,
    seen: Option<Seen>,
}

/// What the previous pass saw.
#[derive(Debug)]
struct Seen {
    /// The next pass reads rows changed since this (all rows, before there were any).
    since: Option<OffsetDateTime>,
    /// The version each row had when it was last accounted: a `Changes` pass skips rows still
    /// at it, so the records it writes (which on SQLite wake the change signal) can't wake it
    /// again and again.
    versions: HashMap<WorkloadId, i64>,
}

impl Meter {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Meter { store, seen: None }
    }

    /// The store's change signal, which says when a `Changes` pass may find something.
    pub fn changes(&self) -> ChangeSignal {
        self.store.changes()
    }

    /// One pass, with `now` as the time: runs still going are counted up to it. On an error
    /// nothing is remembered, so the next pass covers this one's workloads again; what this
    /// one wrote is whole per workload (one transaction each) and rewritten identically.
    pub async fn pass(
        &mut self,
        pass: Pass,
        now: OffsetDateTime,
    ) -> Result<PassReport, StoreError> {
        let since = self.seen.as_ref().and_then(|s| s.since);
        let candidates = self.store.workloads_to_meter(since).await?;
        let due: Vec<&Workload> = candidates
            .iter()
            .filter(|w| match (&self.seen, pass) {
                (Some(seen), Pass::Changes) => seen.versions.get(&w.id) != Some(&w.version),
                _ => true,
            })
            .collect();
        let mut report = PassReport::default();
        for batch in due.chunks(BATCH) {
            report.written += self.account(batch, now).await?;
            report.recomputed += batch.len();
        }
        let since = next_since(since, &candidates, now);
        let versions = candidates
            .iter()
            .filter(|w| since.is_none_or(|s| w.updated_at >= s) || w.state.metered())
            .map(|w| (w.id, w.version))
            .collect();
        self.seen = Some(Seen { since, versions });
        Ok(report)
    }

    /// Recomputes a batch of workloads' records; says how many workloads' records changed.
    async fn account(&self, batch: &[&Workload], now: OffsetDateTime) -> Result<usize, StoreError> {
        let ids: Vec<WorkloadId> = batch.iter().map(|w| w.id).collect();
        let timelines = self.store.timelines(&ids).await?;
        let stored = self.store.usage_of_workloads(&ids).await?;
        let mut written = 0;
        for workload in batch {
            // Every workload has a timeline from its creation: without one there is nothing to
            // say, and its records are better left than removed.
            let Some(timeline) = timelines.get(&workload.id) else {
                tracing::warn!(workload = %workload.id, "a workload without a timeline: skipped");
                continue;
            };
            let existing = stored.get(&workload.id).map_or(&[][..], Vec::as_slice);
            if let Some(change) = usage_change(workload, &hours_of_use(timeline, now), existing) {
                self.store.apply_usage(&change).await?;
                written += 1;
            }
        }
        Ok(written)
    }
}

/// Where the next pass starts reading changed rows: the newest change this pass saw, less the
/// margin. The rows' times come from the writers' clocks, so this clock only caps it (one
/// writer's clock far ahead must not hide the others' changes), and it never moves back.
fn next_since(
    previous: Option<OffsetDateTime>,
    candidates: &[Workload],
    now: OffsetDateTime,
) -> Option<OffsetDateTime> {
    let newest = candidates.iter().map(|w| w.updated_at).max();
    let from_newest = newest.map(|t| t.min(now) - COMMIT_MARGIN);
    previous.max(from_newest)
}

#[cfg(test)]
mod tests {
    use einsora_core::ids::MachineId;
    use time::macros::datetime;

    use super::{COMMIT_MARGIN, next_since};
    use crate::test_support::workload;

    #[test]
    fn the_next_pass_starts_at_the_newest_change_less_the_margin() {
        let changed_at = |at| einsora_core::workload::Workload {
            updated_at: at,
            ..workload(MachineId::new())
        };
        let rows = [
            changed_at(datetime!(2025-03-01 10:00 UTC)),
            changed_at(datetime!(2025-03-01 10:05 UTC)),
        ];
        let at_newest = datetime!(2025-03-01 10:05 UTC) - COMMIT_MARGIN;
        // This clock two hours ahead of the writers': their next change must still be read.
        let ahead = datetime!(2025-03-01 12:05 UTC);
        assert_eq!(next_since(None, &rows, ahead), Some(at_newest));
        // A writer's clock ahead of this one: capped by this one.
        let behind = datetime!(2025-03-01 10:01 UTC);
        assert_eq!(
            next_since(None, &rows, behind),
            Some(behind - COMMIT_MARGIN)
        );
        // Nothing seen: where it was; and it never moves back.
        assert_eq!(next_since(None, &[], ahead), None);
        let later = Some(datetime!(2025-03-01 11:00 UTC));
        assert_eq!(next_since(later, &rows, ahead), later);
        assert_eq!(next_since(later, &[], ahead), later);
    }
}
