use einsora_core::ids::{InferenceKeyId, TenantId, UserId, WorkloadId};
use einsora_store::{TokenCount, TokenUsage, TokenUsagePage, TokensOf, TokensUsed};
use time::macros::datetime;
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

use crate::harness::{TestDb, tenant};

fn count(
    tenant: TenantId,
    endpoint: WorkloadId,
    key: Option<InferenceKeyId>,
    user: UserId,
    hour_start: OffsetDateTime,
    (prompt, completion): (u64, u64),
) -> TokenCount {
    TokenCount {
        tenant,
        endpoint,
        key,
        user,
        hour_start,
        requests: 1,
        prompt_tokens: prompt,
        completion_tokens: completion,
    }
}

/// A row as compared: endpoint, key, user, hour, requests, prompt, completion.
type Seen = (
    WorkloadId,
    Option<InferenceKeyId>,
    UserId,
    Option<OffsetDateTime>,
    u64,
    u64,
    u64,
);

fn seen(rows: Vec<TokenUsage>) -> Vec<Seen> {
    rows.into_iter()
        .map(|r| {
            (
                r.endpoint,
                r.key,
                r.user,
                r.hour_start,
                r.requests,
                r.prompt_tokens,
                r.completion_tokens,
            )
        })
        .collect()
}

/// Batches add to the row of their hour, endpoint, key and user (a row without a key is one
/// of its own); a batch sent again adds nothing; rows are read per hour (paged, this tenant's
/// only, a user's only when asked) or summed, and a key's or the tenant's tokens since a time.
pub async fn token_usage_is_added_once_per_batch_and_read_by_hour_or_summed(db: TestDb) {
    let store = &*db.store;
    let (t, other) = (tenant(store, None).await, tenant(store, None).await);
    let (alice, bob) = (UserId::new(), UserId::new());
    let (e1, e2) = (WorkloadId::new(), WorkloadId::new());
    let key = InferenceKeyId::new();
    let h0 = datetime!(2025-03-01 10:00 UTC);
    let h1 = h0 + Duration::hours(1);

    let first = [
        count(t, e1, None, alice, h0, (10, 5)),
        count(t, e1, None, alice, h0, (7, 3)),
        count(t, e1, Some(key), alice, h0, (100, 50)),
        count(t, e2, Some(key), alice, h1, (1, 2)),
        count(t, e1, None, bob, h1, (4, 4)),
        count(other, e1, None, alice, h0, (999, 999)),
    ];
    let batch = Uuid::now_v7();
    assert!(store.record_token_usage(batch, &first).await.unwrap());
    assert!(
        !store.record_token_usage(batch, &first).await.unwrap(),
        "a batch sent again adds nothing"
    );
    let second = [count(t, e1, None, alice, h0, (1, 1))];
    assert!(
        store
            .record_token_usage(Uuid::now_v7(), &second)
            .await
            .unwrap()
    );

    let page = |after, limit, user| TokenUsagePage {
        from: h0,
        to: h0 + Duration::hours(2),
        user,
        after,
        limit,
    };
    let all = store
        .token_usage_of(t, &page(None, 10, None))
        .await
        .unwrap();
    let mut by_hour = seen(all.clone());
    // Within an hour rows are by ID (made in no fixed order): compare as sets per hour.
    by_hour.sort();
    let mut expected = vec![
        (e1, None, alice, Some(h0), 3, 18, 9),
        (e1, Some(key), alice, Some(h0), 1, 100, 50),
        (e2, Some(key), alice, Some(h1), 1, 1, 2),
        (e1, None, bob, Some(h1), 1, 4, 4),
    ];
    expected.sort();
    assert_eq!(by_hour, expected);
    assert!(all.windows(2).all(|w| w[0].hour_start <= w[1].hour_start));
    assert!(all.iter().all(|r| r.id.is_some() && r.tenant == t));

    // Paged: two by two, after the last of each page.
    let one = store.token_usage_of(t, &page(None, 2, None)).await.unwrap();
    let last = one.last().unwrap();
    let after = Some((last.hour_start.unwrap(), last.id.unwrap()));
    let two = store
        .token_usage_of(t, &page(after, 2, None))
        .await
        .unwrap();
    let paged: Vec<_> = one.into_iter().chain(two).collect();
    assert_eq!(paged, all);

    let bobs = store
        .token_usage_of(t, &page(None, 10, Some(bob)))
        .await
        .unwrap();
    assert_eq!(seen(bobs), vec![(e1, None, bob, Some(h1), 1, 4, 4)]);
    let later = TokenUsagePage {
        from: h1,
        ..page(None, 10, None)
    };
    assert_eq!(store.token_usage_of(t, &later).await.unwrap().len(), 2);

    let mut summed = seen(
        store
            .token_usage_summed(t, &page(None, 10, Some(alice)))
            .await
            .unwrap(),
    );
    summed.sort();
    let mut expected = vec![
        (e1, None, alice, None, 3, 18, 9),
        (e1, Some(key), alice, None, 1, 100, 50),
        (e2, Some(key), alice, None, 1, 1, 2),
    ];
    expected.sort();
    assert_eq!(summed, expected);

    let used = |of, since| async move { store.tokens_used(t, of, since).await.unwrap() };
    let of_key = TokensUsed {
        requests: 2,
        prompt_tokens: 101,
        completion_tokens: 52,
    };
    assert_eq!(used(TokensOf::Key(key), h0).await, of_key);
    assert_eq!(of_key.total(), 153);
    assert_eq!(used(TokensOf::Key(key), h1).await.total(), 3);
    assert_eq!(used(TokensOf::Tenant, h0).await.total(), 27 + 150 + 3 + 8);
    assert_eq!(
        used(TokensOf::Key(InferenceKeyId::new()), h0).await,
        TokensUsed::default()
    );
    assert_eq!(
        store
            .tokens_used(other, TokensOf::Tenant, h0)
            .await
            .unwrap()
            .total(),
        1998
    );
}
