use einsora_core::ids::{EnrolmentTokenId, TenantId, UserId};
use einsora_core::region::Region;
use einsora_store::{NewEnrolmentToken, NewUser, Store, StoreError};
use time::OffsetDateTime;

use crate::harness::{TestDb, local, tenant};

async fn user(store: &dyn Store, tenant: TenantId, email: &str) -> UserId {
    let new = NewUser {
        id: UserId::new(),
        tenant_id: tenant,
        email: email.into(),
        display_name: "You".into(),
        phc: "$argon2id$unused".into(),
    };
    store.create_user(&new).await.unwrap();
    new.id
}

fn token(tenant: TenantId, by: UserId, name: &str, seed: u8) -> NewEnrolmentToken {
    NewEnrolmentToken {
        id: EnrolmentTokenId::new(),
        tenant_id: tenant,
        name: name.into(),
        region: local(),
        prefix: "enr_Ab3x".into(),
        token_hash: [seed; 32],
        created_by: by,
        // Whole milliseconds, as the store keeps times.
        expires_at: OffsetDateTime::from_unix_timestamp(4_000_000_000).unwrap(),
    }
}

/// A token reads back as created, oldest first; revoking sets `revoked_at` once.
pub async fn enrolment_tokens_are_created_listed_and_revoked(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    let you = user(store, t, "you@x.test").await;
    let first = token(t, you, "lab-box-1", 1);
    let second = NewEnrolmentToken {
        region: Region::new("remote").unwrap(),
        ..token(t, you, "lab-box-2", 2)
    };
    let created = store.create_enrolment_token(&first).await.unwrap();
    store.create_enrolment_token(&second).await.unwrap();
    assert_eq!(
        (created.id, created.tenant_id, created.created_by),
        (first.id, t, you)
    );
    assert_eq!((created.used_at, created.machine_id), (None, None));
    assert_eq!(created.revoked_at, None);

    let listed = store.enrolment_tokens(t).await.unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0], created, "reads back exactly as created");
    assert_eq!(listed[1].name, "lab-box-2");
    assert_eq!(listed[1].region.as_str(), "remote");
    assert_eq!(listed[1].expires_at, second.expires_at);

    let revoked = store.revoke_enrolment_token(t, first.id).await.unwrap();
    let at = revoked.unwrap().revoked_at.expect("revoked");
    let again = store.revoke_enrolment_token(t, first.id).await.unwrap();
    assert_eq!(
        again.unwrap().revoked_at,
        Some(at),
        "revoking again changes nothing"
    );
    let listed = store.enrolment_tokens(t).await.unwrap();
    assert_eq!(listed[0].revoked_at, Some(at));
    assert_eq!(listed[1].revoked_at, None);

    // The hash is the secret's only trace, and it is unique.
    let same_secret = token(t, you, "copy", 1);
    assert!(store.create_enrolment_token(&same_secret).await.is_err());
}

/// Another tenant's token is absent: not listed, not revocable; a creator must belong to the
/// token's tenant.
pub async fn enrolment_tokens_are_scoped_by_tenant(db: TestDb) {
    let store = &*db.store;
    let (a, b) = (tenant(store, None).await, tenant(store, None).await);
    let (alice, bob) = (
        user(store, a, "alice@a.test").await,
        user(store, b, "bob@b.test").await,
    );
    let theirs = token(a, alice, "lab-box", 1);
    store.create_enrolment_token(&theirs).await.unwrap();

    assert!(store.enrolment_tokens(b).await.unwrap().is_empty());
    assert_eq!(
        store.revoke_enrolment_token(b, theirs.id).await.unwrap(),
        None
    );
    let unknown = EnrolmentTokenId::new();
    assert_eq!(
        store.revoke_enrolment_token(a, unknown).await.unwrap(),
        None
    );
    let kept = store.enrolment_tokens(a).await.unwrap();
    assert_eq!(kept.len(), 1);
    assert_eq!(
        kept[0].revoked_at, None,
        "another tenant's revoke changed nothing"
    );

    let err = store
        .create_enrolment_token(&token(a, bob, "planted", 2))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound), "{err}");
    assert_eq!(store.enrolment_tokens(a).await.unwrap().len(), 1);
}

