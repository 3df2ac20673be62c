use std::sync::Arc;

use einsora_core::lifecycle::State;
use einsora_store::{QuotaClass, StoreError, WorkloadFilter};

use crate::harness::{TestDb, create, new_workload, reason, shape_of, step, tenant, workload_in};

const CLASS: &str = "cpu-1c-2g";

/// 50 creates at once against a quota of 7, from two stores as from two processes: exactly 7
/// succeed, because the quota row is locked.
pub async fn concurrent_creates_stop_at_the_quota(db: TestDb) {
    const QUOTA: u32 = 7;
    let t = tenant(&*db.store, Some(QUOTA)).await;
    let stores = [Arc::clone(&db.store), db.open_again().await];
    let tasks: Vec<_> = (0..50)
        .map(|i| {
            let store = Arc::clone(&stores[i % 2]);
            tokio::spawn(async move {
                store
                    .create_workload(&new_workload(t, &format!("c{i}")), &reason())
                    .await
            })
        })
        .collect();
    let mut ok = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(_) => ok += 1,
            Err(StoreError::QuotaExceeded {
                limit, requested, ..
            }) => {
                assert_eq!((limit, requested), (u64::from(QUOTA), 1));
            }
            Err(e) => panic!("unexpected: {e}"),
        }
    }
    assert_eq!(ok, QUOTA);
    let filter = WorkloadFilter {
        tenant: Some(t),
        ..WorkloadFilter::default()
    };
    assert_eq!(
        db.store.workloads(&filter).await.unwrap().len(),
        QUOTA as usize
    );
}

pub async fn start_rechecks_quota(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, Some(1)).await;
    let a = workload_in(store, t, State::Failed).await;
    let b = create(store, t, "b").await;
    let err = store
        .start(&a, shape_of(CLASS), &reason())
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::QuotaExceeded { held: 1, .. }),
        "{err}"
    );
    assert_eq!(
        store.workload(a.id).await.unwrap().unwrap().state,
        State::Failed
    );
    step(store, &b, State::Deleting).await;
    let started = store.start(&a, shape_of(CLASS), &reason()).await.unwrap();
    assert_eq!(started.state, State::Pending);
    let running = step(store, &started, State::Provisioning).await;
    let err = store
        .start(&running, shape_of(CLASS), &reason())
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::InvalidTransition(_)), "{err}");
}

pub async fn default_and_missing_quota_rows(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, Some(0)).await;
    let mut gpu = new_workload(t, "gpu");
    gpu.gpu_class = "l40s-48gb".into();
    gpu.units = 2;
    let err = store.create_workload(&gpu, &reason()).await.unwrap_err();
    assert!(
        matches!(err, StoreError::QuotaExceeded { limit: 0, .. }),
        "no row: {err}"
    );
    store
        .set_quota(t, &QuotaClass::Default, Some(2))
        .await
        .unwrap();
    store.create_workload(&gpu, &reason()).await.unwrap();
    let err = store
        .create_workload(&new_workload(t, "cpu"), &reason())
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::QuotaExceeded { limit: 0, .. }),
        "class row wins: {err}"
    );
    store
        .set_quota(t, &QuotaClass::Class("cpu-1c-2g".into()), None)
        .await
        .unwrap();
    for i in 0..5 {
        store
            .create_workload(&new_workload(t, &format!("cpu{i}")), &reason())
            .await
            .unwrap();
    }
}
