//! The activity log (ADR 0012): entries by tenant, newest first, filtered and paged; an
//! action's entry written in its own transaction, or not at all; old entries swept.

use std::sync::Arc;

use einsora_core::ids::{TenantId, UserId};
use einsora_store::{Activity, ActivityObject, ActivityQuery, Recording, StoreError, recording};
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

use crate::harness::{TestDb, create, new_workload, reason, tenant};

fn entry(tenant: TenantId, action: &str, result: &str, at: OffsetDateTime) -> Activity {
    Activity {
        id: Uuid::now_v7(),
        tenant_id: tenant,
        user_id: None,
        at,
        actor: "you@example.com (browser session)".into(),
        action: action.into(),
        object: None,
        result: result.into(),
        request_id: "req-1".into(),
        client_addr: Some("127.0.0.1".into()),
    }
}

fn actions(entries: &[Activity]) -> Vec<&str> {
    entries.iter().map(|e| e.action.as_str()).collect()
}

/// Newest first, one tenant's only, filtered, and paged without a gap or a repeat.
pub async fn activity_is_read_newest_first_filtered_and_paged(db: TestDb) {
    let store = &*db.store;
    let (t, other) = (tenant(store, None).await, tenant(store, None).await);
    let start = OffsetDateTime::now_utc() - Duration::hours(1);
    let user = UserId::new();
    for (i, (action, result)) in [
        ("login", "ok"),
        ("create_workload", "ok"),
        ("get_workload", "not_found"),
        ("stop_workload", "ok"),
        ("create_workload", "quota_exceeded"),
    ]
    .into_iter()
    .enumerate()
    {
        let mut e = entry(t, action, result, start + Duration::minutes(i as i64));
        if action == "stop_workload" {
            e.user_id = Some(user);
            e.object = Some(ActivityObject {
                kind: "workload".into(),
                id: "01a24397-0000-7000-8000-000000000001".into(),
            });
        }
        store.record_activity(&e).await.unwrap();
    }
    store
        .record_activity(&entry(other, "login", "ok", start))
        .await
        .unwrap();
    let page = store.activity(&ActivityQuery::of(t)).await.unwrap();
    assert_eq!(
        actions(&page.entries),
        [
            "create_workload",
            "stop_workload",
            "get_workload",
            "create_workload",
            "login"
        ]
    );
    assert_eq!(page.next, None);
    let read = |q: ActivityQuery| async move { store.activity(&q).await.unwrap().entries };
    let refused = read(ActivityQuery {
        ok: Some(false),
        ..ActivityQuery::of(t)
    })
    .await;
    assert_eq!(actions(&refused), ["create_workload", "get_workload"]);
    let creates = read(ActivityQuery {
        action: Some("create_workload".into()),
        ok: Some(true),
        ..ActivityQuery::of(t)
    })
    .await;
    assert_eq!(creates.len(), 1);
    let by_user = read(ActivityQuery {
        user: Some(user),
        ..ActivityQuery::of(t)
    })
    .await;
    assert_eq!(actions(&by_user), ["stop_workload"]);
    let about = read(ActivityQuery {
        object_id: Some("01a24397-0000-7000-8000-000000000001".into()),
        ..ActivityQuery::of(t)
    })
    .await;
    assert_eq!(about, by_user);
    let window = read(ActivityQuery {
        from: Some(start + Duration::minutes(1)),
        to: Some(start + Duration::minutes(3)),
        ..ActivityQuery::of(t)
    })
    .await;
    assert_eq!(actions(&window), ["get_workload", "create_workload"]);

    let mut seen = Vec::new();
    let mut before = None;
    loop {
        let page = store
            .activity(&ActivityQuery {
                before,
                limit: 2,
                ..ActivityQuery::of(t)
            })
            .await
            .unwrap();
        seen.extend(page.entries.iter().map(|e| e.id));
        match page.next {
            Some(next) => before = Some(next),
            None => break,
        }
    }
    let ids: Vec<Uuid> = store
        .activity(&ActivityQuery::of(t))
        .await
        .unwrap()
        .entries
        .iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(seen, ids, "pages of two: every entry once, in order");
}

/// Inside a recorded call, an action's entry is committed with the action; one the store
/// refuses leaves none, and outside a recorded call (the controller's writes) none is made.
pub async fn an_actions_entry_is_written_in_its_transaction_or_not_at_all(db: TestDb) {
    let store = Arc::clone(&db.store);
    let t = tenant(&*store, Some(1)).await;
    let calls = Recording::new();
    calls.caller(entry(t, "create_workload", "", OffsetDateTime::UNIX_EPOCH));
    let first = new_workload(t, "first");
    let made = recording(Arc::clone(&calls), store.create_workload(&first, &reason()))
        .await
        .unwrap();
    assert!(calls.recorded());
    let refused = Recording::new();
    refused.caller(entry(t, "create_workload", "", OffsetDateTime::UNIX_EPOCH));
    let second = new_workload(t, "second");
    let over = recording(
        Arc::clone(&refused),
        store.create_workload(&second, &reason()),
    )
    .await;
    assert!(
        matches!(over, Err(StoreError::QuotaExceeded { .. })),
        "{over:?}"
    );
    assert!(!refused.recorded(), "nothing committed, nothing recorded");
    let elsewhere = tenant(&*store, None).await;
    create(&*store, elsewhere, "unrecorded").await;
    let outside = store.activity(&ActivityQuery::of(elsewhere)).await.unwrap();
    assert!(outside.entries.is_empty(), "{outside:#?}");
    let entries = store.activity(&ActivityQuery::of(t)).await.unwrap().entries;
    assert_eq!(entries.len(), 1, "{entries:#?}");
    let e = &entries[0];
    assert_eq!(
        (e.action.as_str(), e.result.as_str()),
        ("create_workload", "ok")
    );
    let object = e.object.as_ref().unwrap();
    assert_eq!(
        (object.kind.as_str(), object.id.clone()),
        ("workload", made.id.to_string())
    );
    assert!(e.at > OffsetDateTime::now_utc() - Duration::minutes(1));
}

/// The sweep drops entries older than its cutoff, every tenant's, and keeps the rest.
pub async fn the_activity_sweep_drops_entries_before_the_cutoff(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    let now = OffsetDateTime::now_utc();
    for (action, at) in [("old", now - Duration::days(400)), ("new", now)] {
        store
            .record_activity(&entry(t, action, "ok", at))
            .await
            .unwrap();
    }
    let swept = store
        .sweep_activity(now - Duration::days(365))
        .await
        .unwrap();
    assert_eq!(swept, 1);
    let left = store.activity(&ActivityQuery::of(t)).await.unwrap().entries;
    assert_eq!(actions(&left), ["new"]);
}
