use std::time::Duration;

use einsora_core::lifecycle::State;
use einsora_core::reasons::Reason;
use einsora_store::{StoreError, Transition};

use crate::harness::{TestDb, create, tenant};

const NAME: &str = "controller:local";

/// A leader that was paused past its lease can't write once another took over: its transition,
/// note and renewal are refused, and the new leader's writes go through.
pub async fn stale_epoch_is_refused_after_takeover(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    let w = create(store, t, "fenced").await;
    let old = store
        .take_lease(NAME, "a", Duration::from_millis(300))
        .await
        .unwrap()
        .unwrap();
    assert!(
        store
            .take_lease(NAME, "b", Duration::from_secs(30))
            .await
            .unwrap()
            .is_none(),
        "a held lease can't be taken"
    );
    tokio::time::sleep(Duration::from_millis(2200)).await;
    let new = store
        .take_lease(NAME, "b", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    assert!(new.epoch > old.epoch);

    let stale = Transition {
        workload: &w,
        to: State::Queued,
        reason: &Reason::Ready,
        admission: None,
        fence: Some(&old),
    };
    let err = store.transition(&stale).await.unwrap_err();
    assert!(matches!(err, StoreError::LeaseLost(_)), "{err}");
    let err = store
        .note(&w, &Reason::MachineOffline, Some(&old))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::LeaseLost(_)), "{err}");
    let err = store
        .renew_lease(&old, Duration::from_secs(30))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::LeaseLost(_)), "{err}");
    assert_eq!(
        store.events(w.id).await.unwrap().len(),
        1,
        "nothing written"
    );
    assert_eq!(store.workload(w.id).await.unwrap().unwrap(), w);

    let fresh = Transition {
        fence: Some(&new),
        ..stale
    };
    assert_eq!(store.transition(&fresh).await.unwrap().state, State::Queued);
    let renewed = store
        .renew_lease(&new, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(renewed.epoch, new.epoch);
    assert!(renewed.expires_at > new.expires_at);
}

pub async fn released_lease_is_taken_at_once(db: TestDb) {
    let store = &*db.store;
    let a = store
        .take_lease(NAME, "a", Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    let again = store
        .take_lease(NAME, "a", Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    assert!(again.epoch > a.epoch, "re-taking starts a new epoch");
    store.release_lease(&again).await.unwrap();
    let b = store
        .take_lease(NAME, "b", Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    assert!(b.epoch > again.epoch);
    store.release_lease(&a).await.unwrap();
    assert!(
        store
            .take_lease(NAME, "c", Duration::from_secs(60))
            .await
            .unwrap()
            .is_none(),
        "releasing a stale lease doesn't free the new holder's"
    );
}

/// Every lease is listed with its holder and expiry, a released one too (expired).
pub async fn leases_are_listed_with_their_holders(db: TestDb) {
    let store = &*db.store;
    assert!(store.leases().await.unwrap().is_empty());
    let held = store
        .take_lease("controller:one", "a", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    let other = store
        .take_lease("controller:two", "b", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    store.release_lease(&other).await.unwrap();
    let leases = store.leases().await.unwrap();
    let names: Vec<(&str, &str)> = leases
        .iter()
        .map(|l| (l.name.as_str(), l.holder.as_str()))
        .collect();
    assert_eq!(names, [("controller:one", "a"), ("controller:two", "b")]);
    let now = time::OffsetDateTime::now_utc();
    assert_eq!(leases[0].expires_at, held.expires_at);
    assert!(leases[1].expires_at < now, "released: expired");
}