/// A token that already enrolled its machine is not revoked (the machine is revoked instead).
pub async fn a_used_enrolment_token_is_not_revoked(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    let you = user(store, t, "you@x.test").await;
    store
        .create_enrolment_token(&token(t, you, "used", 1))
        .await
        .unwrap();
    let unused = token(t, you, "unused", 2);
    store.create_enrolment_token(&unused).await.unwrap();
    // Enrolment itself arrives with the agents' Enroll RPC; until then, use it by hand.
    db.execute("UPDATE enrolment_tokens SET used_at = 1700000000000 WHERE name = 'used'");
    let used = store.enrolment_tokens(t).await.unwrap().remove(0);
    assert_eq!(
        used.used_at.map(|t| t.unix_timestamp()),
        Some(1_700_000_000)
    );

    let answer = store.revoke_enrolment_token(t, used.id).await.unwrap();
    assert_eq!(answer, Some(used), "found, and unchanged");
    let revoked = store.revoke_enrolment_token(t, unused.id).await.unwrap();
    assert!(revoked.unwrap().revoked_at.is_some());
}

fn redemption(hash: u8, label: &str) -> einsora_store::Redemption {
    einsora_store::Redemption {
        token_hash: [hash; 32],
        machine_id: einsora_core::ids::MachineId::new(),
        label: label.into(),
        certificate: einsora_store::MachineCertificate {
            serial: uuid::Uuid::now_v7().simple().to_string(),
            fingerprint: *uuid::Uuid::now_v7()
                .as_bytes()
                .repeat(2)
                .first_chunk()
                .unwrap(),
            not_before: OffsetDateTime::from_unix_timestamp(1_700_000_000).unwrap(),
            not_after: OffsetDateTime::from_unix_timestamp(4_000_000_000).unwrap(),
        },
    }
}

/// 100 redemptions of one token at once, from two stores (as two controllers would): exactly
/// one machine is enrolled, owned by the token's tenant in its region, and the token records it.
pub async fn a_token_enrols_exactly_one_machine_however_many_redeem_it(db: TestDb) {
    let store = &*db.store;
    let other = db.another().await;
    let t = tenant(store, None).await;
    let you = user(store, t, "you@x.test").await;
    let made = store
        .create_enrolment_token(&token(t, you, "lab-box", 7))
        .await
        .unwrap();
    let attempts: Vec<_> = (0..100)
        .map(|i| redemption(7, &format!("host-{i}")))
        .collect();
    let results = futures::future::join_all(attempts.iter().enumerate().map(|(i, r)| {
        let store: &dyn Store = if i % 2 == 0 { store } else { &*other };
        store.redeem_enrolment_token(r)
    }))
    .await;
    let enrolled: Vec<_> = results.into_iter().filter_map(Result::unwrap).collect();
    assert_eq!(enrolled.len(), 1, "exactly one redemption wins");
    let machine = &enrolled[0];
    assert_eq!((machine.owner, machine.region.as_str()), (t, "local"));
    let machines = store.machines_of(t).await.unwrap();
    assert_eq!(machines.len(), 1);
    assert_eq!(machines[0].machine.id, machine.machine_id);
    let used = &store.enrolment_tokens(t).await.unwrap()[0];
    assert_eq!(
        (used.id, used.machine_id),
        (made.id, Some(machine.machine_id))
    );
    assert!(used.used_at.is_some());
    assert!(
        store
            .revoke_enrolment_token(t, made.id)
            .await
            .unwrap()
            .unwrap()
            .revoked_at
            .is_none()
    );
}

/// Revoked, expired and unknown tokens enrol nothing, and say nothing about why.
pub async fn revoked_expired_and_unknown_tokens_enrol_nothing(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    let you = user(store, t, "you@x.test").await;
    let revoked = store
        .create_enrolment_token(&token(t, you, "revoked", 1))
        .await
        .unwrap();
    store.revoke_enrolment_token(t, revoked.id).await.unwrap();
    let expired = NewEnrolmentToken {
        expires_at: OffsetDateTime::from_unix_timestamp(1_600_000_000).unwrap(),
        ..token(t, you, "expired", 2)
    };
    store.create_enrolment_token(&expired).await.unwrap();
    for hash in [1, 2, 3] {
        let r = redemption(hash, "host");
        assert_eq!(
            store.redeem_enrolment_token(&r).await.unwrap(),
            None,
            "token {hash}"
        );
    }
    assert!(store.machines_of(t).await.unwrap().is_empty());
}
