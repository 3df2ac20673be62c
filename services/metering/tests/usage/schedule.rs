//! The loop: passes on the store's change signal, and a clean stop.

use std::sync::Arc;
use std::time::Duration;

use einsora_core::lifecycle::State::*;
use einsora_metering::{Clock, Meter, run_passes};
use einsora_runtime::shutdown::Shutdown;
use time::OffsetDateTime;

use einsora_testkit::eventually_async;

use crate::harness::{TestDb, step, tenant, usage, workload};

/// Long enough for anything that should happen; it only runs out on a failure.
const PATIENCE: Duration = Duration::from_secs(20);

/// The system's clock, two hours ahead.
#[derive(Debug)]
struct TwoHoursAhead;

impl Clock for TwoHoursAhead {
    fn now(&self) -> OffsetDateTime {
        OffsetDateTime::now_utc() + time::Duration::hours(2)
    }
}

pub async fn passes_follow_changes_and_stop_on_shutdown(db: TestDb) {
    let shutdown = Shutdown::new();
    // No sweep but the first within the test: what follows comes from the change signal.
    let passes = tokio::spawn(run_passes(
        Meter::new(db.open_again().await),
        Arc::new(TwoHoursAhead),
        Duration::from_secs(3600),
        shutdown.clone(),
    ));
    let t = tenant(&*db.store).await;
    let w = workload(&*db.store, t, &[Provisioning, Running]).await;

    // To a clock two hours ahead, it has been running for two hours.
    eventually_async("running usage recorded", PATIENCE, async || {
        let total: u32 = usage(&db, &w).await.iter().map(|(_, s)| s).sum();
        (7197..7260).contains(&total).then_some(())
    })
    .await;

    // The stop is stamped by the store's clock, a second or two after the start: the run
    // shrinks to that, and the hours the timeline no longer supports go.
    let w = step(&*db.store, &w, Stopping).await;
    let events = db.store.events(w.id).await.unwrap();
    let ran = events[3].at - events[2].at;
    assert_eq!((events[2].to, events[3].to), (Running, Stopping));
    eventually_async("usage corrected after the stop", PATIENCE, async || {
        let total: i64 = usage(&db, &w)
            .await
            .iter()
            .map(|(_, s)| i64::from(*s))
            .sum();
        // Whole seconds per hour: up to a second less if the run spans an hour boundary.
        (ran.whole_seconds() - 1..=ran.whole_seconds())
            .contains(&total)
            .then_some(())
    })
    .await;

    shutdown.trigger();
    tokio::time::timeout(Duration::from_secs(5), passes)
        .await
        .expect("the loop stops on shutdown")
        .unwrap();
}
