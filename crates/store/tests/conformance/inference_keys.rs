use einsora_core::ids::{InferenceKeyId, TenantId, UserId, WorkloadId};
use einsora_core::role::Role;
use einsora_store::{
    InferenceLimits, KeyScope, NewInferenceKey, NewUser, SecretHash, Store, StoreError, Taken,
    User, UserChange,
};

use crate::harness::{TestDb, tenant};

fn hash(seed: u8) -> SecretHash {
    [seed; 32]
}

async fn user(store: &dyn Store, tenant: TenantId, email: &str, role: Role) -> User {
    let new = NewUser {
        role,
        id: UserId::new(),
        tenant_id: tenant,
        email: email.into(),
        display_name: "You".into(),
        phc: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA".into(),
    };
    store.create_user(&new).await.unwrap();
    store.password_login(email).await.unwrap().unwrap().user
}

fn key(user: &User, name: &str, seed: u8, scope: KeyScope) -> NewInferenceKey {
    NewInferenceKey {
        id: InferenceKeyId::new(),
        tenant_id: user.tenant_id,
        user_id: user.id,
        name: name.into(),
        prefix: "isk_Ab3x".into(),
        key_hash: hash(seed),
        scope,
        limits: InferenceLimits::default(),
    }
}

/// A key is found by its hash with its owner, scope and limits until it is revoked; names are
/// unique among a user's live keys; lists are the owner's or the tenant's, oldest first; only
/// the tenant (and, when said, the owner) revokes it.
pub async fn inference_keys_live_until_revoked(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    let (you, other) = (
        user(store, t, "you@x.test", Role::Owner).await,
        user(store, t, "other@x.test", Role::Member).await,
    );
    let (a, b) = (WorkloadId::new(), WorkloadId::new());
    let mut scoped = key(&you, "chat", 1, KeyScope::Endpoints(vec![a, b]));
    scoped.limits = InferenceLimits {
        requests_per_minute: Some(60),
        tokens_per_minute: None,
        tokens_per_day: Some(u32::MAX),
    };
    let made = store.create_inference_key(&scoped).await.unwrap();
    assert_eq!(
        (
            made.name.as_str(),
            made.prefix.as_str(),
            made.owner.as_str()
        ),
        ("chat", "isk_Ab3x", "you@x.test")
    );
    let (owner, found) = store.inference_key(&hash(1)).await.unwrap().unwrap();
    assert_eq!(owner, you);
    assert_eq!(found.scope, KeyScope::Endpoints(vec![a, b]), "in order");
    assert_eq!(found.limits, scoped.limits);
    assert!(found.scope.allows(a) && !found.scope.allows(WorkloadId::new()));
    assert!(store.inference_key(&hash(9)).await.unwrap().is_none());
    let noted = store.inference_keys(t, Some(you.id)).await.unwrap();
    assert!(noted[0].last_used_at.is_some(), "its use is noted");

    let err = store
        .create_inference_key(&key(&you, "chat", 2, KeyScope::AllEndpoints))
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::Taken(Taken::InferenceKeyName(ref n)) if n == "chat"),
        "{err}"
    );
    let theirs = store
        .create_inference_key(&key(&other, "chat", 3, KeyScope::AllEndpoints))
        .await
        .unwrap();
    assert_eq!(theirs.scope, KeyScope::AllEndpoints);
    assert!(theirs.limits.is_empty());

    // Another tenant's user can't be given a key of this one's, nor see or revoke one.
    let elsewhere = tenant(store, None).await;
    let mut foreign = key(&you, "x", 4, KeyScope::AllEndpoints);
    foreign.tenant_id = elsewhere;
    assert!(matches!(
        store.create_inference_key(&foreign).await,
        Err(StoreError::NotFound)
    ));
    assert!(
        store
            .inference_keys(elsewhere, None)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store
            .revoke_inference_key(elsewhere, None, made.id)
            .await
            .unwrap(),
        None
    );

    let names = |keys: Vec<einsora_store::InferenceKeyRecord>| -> Vec<String> {
        keys.into_iter().map(|k| k.owner + "/" + &k.name).collect()
    };
    assert_eq!(
        names(store.inference_keys(t, None).await.unwrap()),
        ["you@x.test/chat", "other@x.test/chat"]
    );
    assert_eq!(
        names(store.inference_keys(t, Some(other.id)).await.unwrap()),
        ["other@x.test/chat"]
    );

    assert_eq!(
        store
            .revoke_inference_key(t, Some(other.id), made.id)
            .await
            .unwrap(),
        None,
        "not the other user's to revoke"
    );
    let revoked = store
        .revoke_inference_key(t, Some(you.id), made.id)
        .await
        .unwrap()
        .unwrap();
    let at = revoked.revoked_at.unwrap();
    assert!(store.inference_key(&hash(1)).await.unwrap().is_none());
    let again = store
        .revoke_inference_key(t, None, made.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.revoked_at, Some(at), "revoking twice keeps the first");
    store
        .create_inference_key(&key(&you, "chat", 5, KeyScope::AllEndpoints))
        .await
        .unwrap();
    assert_eq!(
        store.inference_keys(t, Some(you.id)).await.unwrap().len(),
        2
    );

    // A disabled user's keys are revoked with their tokens.
    let disable = UserChange {
        disabled: Some(true),
        ..UserChange::default()
    };
    store
        .update_user(t, other.id, &disable)
        .await
        .unwrap()
        .unwrap();
    assert!(store.inference_key(&hash(3)).await.unwrap().is_none());
    let listed = store.inference_keys(t, Some(other.id)).await.unwrap();
    assert!(listed[0].revoked_at.is_some(), "revoked, not just hidden");
}

/// A tenant's inference limits are none until set, set whole, and cleared by setting none.
pub async fn tenant_inference_limits_are_set_whole(db: TestDb) {
    let store = &*db.store;
    let (t, other) = (tenant(store, None).await, tenant(store, None).await);
    assert!(store.inference_limits(t).await.unwrap().is_empty());
    let limits = InferenceLimits {
        requests_per_minute: Some(0),
        tokens_per_minute: Some(1000),
        tokens_per_day: None,
    };
    store.set_inference_limits(t, &limits).await.unwrap();
    assert_eq!(store.inference_limits(t).await.unwrap(), limits);
    assert!(store.inference_limits(other).await.unwrap().is_empty());
    let day_only = InferenceLimits {
        tokens_per_day: Some(5),
        ..InferenceLimits::default()
    };
    store.set_inference_limits(t, &day_only).await.unwrap();
    assert_eq!(store.inference_limits(t).await.unwrap(), day_only);
    store
        .set_inference_limits(t, &InferenceLimits::default())
        .await
        .unwrap();
    assert!(store.inference_limits(t).await.unwrap().is_empty());
}
