use std::time::Duration;

use crate::harness::{TestDb, create, tenant};

/// A commit through another connection (as from another process: `einsora up` runs the API and
/// the controller as separate processes) wakes whoever waits on the change signal.
pub async fn another_connection_commit_wakes_waiters(db: TestDb) {
    let other = einsora_store::open(&db.url).await.unwrap();
    let t = tenant(&*other, None).await;
    // Let the tenant's commit reach the signal before subscribing.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut signal = db.store.changes();
    let waiter = tokio::spawn(async move { signal.changed().await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiter.is_finished(), "no change yet");
    create(&*other, t, "from-elsewhere").await;
    let woke = tokio::time::timeout(Duration::from_secs(10), waiter).await;
    assert!(matches!(woke, Ok(Ok(true))), "{woke:?}");
}
