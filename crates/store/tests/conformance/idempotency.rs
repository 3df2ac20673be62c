//! Idempotency keys on both engines: a claim starts once, keeps its answer, refuses another
//! request, belongs to one user, and expires.

use std::sync::Arc;
use std::time::Duration;

use einsora_core::ids::{TenantId, UserId};
use einsora_core::role::Role;
use einsora_store::{Claimed, IdempotencyClaim, IdempotencyTimes, NewUser, Store};

use crate::harness::{TestDb, tenant};

const DAY: IdempotencyTimes = IdempotencyTimes {
    ttl: Duration::from_secs(24 * 3600),
    abandoned_after: Duration::from_secs(120),
};

async fn user(store: &dyn Store, tenant: TenantId, email: &str) -> UserId {
    let new = NewUser {
        role: Role::Owner,
        id: UserId::new(),
        tenant_id: tenant,
        email: email.into(),
        display_name: email.into(),
        phc: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA".into(),
    };
    store.create_user(&new).await.unwrap();
    new.id
}

fn claim(user: UserId, key: &str, hash: u8) -> IdempotencyClaim {
    IdempotencyClaim {
        user,
        key: key.into(),
        request_hash: vec![hash; 32],
    }
}

fn done(status: u16, body: Option<&str>) -> Claimed {
    Claimed::Done {
        status,
        body: body.map(str::to_owned),
    }
}

/// The first claim starts; the same request again is in progress until it finishes, then
/// gets its answer; another request with the key is a mismatch throughout; a released
/// claim starts again; an answer not kept comes back without its body.
pub async fn a_key_starts_once_then_keeps_its_answer(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    let me = user(store, t, "me@example.com").await;
    let first = claim(me, "k1", 1);
    assert_eq!(
        store.claim_idempotency_key(&first, DAY).await.unwrap(),
        Claimed::Started
    );
    assert_eq!(
        store.claim_idempotency_key(&first, DAY).await.unwrap(),
        Claimed::InProgress
    );
    let other = claim(me, "k1", 2);
    assert_eq!(
        store.claim_idempotency_key(&other, DAY).await.unwrap(),
        Claimed::Mismatch
    );
    assert!(
        !store
            .finish_idempotency_key(&other, 200, Some("{}"))
            .await
            .unwrap()
    );
    assert!(!store.release_idempotency_key(&other).await.unwrap());
    let body = r#"{"id":"w1"}"#;
    assert!(
        store
            .finish_idempotency_key(&first, 202, Some(body))
            .await
            .unwrap()
    );
    assert!(
        !store
            .finish_idempotency_key(&first, 200, Some("{}"))
            .await
            .unwrap(),
        "once"
    );
    for _ in 0..2 {
        let again = store.claim_idempotency_key(&first, DAY).await.unwrap();
        assert_eq!(again, done(202, Some(body)));
    }
    assert_eq!(
        store.claim_idempotency_key(&other, DAY).await.unwrap(),
        Claimed::Mismatch
    );
    assert!(
        !store.release_idempotency_key(&first).await.unwrap(),
        "a done key stays"
    );

    let refused = claim(me, "k2", 3);
    assert_eq!(
        store.claim_idempotency_key(&refused, DAY).await.unwrap(),
        Claimed::Started
    );
    assert!(store.release_idempotency_key(&refused).await.unwrap());
    let retried = claim(me, "k2", 4);
    assert_eq!(
        store.claim_idempotency_key(&retried, DAY).await.unwrap(),
        Claimed::Started
    );

    let secret = claim(me, "k3", 5);
    assert_eq!(
        store.claim_idempotency_key(&secret, DAY).await.unwrap(),
        Claimed::Started
    );
    assert!(
        store
            .finish_idempotency_key(&secret, 200, None)
            .await
            .unwrap()
    );
    assert_eq!(
        store.claim_idempotency_key(&secret, DAY).await.unwrap(),
        done(200, None)
    );
}

