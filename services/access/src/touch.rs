//! Scale-to-zero's other half: the controller parks an endpoint that went its idle time
//! without requests (`EndpointParams.park_after_idle_s`), and only the proxy sees requests.
//! Every endpoint a request was sent to since the last report, and every one with a request
//! still in flight or waiting in its queue, is reported used every [`EVERY`]
//! (`ControllerInternalService.TouchEndpoints`); the controller keeps the time in the store, so
//! its restart or failover doesn't park one in use. A report that fails is merged into the next.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use einsora_runtime::shutdown::Shutdown;
use uuid::Uuid;

use crate::app::Proxy;

/// How often endpoints' use is reported: well under the shortest idle time (a minute).
pub const EVERY: Duration = Duration::from_secs(5);
/// The most endpoints one report names (the controller's bound).
const MOST: usize = 10_000;

/// Endpoints used since the last report.
#[derive(Debug, Default)]
pub(crate) struct Touched {
    since: Mutex<HashSet<Uuid>>,
}

impl Touched {
    /// A request is on its way to `endpoint`.
    pub(crate) fn touch(&self, endpoint: Uuid) {
        self.lock().insert(endpoint);
    }

    /// What to report now: those used since the last report, and `busy` (in flight or queued
    /// now). Taken out; [`Touched::keep`] puts back a report that failed.
    fn take(&self, busy: Vec<Uuid>) -> Vec<Uuid> {
        let mut since = std::mem::take(&mut *self.lock());
        since.extend(busy);
        since.into_iter().collect()
    }

    fn keep(&self, unsent: Vec<Uuid>) {
        self.lock().extend(unsent);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<Uuid>> {
        self.since.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Reports every `every` until shutdown.
pub(crate) async fn run(proxy: Arc<Proxy>, every: Duration, shutdown: Shutdown) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = shutdown.cancelled() => return,
        }
        let used = proxy.touched.take(proxy.queues.busy());
        for batch in used.chunks(MOST) {
            if let Err(e) = proxy.upstream.touch(batch).await {
                tracing::debug!(
                    ?e,
                    "couldn't report endpoints' use; sent with the next report"
                );
                proxy.touched.keep(batch.to_vec());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_names_each_used_or_busy_endpoint_once_and_a_failed_one_is_kept() {
        let touched = Touched::default();
        let (a, b, c) = (Uuid::from_u128(1), Uuid::from_u128(2), Uuid::from_u128(3));
        touched.touch(a);
        touched.touch(a);
        touched.touch(b);
        let mut first = touched.take(vec![b, c]);
        first.sort();
        assert_eq!(first, [a, b, c]);
        // Taken: the next names only what is busy then.
        assert_eq!(touched.take(vec![]), Vec::<Uuid>::new());
        touched.keep(vec![a]);
        assert_eq!(touched.take(vec![]), [a]);
    }
}
