//! Scale-to-zero: a running endpoint that parks when idle (`EndpointParams.park_after_idle_s`)
//! is stopped once it has gone that long without a request, counted from its last request as
//! the access proxy reported it (`TouchEndpoints`, kept in the store) or from its latest step
//! into running, whichever is later. The proxy reports an endpoint with a request in flight as
//! used every few seconds, so one busy with a long answer is never idle. The step is the
//! normal stop (running → stopping), its timeline saying why.

use std::time::Duration;

use einsora_core::lifecycle::State;
use einsora_core::reasons::Reason;
use einsora_proto::convert::WorkloadParams;
use einsora_store::{InUse, StoreError};
use time::OffsetDateTime;

use super::Reconciler;
use crate::writer::Step;

/// Whether an endpoint that parks after `after` without requests, last used at
/// `last_request` (none yet) and running since `running_since`, is parked at `now`.
pub(crate) fn parks(
    after: Duration,
    last_request: Option<OffsetDateTime>,
    running_since: OffsetDateTime,
    now: OffsetDateTime,
) -> bool {
    let since = last_request.map_or(running_since, |at| at.max(running_since));
    now - since >= after
}

/// The idle time an endpoint parks after, as its parameters say; `None` for one that doesn't
/// (or whose parameters don't read).
pub(crate) fn park_after(w: &einsora_core::workload::Workload) -> Option<Duration> {
    match WorkloadParams::from_json(w.kind, &w.params) {
        Ok(WorkloadParams::Endpoint {
            park_after_idle_s: Some(s),
            ..
        }) => Some(Duration::from_secs(s.into())),
        _ => None,
    }
}

impl Reconciler {
    /// The steps that park the region's idle endpoints, leaving out those another step of this
    /// pass moves already.
    pub(super) async fn idle(
        &self,
        moved: &dyn Fn(&einsora_core::workload::Workload) -> bool,
    ) -> Result<Vec<Step>, StoreError> {
        let now = OffsetDateTime::now_utc();
        let mut steps = Vec::new();
        for InUse {
            workload,
            last_request,
            running_since,
        } in self.store.running_endpoints(&self.region).await?
        {
            let Some(after) = park_after(&workload) else {
                continue;
            };
            if moved(&workload) || !parks(after, last_request, running_since, now) {
                continue;
            }
            tracing::info!(workload = %workload.id, ?after, "parking an idle endpoint");
            let reason = Reason::ParkedWhenIdle { after };
            steps.push(Step::to(workload, State::Stopping, reason));
        }
        Ok(steps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    const TEN_MIN: Duration = Duration::from_secs(600);

    #[test]
    fn idle_is_counted_from_the_later_of_its_last_request_and_its_start() {
        let started = datetime!(2026-01-01 10:00 UTC);
        let at = |minutes: i64| started + time::Duration::minutes(minutes);
        // Never asked: from when it started running.
        assert!(!parks(TEN_MIN, None, started, at(9)));
        assert!(parks(TEN_MIN, None, started, at(10)));
        // A request five minutes in holds it until fifteen.
        assert!(!parks(TEN_MIN, Some(at(5)), started, at(14)));
        assert!(parks(TEN_MIN, Some(at(5)), started, at(15)));
        // A request from before it was parked and started again doesn't count against it.
        let again = at(60);
        assert!(!parks(TEN_MIN, Some(at(5)), again, at(65)));
        assert!(parks(TEN_MIN, Some(at(5)), again, at(70)));
        // A clock behind the last request: not idle.
        assert!(!parks(TEN_MIN, Some(at(20)), started, at(19)));
    }
}
