use einsora_core::ids::{EnrolmentTokenId, TenantId, UserId};
use einsora_core::region::Region;
use einsora_store::{NewEnrolmentToken, NewUser, Store, StoreError};
use time::OffsetDateTime;

use crate::harness::{TestDb, local, tenant};

async fn user(store: &dyn Store, tenant: TenantId, email: &str) -> UserId {
    let new = NewUser {
        role: einsora_core::role::Role::Owner,
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
    let other = db.open_again().await;
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

/// A token reads as redeemable until it is used, and never once revoked or expired or if it
/// is unknown: what enrolment checks before it looks at a CSR.
pub async fn only_an_unused_unrevoked_unexpired_token_is_redeemable(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    let you = user(store, t, "you@x.test").await;
    store
        .create_enrolment_token(&token(t, you, "good", 1))
        .await
        .unwrap();
    let revoked = token(t, you, "revoked", 2);
    store.create_enrolment_token(&revoked).await.unwrap();
    store.revoke_enrolment_token(t, revoked.id).await.unwrap();
    let expired = NewEnrolmentToken {
        expires_at: OffsetDateTime::from_unix_timestamp(1_600_000_000).unwrap(),
        ..token(t, you, "expired", 3)
    };
    store.create_enrolment_token(&expired).await.unwrap();

    let redeemable =
        move |hash: u8| async move { store.enrolment_token_redeemable(&[hash; 32]).await };
    assert!(redeemable(1).await.unwrap(), "a fresh token");
    for hash in [2, 3, 4] {
        assert!(!redeemable(hash).await.unwrap(), "token {hash}");
    }
    assert!(
        store.machines_of(t).await.unwrap().is_empty(),
        "looking used nothing up"
    );
    assert!(redeemable(1).await.unwrap(), "still, after being looked at");
    store
        .redeem_enrolment_token(&redemption(1, "host"))
        .await
        .unwrap()
        .expect("redeemed");
    assert!(!redeemable(1).await.unwrap(), "used");
}

fn certificate(serial: &str, seed: u8) -> einsora_store::MachineCertificate {
    einsora_store::MachineCertificate {
        serial: serial.into(),
        fingerprint: [seed; 32],
        not_before: OffsetDateTime::from_unix_timestamp(1_700_000_000).unwrap(),
        not_after: OffsetDateTime::from_unix_timestamp(4_000_000_000).unwrap(),
    }
}

/// Once a renewed certificate is in use, the machine's older ones are retired; one issued after
/// it stays, and another machine's certificates are untouched.
pub async fn a_certificate_in_use_retires_the_machines_older_ones(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    let you = user(store, t, "you@x.test").await;
    let mut enrolled = Vec::new();
    for (seed, cert) in [(1, 11), (2, 21)] {
        store
            .create_enrolment_token(&token(t, you, &format!("box-{seed}"), seed))
            .await
            .unwrap();
        let r = einsora_store::Redemption {
            certificate: certificate(&format!("{cert:02x}"), cert),
            ..redemption(seed, "host")
        };
        enrolled.push(store.redeem_enrolment_token(&r).await.unwrap().unwrap());
    }
    let (machine, neighbour) = (enrolled[0].machine_id, enrolled[1].machine_id);
    // Renewed twice (distinct milliseconds, as renewals are); the middle one is put to use.
    for (serial, seed) in [("0c", 12), ("0d", 13)] {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        let renewal = certificate(serial, seed);
        let added = store.add_machine_certificate(machine, &renewal).await;
        assert!(added.unwrap());
    }
    let accepted = move |m, seed: u8| async move {
        store
            .machine_for_certificate(m, &[seed; 32])
            .await
            .unwrap()
            .is_some()
    };
    assert!(accepted(machine, 11).await, "until the renewal is used");

    let retired = store.retire_older_certificates(machine, &[12; 32]).await;
    assert_eq!(retired.unwrap(), 1, "the first certificate");
    assert!(!accepted(machine, 11).await, "the previous certificate");
    assert!(accepted(machine, 12).await, "the one in use");
    assert!(accepted(machine, 13).await, "the one issued after it");
    assert!(accepted(neighbour, 21).await, "another machine's");
    let again = store.retire_older_certificates(machine, &[12; 32]).await;
    assert_eq!(again.unwrap(), 0, "nothing left to retire");
    let foreign = store.retire_older_certificates(machine, &[21; 32]).await;
    assert_eq!(
        foreign.unwrap(),
        0,
        "another machine's certificate retires nothing"
    );
    assert!(accepted(machine, 12).await);
}

/// The revocation sweep's one question: of many certificates, which are still good. A retired
/// certificate, a revoked machine's and one never issued are not; the others are, whatever
/// their number (more than one statement's worth).
pub async fn trusted_certificates_are_the_good_ones_of_those_asked(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    let you = user(store, t, "you@x.test").await;
    let mut machines = Vec::new();
    for (seed, cert) in [(1, 11), (2, 21)] {
        store
            .create_enrolment_token(&token(t, you, &format!("box-{seed}"), seed))
            .await
            .unwrap();
        let r = einsora_store::Redemption {
            certificate: certificate(&format!("{cert:02x}"), cert),
            ..redemption(seed, "host")
        };
        machines.push(store.redeem_enrolment_token(&r).await.unwrap().unwrap());
    }
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let renewal = certificate("0c", 12);
    assert!(
        store
            .add_machine_certificate(machines[0].machine_id, &renewal)
            .await
            .unwrap()
    );
    store
        .retire_older_certificates(machines[0].machine_id, &[12; 32])
        .await
        .unwrap();
    store
        .revoke_machine(t, machines[1].machine_id)
        .await
        .unwrap();

    let mut asked: Vec<[u8; 32]> = (100..=255).map(|b| [b; 32]).collect();
    asked.extend((0..400u16).map(|i| {
        let mut never = [7u8; 32];
        never[..2].copy_from_slice(&i.to_be_bytes());
        never
    }));
    asked.extend([[11; 32], [12; 32], [21; 32]]);
    let trusted = store.trusted_certificates(&asked).await.unwrap();
    assert_eq!(trusted, std::collections::HashSet::from([[12; 32]]));
    assert!(store.trusted_certificates(&[]).await.unwrap().is_empty());
}

/// A machine's flag keeps when it was first raised and records the latest reason; another
/// machine is not flagged.
pub async fn a_flagged_machine_keeps_its_first_time_and_latest_reason(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    let you = user(store, t, "you@x.test").await;
    let mut machines = Vec::new();
    for seed in [1, 2] {
        store
            .create_enrolment_token(&token(t, you, &format!("box-{seed}"), seed))
            .await
            .unwrap();
        let r = redemption(seed, "host");
        machines.push(
            store
                .redeem_enrolment_token(&r)
                .await
                .unwrap()
                .unwrap()
                .machine_id,
        );
    }
    let (machine, other) = (machines[0], machines[1]);
    assert_eq!(store.machine_flag(machine).await.unwrap(), None);
    let at = |s| OffsetDateTime::from_unix_timestamp(s).unwrap();
    store
        .flag_machine(machine, "oversized_report", at(1_700_000_000))
        .await
        .unwrap();
    store
        .flag_machine(machine, "report_flood", at(1_700_000_060))
        .await
        .unwrap();
    let flag = store.machine_flag(machine).await.unwrap().expect("flagged");
    assert_eq!(
        (flag.what.as_str(), flag.since, flag.last),
        ("report_flood", at(1_700_000_000), at(1_700_000_060))
    );
    assert_eq!(store.machine_flag(other).await.unwrap(), None);
}
