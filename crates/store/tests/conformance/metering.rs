use std::collections::BTreeMap;

use einsora_core::ids::{TenantId, WorkloadId};
use einsora_core::lifecycle::State;
use einsora_store::{StoreError, UsageChange, UsageRecord};
use time::macros::datetime;
use time::{Duration, OffsetDateTime};

use einsora_testkit::fixtures::usage;

use crate::harness::{TestDb, step, tenant, workload_in};

pub async fn metering_reads_changed_and_metered_workloads(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    let stopped = workload_in(store, t, State::Stopped).await;
    let running = workload_in(store, t, State::Running).await;
    let pending = workload_in(store, t, State::Pending).await;
    // Rows are stamped in milliseconds: keep the ones above strictly before `since`.
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let since = OffsetDateTime::now_utc();
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let deleted = step(
        store,
        &step(store, &pending, State::Deleting).await,
        State::Deleted,
    )
    .await;
    let fresh = workload_in(store, t, State::Pending).await;

    let ids = |ws: Vec<einsora_core::workload::Workload>| -> Vec<WorkloadId> {
        ws.into_iter().map(|w| w.id).collect()
    };
    let mut all = vec![stopped.id, running.id, deleted.id, fresh.id];
    all.sort();
    assert_eq!(ids(store.workloads_to_meter(None).await.unwrap()), all);
    let mut changed_or_running = vec![running.id, deleted.id, fresh.id];
    changed_or_running.sort();
    assert_eq!(
        ids(store.workloads_to_meter(Some(since)).await.unwrap()),
        changed_or_running,
        "changed since (deleted included) or running, by ID"
    );
    let got = store.workloads_to_meter(Some(since)).await.unwrap();
    let read = got.iter().find(|w| w.id == deleted.id).unwrap();
    assert_eq!(
        read, &deleted,
        "whole rows, as the store reads them elsewhere"
    );
}

pub async fn timelines_and_usage_of_many_workloads(db: TestDb) {
    let store = &*db.store;
    let (t, other) = (tenant(store, None).await, tenant(store, None).await);
    let a = workload_in(store, t, State::Stopped).await;
    let b = workload_in(store, t, State::Running).await;
    let theirs = workload_in(store, other, State::Running).await;
    let h0 = datetime!(2025-03-01 10:00 UTC);
    for r in [
        usage(t, a.id, h0 + Duration::hours(1), 60),
        usage(t, a.id, h0, 3600),
        usage(t, b.id, h0, 10),
        usage(other, theirs.id, h0, 20),
    ] {
        store.record_usage(&r).await.unwrap();
    }
    // More IDs than one query binds, most of them unknown.
    let mut ids: Vec<WorkloadId> = (0..1200).map(|_| WorkloadId::new()).collect();
    ids.extend([a.id, theirs.id]);

    let timelines = store.timelines(&ids).await.unwrap();
    let expected = BTreeMap::from([
        (a.id, store.events(a.id).await.unwrap()),
        (theirs.id, store.events(theirs.id).await.unwrap()),
    ]);
    assert_eq!(timelines, expected, "each oldest first; unknown IDs absent");
    assert_eq!(store.timelines(&[]).await.unwrap(), BTreeMap::new());

    let found = store.usage_of_workloads(&ids).await.unwrap();
    let hours: BTreeMap<_, Vec<_>> = found
        .iter()
        .map(|(id, rs)| {
            (
                *id,
                rs.iter()
                    .map(|r| (r.tenant_id, r.hour_start, r.seconds))
                    .collect(),
            )
        })
        .collect();
    assert_eq!(
        hours,
        BTreeMap::from([
            (a.id, vec![(t, h0, 3600), (t, h0 + Duration::hours(1), 60)]),
            (theirs.id, vec![(other, h0, 20)]),
        ]),
        "every tenant's, oldest first"
    );
}

pub async fn usage_changes_are_applied_whole_or_not_at_all(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    let w = workload_in(store, t, State::Running).await;
    let h0 = datetime!(2025-03-01 10:00 UTC);
    let hour = |n: i64| h0 + Duration::hours(n);
    let change = |upsert: Vec<UsageRecord>, remove_hours: Vec<OffsetDateTime>| UsageChange {
        workload_id: w.id,
        upsert,
        remove_hours,
    };
    let seconds = || async {
        let rs = store.workload_usage(t, w.id).await.unwrap();
        rs.iter()
            .map(|r| (r.hour_start, r.seconds))
            .collect::<Vec<_>>()
    };

    let first = vec![usage(t, w.id, hour(0), 30), usage(t, w.id, hour(1), 45)];
    store.apply_usage(&change(first, vec![])).await.unwrap();
    assert_eq!(seconds().await, [(hour(0), 30), (hour(1), 45)]);
    let ids: Vec<_> = store
        .workload_usage(t, w.id)
        .await
        .unwrap()
        .iter()
        .map(|r| r.id)
        .collect();

    // An hour rewritten keeps its record's ID; another hour goes.
    let grown = vec![usage(t, w.id, hour(0), 90)];
    store
        .apply_usage(&change(grown, vec![hour(1), hour(5)]))
        .await
        .unwrap();
    let now = store.workload_usage(t, w.id).await.unwrap();
    assert_eq!((now.len(), now[0].id, now[0].seconds), (1, ids[0], 90));

    // Refused before anything is written: another workload's record, an hour not on the hour,
    // more seconds than an hour has.
    let refused = [
        change(
            vec![
                usage(t, w.id, hour(2), 1),
                usage(t, WorkloadId::new(), hour(3), 1),
            ],
            vec![],
        ),
        change(
            vec![
                usage(t, w.id, hour(2), 1),
                usage(t, w.id, hour(3) + Duration::minutes(1), 1),
            ],
            vec![],
        ),
        change(
            vec![usage(t, w.id, hour(2), 1), usage(t, w.id, hour(3), 3601)],
            vec![hour(0)],
        ),
    ];
    for c in &refused {
        let err = store.apply_usage(c).await.unwrap_err();
        assert!(matches!(err, StoreError::InvalidInput(_)), "{err:?}");
    }
    // Failing inside the transaction (a tenant that doesn't exist) undoes the rest of it.
    let bad_tenant = usage(TenantId::new(), w.id, hour(4), 1);
    let failing = change(vec![usage(t, w.id, hour(2), 1), bad_tenant], vec![hour(0)]);
    assert!(store.apply_usage(&failing).await.is_err());
    assert_eq!(
        seconds().await,
        [(hour(0), 90)],
        "nothing of the refused changes"
    );

    // An empty change is no work.
    store.apply_usage(&change(vec![], vec![])).await.unwrap();
    assert_eq!(seconds().await, [(hour(0), 90)]);
}
