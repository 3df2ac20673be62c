//! When passes run: a sweep at start and every interval, and a pass over what changed shortly
//! after the store's change signal. A failed pass is logged and left to the next one.

use std::sync::Arc;
use std::time::Duration;

use einsora_runtime::shutdown::Shutdown;
use tokio::time::MissedTickBehavior;

use crate::clock::Clock;
use crate::meter::{Meter, Pass};

static PASSES: std::sync::LazyLock<einsora_runtime::metrics::Latencies<2>> =
    std::sync::LazyLock::new(|| {
        einsora_runtime::metrics::latencies(
            "einsora_metering_pass_duration_seconds",
            "Time a usage accounting pass took, by kind of pass (sweep, changes) and result.",
        )
    });

/// Changes come in bursts (a launch is several transitions): one pass after the burst.
const DEBOUNCE: Duration = Duration::from_secs(1);

/// Runs passes until `shutdown`; a pass in progress is abandoned there, which leaves every
/// workload's records as they were or wholly rewritten.
pub async fn run_passes(
    mut meter: Meter,
    clock: Arc<dyn Clock>,
    interval: Duration,
    shutdown: Shutdown,
) {
    let mut changes = meter.changes();
    let mut sweep = tokio::time::interval(interval);
    sweep.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut listening = true;
    loop {
        let pass = tokio::select! {
            () = shutdown.cancelled() => break,
            _ = sweep.tick() => Pass::Sweep,
            changed = changes.changed(), if listening => {
                listening = changed;
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    () = tokio::time::sleep(DEBOUNCE) => Pass::Changes,
                }
            }
        };
        let now = clock.now();
        let started = std::time::Instant::now();
        let ok = tokio::select! {
            () = shutdown.cancelled() => break,
            result = meter.pass(pass, now) => match result {
                Ok(report) => {
                    tracing::debug!(
                        ?pass, recomputed = report.recomputed, written = report.written,
                        "usage accounted"
                    );
                    true
                }
                Err(e) => {
                    tracing::warn!(
                        error = %e, ?pass, "usage accounting failed; retrying at the next pass"
                    );
                    false
                }
            },
        };
        let labels = [
            (
                "pass",
                if pass == Pass::Sweep {
                    "sweep"
                } else {
                    "changes"
                }
                .to_owned(),
            ),
            ("result", if ok { "ok" } else { "error" }.to_owned()),
        ];
        einsora_runtime::metrics::observe(&PASSES, labels, started.elapsed());
    }
    tracing::debug!("usage accounting stopped");
}
