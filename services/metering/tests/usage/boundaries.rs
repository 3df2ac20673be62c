//! Hours, replays and restarts, with an injected `now`.

use einsora_core::lifecycle::State::*;
use einsora_metering::{Meter, Pass, PassReport};
use time::OffsetDateTime;
use time::macros::datetime;

use crate::harness::{
    PLACED_CLASS, TestDb, UNITS, records, set_event_times, step, tenant, usage, workload,
};

const H10: OffsetDateTime = datetime!(2025-03-01 10:00 UTC);
const H11: OffsetDateTime = datetime!(2025-03-01 11:00 UTC);
const NOON: OffsetDateTime = datetime!(2025-03-01 12:00 UTC);

/// A workload that ran from 10:59:30 to 11:00:45 and stopped.
async fn ran_across_eleven(db: &TestDb) -> einsora_core::workload::Workload {
    let t = tenant(&*db.store).await;
    let w = workload(&*db.store, t, &[Provisioning, Running, Stopping, Stopped]).await;
    let times = [
        datetime!(2025-03-01 10:58 UTC),    // created
        datetime!(2025-03-01 10:59 UTC),    // provisioning
        datetime!(2025-03-01 10:59:30 UTC), // running
        datetime!(2025-03-01 11:00:45 UTC), // stopping
        datetime!(2025-03-01 11:01 UTC),    // stopped
    ];
    set_event_times(db, w.id, &times).await;
    w
}

pub async fn a_run_across_an_hour_boundary_is_split_at_it(db: TestDb) {
    let w = ran_across_eleven(&db).await;
    let mut meter = Meter::new(db.store.clone());
    let report = meter.pass(Pass::Sweep, NOON).await.unwrap();
    assert_eq!(
        report,
        PassReport {
            recomputed: 1,
            written: 1
        }
    );

    assert_eq!(usage(&db, &w).await, [(H10, 30), (H11, 45)]);
    for r in records(&db, &w).await {
        assert_eq!(
            (r.tenant_id, r.workload_id, r.region.as_str(), r.machine_id),
            (w.tenant_id, w.id, "local", None)
        );
        assert_eq!((r.placed_class.as_str(), r.units), (PLACED_CLASS, UNITS));
    }
}

pub async fn replays_and_restarts_never_double_count(db: TestDb) {
    let w = ran_across_eleven(&db).await;
    let mut meter = Meter::new(db.store.clone());
    meter.pass(Pass::Sweep, NOON).await.unwrap();
    let first = records(&db, &w).await;
    assert_eq!(usage(&db, &w).await, [(H10, 30), (H11, 45)]);

    // The same events again, by the same meter, at the same time and later.
    for (pass, now) in [
        (Pass::Sweep, NOON),
        (Pass::Changes, NOON),
        (Pass::Sweep, NOON + time::Duration::days(3)),
    ] {
        let report = meter.pass(pass, now).await.unwrap();
        assert_eq!(report.written, 0, "{pass:?} at {now}");
    }
    // A restart: a new process, a new store, a meter that remembers nothing.
    let mut restarted = Meter::new(db.open_again().await);
    let report = restarted.pass(Pass::Changes, NOON).await.unwrap();
    assert_eq!(
        report,
        PassReport {
            recomputed: 1,
            written: 0
        }
    );
    assert_eq!(records(&db, &w).await, first, "same records, same IDs");
}

pub async fn a_running_workload_is_accounted_up_to_now(db: TestDb) {
    let t = tenant(&*db.store).await;
    let w = workload(&*db.store, t, &[Provisioning, Running]).await;
    let running = datetime!(2025-03-01 10:30 UTC);
    set_event_times(&db, w.id, &[running, running, running]).await;

    let mut meter = Meter::new(db.store.clone());
    meter
        .pass(Pass::Sweep, datetime!(2025-03-01 11:15 UTC))
        .await
        .unwrap();
    assert_eq!(usage(&db, &w).await, [(H10, 1800), (H11, 900)]);
    let ids: Vec<_> = records(&db, &w).await.iter().map(|r| r.id).collect();

    meter
        .pass(Pass::Sweep, datetime!(2025-03-01 12:00:20 UTC))
        .await
        .unwrap();
    assert_eq!(usage(&db, &w).await, [(H10, 1800), (H11, 3600), (NOON, 20)]);
    let grown: Vec<_> = records(&db, &w).await.iter().map(|r| r.id).collect();
    assert_eq!(grown[..2], ids[..], "an hour keeps its record as it grows");

    // A restarted meter at the same time agrees, so it writes nothing.
    let mut restarted = Meter::new(db.open_again().await);
    let report = restarted
        .pass(Pass::Sweep, datetime!(2025-03-01 12:00:20 UTC))
        .await
        .unwrap();
    assert_eq!(report.written, 0);
}

pub async fn a_changes_pass_leaves_unchanged_running_workloads_to_the_sweep(db: TestDb) {
    let t = tenant(&*db.store).await;
    let w = workload(&*db.store, t, &[Provisioning, Running]).await;
    let running = datetime!(2025-03-01 10:30 UTC);
    set_event_times(&db, w.id, &[running, running, running]).await;
    let mut meter = Meter::new(db.store.clone());
    meter
        .pass(Pass::Changes, datetime!(2025-03-01 10:40 UTC))
        .await
        .unwrap();
    assert_eq!(
        usage(&db, &w).await,
        [(H10, 600)],
        "a first pass covers everything"
    );

    // What it writes wakes the change signal (on SQLite): such a pass must find nothing to do.
    let report = meter
        .pass(Pass::Changes, datetime!(2025-03-01 10:41 UTC))
        .await
        .unwrap();
    assert_eq!(
        report,
        PassReport {
            recomputed: 0,
            written: 0
        }
    );
    assert_eq!(usage(&db, &w).await, [(H10, 600)]);

    meter
        .pass(Pass::Sweep, datetime!(2025-03-01 10:42 UTC))
        .await
        .unwrap();
    assert_eq!(usage(&db, &w).await, [(H10, 720)]);

    // A change to the workload is a change pass's business.
    let w = step(&*db.store, &w, Stopping).await;
    let events = db.store.events(w.id).await.unwrap();
    let stop = datetime!(2025-03-01 10:43 UTC);
    let mut times = vec![running; events.len() - 1];
    times.push(stop);
    set_event_times(&db, w.id, &times).await;
    let report = meter
        .pass(Pass::Changes, datetime!(2025-03-01 10:50 UTC))
        .await
        .unwrap();
    assert_eq!(
        report,
        PassReport {
            recomputed: 1,
            written: 1
        }
    );
    assert_eq!(usage(&db, &w).await, [(H10, 780)]);
}

pub async fn a_deleted_workload_keeps_its_usage(db: TestDb) {
    let t = tenant(&*db.store).await;
    let w = workload(&*db.store, t, &[Provisioning, Running, Deleting, Deleted]).await;
    let at = |m: u8| H10.replace_minute(m).unwrap();
    set_event_times(&db, w.id, &[at(0), at(0), at(0), at(45), at(46)]).await;

    Meter::new(db.store.clone())
        .pass(Pass::Sweep, NOON)
        .await
        .unwrap();
    assert_eq!(usage(&db, &w).await, [(H10, 2700)]);
    let report = Meter::new(db.open_again().await)
        .pass(Pass::Sweep, NOON)
        .await
        .unwrap();
    assert_eq!(
        report,
        PassReport {
            recomputed: 1,
            written: 0
        }
    );
}
