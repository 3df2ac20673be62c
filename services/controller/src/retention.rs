//! Retention: while it leads, a controller drops workloads' output lines received longer ago
//! than `EINSORA_LOG_RETENTION` (14 days; ADR 0011) and activity log entries older than
//! `EINSORA_ACTIVITY_RETENTION` (365 days; ADR 0012), at its start and then a few times per
//! retention period (at least hourly), a page per transaction.

use std::sync::Arc;
use std::time::Duration;

use einsora_runtime::shutdown::Shutdown;
use einsora_store::Store;
use time::OffsetDateTime;

/// The longest wait between two sweeps.
const AT_MOST_EVERY: Duration = Duration::from_secs(3600);

/// How often a retention of `retention` is swept: a quarter of it, at most hourly.
pub fn every(retention: Duration) -> Duration {
    (retention / 4).min(AT_MOST_EVERY)
}

/// What a sweep keeps for a while.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    /// Workloads' output lines.
    Output,
    /// Activity log entries.
    Activity,
}

impl Kept {
    fn what(self) -> &'static str {
        match self {
            Kept::Output => "workloads' output lines",
            Kept::Activity => "activity log entries",
        }
    }
}

/// Sweeps `kept` until `stop`.
pub async fn sweep(store: Arc<dyn Store>, kept: Kept, retention: Duration, stop: Shutdown) {
    loop {
        let before = OffsetDateTime::now_utc() - retention;
        let swept = match kept {
            Kept::Output => store.sweep_output(before).await,
            Kept::Activity => store.sweep_activity(before).await,
        };
        let what = kept.what();
        match swept {
            Ok(0) => {}
            Ok(dropped) => tracing::info!(dropped, "dropped {what} past their retention"),
            Err(e) => tracing::warn!(error = %e, "couldn't drop old {what}; trying again"),
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(every(retention)) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use einsora_core::lifecycle::State;
    use einsora_core::output::{OutputStream, PrintedLine};
    use einsora_store::{OutputBatch, OutputCaps, OutputQuery};
    use einsora_testkit::eventually_async;
    use einsora_testkit::fixtures::{Lifecycle, new_workload, path_to};

    use super::*;

    #[test]
    fn a_retention_is_swept_a_few_times_over_and_at_least_hourly() {
        assert_eq!(every(Duration::from_secs(14 * 86_400)), AT_MOST_EVERY);
        assert_eq!(
            every(Duration::from_millis(400)),
            Duration::from_millis(100)
        );
    }

    /// Lines older than the retention go, counted as dropped; newer ones stay.
    #[tokio::test]
    async fn lines_past_their_retention_are_dropped_while_it_runs() {
        let tenancy = crate::testing::Tenancy::new().await;
        let store = Arc::clone(&tenancy.store);
        let w = Lifecycle::placing_on("cpu-1c-2g")
            .through(
                &*store,
                &new_workload(tenancy.tenant, "printer"),
                path_to(State::Running),
            )
            .await;
        let now = OffsetDateTime::now_utc();
        let batch = |received_at, text: &str, end| OutputBatch {
            workload_id: w.id,
            tenant_id: tenancy.tenant,
            attempt: 1,
            to: end,
            received_at,
            lines: vec![PrintedLine {
                stream: OutputStream::Stdout,
                printed_at: received_at,
                text: text.to_owned(),
                dropped_before: 0,
                gap_before: false,
                end,
            }],
        };
        let caps = OutputCaps {
            per_workload: 1 << 20,
            per_tenant: 1 << 20,
            total: 1 << 20,
        };
        let old = now - time::Duration::hours(2);
        store
            .append_output(&batch(old, "old", 4), &caps)
            .await
            .unwrap();
        store
            .append_output(&batch(now, "new", 8), &caps)
            .await
            .unwrap();
        let stop = Shutdown::new();
        let sweeper = tokio::spawn(sweep(
            Arc::clone(&store),
            Kept::Output,
            Duration::from_secs(3600),
            stop.clone(),
        ));
        let all = OutputQuery {
            limit: 10,
            ..OutputQuery::default()
        };
        let page = eventually_async(
            "the old line dropped",
            Duration::from_secs(10),
            async || {
                let page = store.read_output(w.id, &all).await.ok()?;
                (page.dropped_lines == 1).then_some(page)
            },
        )
        .await;
        assert_eq!(page.lines.len(), 1);
        assert_eq!(page.lines[0].text, "new");
        stop.trigger();
        sweeper.await.unwrap();
    }
}
