use einsora_core::lifecycle::State;
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
        matches!(err, StoreError::NameTaken(ref n) if n == "same"),
        "{err}"
    );
    let other = tenant(store, None).await;
    create(store, other, "same").await;
    let deleting = step(store, &first, State::Deleting).await;
    step(store, &deleting, State::Deleted).await;
    create(store, t, "same").await;
}
