use einsora_core::lifecycle::State;
use einsora_store::StoreError;

use crate::harness::{TestDb, create, tenant, try_step};

/// The API and the controller (two stores, as two processes) race on one workload: one
/// compare-and-swap wins, the other sees a conflict, and the timeline gets exactly one event.
pub async fn two_writers_exactly_one_wins(db: TestDb) {
    let store = &*db.store;
    let other = db.open_again().await;
    let t = tenant(store, None).await;
    for round in 0..20 {
        let w = create(store, t, &format!("race-{round}")).await;
        let (a, b) = tokio::join!(
            try_step(store, &w, State::Queued),
            try_step(&*other, &w, State::Deleting)
        );
        let wins = [&a, &b].iter().filter(|r| r.is_ok()).count();
        assert_eq!(wins, 1, "round {round}: {a:?} / {b:?}");
        let (winner, loser) = match (a, b) {
            (Ok(w), Err(e)) | (Err(e), Ok(w)) => (w.state, e),
            other => panic!("round {round}: {other:?}"),
        };
        assert!(
            matches!(loser, StoreError::Conflict { current } if current == winner),
            "round {round}: {loser}"
        );
        let events = store.events(w.id).await.unwrap();
        assert_eq!(
            events.len(),
            2,
            "round {round}: create + exactly one transition"
        );
        assert_eq!(store.workload(w.id).await.unwrap().unwrap().state, winner);
    }
}
