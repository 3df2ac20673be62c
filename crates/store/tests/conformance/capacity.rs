use std::collections::BTreeMap;

use einsora_core::lifecycle::State;
use einsora_core::reasons::Reason;
use einsora_core::region::Region;
use einsora_store::{Admission, QuotaClass, Transition};

use crate::harness::{TestDb, create, local, new_workload, reason, step, tenant, workload_in};

/// Capacity counts by placed class, by requested class while no placement is recorded (never
/// under-counted), only in states that hold capacity, and only in the region asked about.
pub async fn held_by_placed_class_else_requested(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    store
        .set_quota(t, &QuotaClass::Default, None)
        .await
        .unwrap();

    let mut big = new_workload(t, "fell-back");
    big.gpu_class = "h100-80gb".into();
    big.units = 2;
    let big = store.create_workload(&big, &reason()).await.unwrap();
    let fallback = Admission {
        placed_class: "l40s-48gb".into(),
        machine_id: None,
        driver: None,
        devices: Vec::new(),
    };
    store
        .transition(&Transition {
            workload: &big,
            to: State::Provisioning,
            reason: &Reason::Ready,
            admission: Some(&fallback),
            fence: None,
        })
        .await
        .unwrap();

    // Deleting holds capacity, and one never admitted has no placement: its requested class
    // counts until it is gone.
    let mut unplaced = new_workload(t, "unplaced");
    unplaced.gpu_class = "a100-80gb".into();
    let unplaced = store.create_workload(&unplaced, &reason()).await.unwrap();
    step(store, &unplaced, State::Deleting).await;

    workload_in(store, t, State::Running).await;
    workload_in(store, t, State::Stopping).await;
    let admitted = workload_in(store, t, State::Provisioning).await;
    step(store, &admitted, State::Deleting).await;
    workload_in(store, t, State::Stopped).await;
    workload_in(store, t, State::Failed).await;
    workload_in(store, t, State::Queued).await;
    create(store, t, "pending").await;
    let deleted = workload_in(store, t, State::Running).await;
    let deleted = step(store, &deleted, State::Deleting).await;
    step(store, &deleted, State::Deleted).await;

    let mut elsewhere = new_workload(t, "elsewhere");
    elsewhere.region = Region::new("other").unwrap();
    let elsewhere = store.create_workload(&elsewhere, &reason()).await.unwrap();
    step(store, &elsewhere, State::Provisioning).await;

    let held = store.capacity_held(&local()).await.unwrap();
    let expected = BTreeMap::from([
        ("l40s-48gb".to_owned(), 2),
        ("a100-80gb".to_owned(), 1),
        ("cpu-1c-2g".to_owned(), 3),
    ]);
    assert_eq!(held, expected);
    let other = store
        .capacity_held(&Region::new("other").unwrap())
        .await
        .unwrap();
    assert_eq!(other, BTreeMap::from([("cpu-1c-2g".to_owned(), 1)]));
}
