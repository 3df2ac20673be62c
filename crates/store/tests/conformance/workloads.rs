use einsora_core::lifecycle::State;
use einsora_core::reasons::Reason;
use einsora_store::{StoreError, WorkloadFilter};

use crate::harness::{TestDb, create, local, new_workload, reason, step, tenant, workload_in};

pub async fn lists_hide_deleted_unless_asked(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    let other = tenant(store, None).await;
    let live = create(store, t, "live").await;
    let gone = workload_in(store, t, State::Deleted).await;
    create(store, other, "theirs").await;

    let mine = WorkloadFilter {
        tenant: Some(t),
        ..WorkloadFilter::default()
    };
    let ids: Vec<_> = store
        .workloads(&mine)
        .await
        .unwrap()
        .into_iter()
        .map(|w| w.id)
        .collect();
    assert_eq!(ids, [live.id]);
    let all = WorkloadFilter {
        include_deleted: true,
        ..mine.clone()
    };
    let ids: Vec<_> = store
        .workloads(&all)
        .await
        .unwrap()
        .into_iter()
        .map(|w| w.id)
        .collect();
    assert_eq!(ids, [live.id, gone.id], "oldest first");
    let pending = WorkloadFilter {
        region: Some(local()),
        states: vec![State::Pending, State::Queued],
        ..WorkloadFilter::default()
    };
    assert_eq!(
        store.workloads(&pending).await.unwrap().len(),
        2,
        "both tenants' pending"
    );
    assert_eq!(
        store.events(gone.id).await.unwrap().len(),
        3,
        "history stays"
    );
}

pub async fn names_are_unique_among_live_workloads(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    let first = create(store, t, "same").await;
    let err = store
        .create_workload(&new_workload(t, "same"), &reason())
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::Taken(einsora_store::Taken::WorkloadName(ref n)) if n == "same"),
        "{err}"
    );
    let other = tenant(store, None).await;
    create(store, other, "same").await;
    let deleting = step(store, &first, State::Deleting).await;
    step(store, &deleting, State::Deleted).await;
    create(store, t, "same").await;
}

/// The admission queue: a region's pending and queued workloads in the order each last went to
/// pending (created or started again), notes not moving them, with the tenant's trust.
pub async fn the_queue_is_first_come_first_by_the_latest_step_into_pending(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    let older = create(store, t, "older").await;
    let younger = create(store, t, "younger").await;
    let queued = step(store, &younger, State::Queued).await;
    let order = |waiting: Vec<einsora_store::Waiting>| {
        waiting
            .into_iter()
            .map(|e| e.workload.id)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        order(store.waiting(&local()).await.unwrap()),
        [older.id, younger.id]
    );
    // The older one runs, stops and is started again: now it came last.
    let mut w = older;
    for to in [
        State::Provisioning,
        State::Running,
        State::Stopping,
        State::Stopped,
        State::Pending,
    ] {
        w = step(store, &w, to).await;
    }
    store
        .note(&queued, &Reason::MachineOffline, None)
        .await
        .unwrap();
    let waiting = store.waiting(&local()).await.unwrap();
    assert!(
        waiting.iter().all(|e| e.tenant_trusted),
        "the harness's tenants are trusted"
    );
    // Each has waited since its latest step into pending: the younger one since it was
    // created (its note and move to queued don't count), the other since it was started again.
    for entry in &waiting {
        let events = store.events(entry.workload.id).await.unwrap();
        let into_pending = events
            .iter()
            .rev()
            .find(|e| e.to == State::Pending && e.from != Some(State::Pending))
            .unwrap();
        assert_eq!(entry.since, into_pending.at, "{}", entry.workload.name);
    }
    assert_eq!(
        order(waiting),
        [younger.id, w.id],
        "a note doesn't move the younger one"
    );
    let elsewhere = einsora_core::region::Region::new("lab").unwrap();
    assert!(store.waiting(&elsewhere).await.unwrap().is_empty());
}

/// The controller's census counts a region's workloads by state, every tenant's, deleted ones
/// and other regions' left out.
pub async fn the_census_counts_a_regions_workloads_by_state(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    let other = tenant(store, None).await;
    create(store, t, "a").await;
    create(store, other, "b").await;
    workload_in(store, t, State::Running).await;
    workload_in(store, t, State::Deleted).await;
    let census = store.census(&local()).await.unwrap();
    let counts: Vec<(State, u64)> = census.into_iter().collect();
    assert_eq!(counts, [(State::Pending, 2), (State::Running, 1)]);
    let elsewhere = einsora_core::region::Region::new("elsewhere").unwrap();
    assert!(store.census(&elsewhere).await.unwrap().is_empty());
}

/// Scale-to-zero: the region's running endpoints with their last request, moved forward only,
/// and their latest step into running; other kinds, states and regions left out.
pub async fn endpoints_last_requests_move_forward_only(db: TestDb) {
    use einsora_core::kind::WorkloadKind;
    use time::{Duration, OffsetDateTime};

    let store = &*db.store;
    let t = tenant(store, None).await;
    let endpoint = |name: &str| einsora_store::NewWorkload {
        kind: WorkloadKind::Endpoint,
        image: "openai-endpoint".into(),
        params: r#"{"model":"m.gguf"}"#.into(),
        ..new_workload(t, name)
    };
    let path = [State::Provisioning, State::Running];
    let used = einsora_testkit::fixtures::Lifecycle::placing_on("cpu-1c-2g")
        .through(store, &endpoint("used"), &path)
        .await;
    einsora_testkit::fixtures::Lifecycle::placing_on("cpu-1c-2g")
        .through(store, &endpoint("unused"), &path)
        .await;
    let waiting = einsora_testkit::fixtures::Lifecycle::placing_on("cpu-1c-2g")
        .through(store, &endpoint("waiting"), &[])
        .await;
    workload_in(store, t, State::Running).await;
    // Milliseconds, as the store keeps them.
    let at = OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap();
    store
        .touch_endpoints(
            &[used.id, waiting.id, einsora_core::ids::WorkloadId::new()],
            at,
        )
        .await
        .unwrap();
    store
        .touch_endpoints(&[used.id], at - Duration::minutes(5))
        .await
        .unwrap();
    store.touch_endpoints(&[], at).await.unwrap();
    let mut found = store.running_endpoints(&local()).await.unwrap();
    found.sort_by_key(|e| e.workload.name.clone());
    let seen: Vec<_> = found
        .iter()
        .map(|e| (e.workload.name.as_str(), e.last_request))
        .collect();
    assert_eq!(seen, [("unused", None), ("used", Some(at))]);
    for e in &found {
        let gap = (e.running_since - OffsetDateTime::now_utc()).abs();
        assert!(gap < Duration::minutes(1), "{gap}");
    }
    let elsewhere = einsora_core::region::Region::new("elsewhere").unwrap();
    assert!(
        store
            .running_endpoints(&elsewhere)
            .await
            .unwrap()
            .is_empty()
    );
}