/// One key is each user's own: another user's claim with it starts, and answers separately.
pub async fn keys_are_scoped_by_user(db: TestDb) {
    let store = &*db.store;
    let (ta, tb) = (tenant(store, None).await, tenant(store, None).await);
    let a = user(store, ta, "a@example.com").await;
    let a2 = user(store, ta, "a2@example.com").await;
    let b = user(store, tb, "b@example.com").await;
    assert_eq!(
        store
            .claim_idempotency_key(&claim(a, "same", 1), DAY)
            .await
            .unwrap(),
        Claimed::Started
    );
    assert!(
        store
            .finish_idempotency_key(&claim(a, "same", 1), 202, Some("a"))
            .await
            .unwrap()
    );
    for (who, hash) in [(a2, 1), (b, 9)] {
        let theirs = claim(who, "same", hash);
        assert_eq!(
            store.claim_idempotency_key(&theirs, DAY).await.unwrap(),
            Claimed::Started
        );
        assert!(
            store
                .finish_idempotency_key(&theirs, 202, Some("theirs"))
                .await
                .unwrap()
        );
        assert_eq!(
            store.claim_idempotency_key(&theirs, DAY).await.unwrap(),
            done(202, Some("theirs"))
        );
    }
    let mine = store
        .claim_idempotency_key(&claim(a, "same", 1), DAY)
        .await
        .unwrap();
    assert_eq!(mine, done(202, Some("a")));
}

/// Keys older than the TTL are swept by the next claim (anyone's), so the same key starts
/// afresh, even with another request; a request left in progress past `abandoned_after` is
/// taken over by a retry, but not by another request.
pub async fn keys_expire_and_abandoned_claims_are_taken_over(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    let me = user(store, t, "me@example.com").await;
    let someone = user(store, t, "someone@example.com").await;
    let short = IdempotencyTimes {
        ttl: Duration::from_millis(300),
        abandoned_after: Duration::from_millis(100),
    };
    let first = claim(me, "k", 1);
    assert_eq!(
        store.claim_idempotency_key(&first, short).await.unwrap(),
        Claimed::Started
    );
    assert!(
        store
            .finish_idempotency_key(&first, 202, Some("one"))
            .await
            .unwrap()
    );
    let stale = claim(me, "stale", 2);
    assert_eq!(
        store.claim_idempotency_key(&stale, short).await.unwrap(),
        Claimed::Started
    );
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(
        store.claim_idempotency_key(&first, short).await.unwrap(),
        done(202, Some("one"))
    );
    assert_eq!(
        store
            .claim_idempotency_key(&claim(me, "stale", 3), short)
            .await
            .unwrap(),
        Claimed::Mismatch
    );
    assert_eq!(
        store.claim_idempotency_key(&stale, short).await.unwrap(),
        Claimed::Started
    );
    assert_eq!(
        store.claim_idempotency_key(&stale, short).await.unwrap(),
        Claimed::InProgress
    );

    tokio::time::sleep(Duration::from_millis(350)).await;
    // Another user's claim sweeps this user's expired keys.
    let theirs = claim(someone, "other", 4);
    assert_eq!(
        store.claim_idempotency_key(&theirs, short).await.unwrap(),
        Claimed::Started
    );
    assert!(
        !store
            .finish_idempotency_key(&first, 200, Some("late"))
            .await
            .unwrap(),
        "swept"
    );
    assert!(
        !store.release_idempotency_key(&stale).await.unwrap(),
        "swept"
    );
    let reused = claim(me, "k", 5);
    assert_eq!(
        store.claim_idempotency_key(&reused, short).await.unwrap(),
        Claimed::Started
    );
}

/// Fifty claims of one key at once, from two stores as from two processes: exactly one
/// starts, and the others find it in progress.
pub async fn concurrent_claims_start_exactly_once(db: TestDb) {
    let t = tenant(&*db.store, None).await;
    let me = user(&*db.store, t, "me@example.com").await;
    let stores = [Arc::clone(&db.store), db.open_again().await];
    let tasks: Vec<_> = (0..50)
        .map(|i| {
            let store = Arc::clone(&stores[i % 2]);
            tokio::spawn(async move {
                store
                    .claim_idempotency_key(&claim(me, "race", 7), DAY)
                    .await
            })
        })
        .collect();
    let mut started = 0;
    for task in tasks {
        match task.await.unwrap().unwrap() {
            Claimed::Started => started += 1,
            Claimed::InProgress => {}
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(started, 1);
}
