//! A tenant's users as its admins manage them: roles, disabling, removal, invites and password
//! resets, on both engines.

use std::sync::Arc;

use einsora_core::ids::{AccountLinkId, TenantId, TokenId, UserId};
use einsora_core::role::Role;
use einsora_store::{
    Invitee, LinkKind, NewAccountLink, NewApiToken, NewSession, NewUser, SecretHash, Store,
    StoreError, Taken, User, UserChange, UserRefusal,
};
use time::{Duration, OffsetDateTime};

use crate::harness::{TestDb, create, tenant};

const PHC: &str = "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA";

async fn user(store: &dyn Store, tenant: TenantId, email: &str, role: Role) -> User {
    let new = NewUser {
        id: UserId::new(),
        tenant_id: tenant,
        email: email.into(),
        display_name: email.into(),
        role,
        phc: PHC.into(),
    };
    store.create_user(&new).await.unwrap();
    store.password_login(email).await.unwrap().unwrap().user
}

fn invite(tenant: TenantId, by: UserId, email: &str, secret: u8, ttl: Duration) -> NewAccountLink {
    NewAccountLink {
        id: AccountLinkId::new(),
        kind: LinkKind::Invite,
        tenant_id: tenant,
        email: email.into(),
        role: Role::Member,
        user_id: None,
        secret_hash: [secret; 32],
        created_by: by,
        expires_at: OffsetDateTime::now_utc() + ttl,
    }
}

fn invitee(name: &str) -> Invitee {
    Invitee {
        id: UserId::new(),
        display_name: name.into(),
        phc: PHC.into(),
    }
}

/// 100 redemptions of one invite at once, from two stores as from two processes: exactly one
/// makes a user; an expired, revoked or reset secret makes none; a taken address leaves the
/// invite unused.
pub async fn an_invite_is_taken_once_and_only_while_it_stands(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    let owner = user(store, t, "owner@example.com", Role::Owner).await;
    let link = store
        .create_account_link(&invite(
            t,
            owner.id,
            "new@example.com",
            1,
            Duration::hours(1),
        ))
        .await
        .unwrap();
    assert_eq!(
        (link.email.as_str(), link.role),
        ("new@example.com", Role::Member)
    );
    let stores = [Arc::clone(&db.store), db.open_again().await];
    let tasks: Vec<_> = (0..100)
        .map(|i| {
            let store = Arc::clone(&stores[i % 2]);
            tokio::spawn(async move { store.accept_invite(&[1; 32], &invitee("New")).await })
        })
        .collect();
    let mut made = Vec::new();
    for task in tasks {
        if let Some(user) = task.await.unwrap().unwrap() {
            made.push(user);
        }
    }
    assert_eq!(made.len(), 1, "exactly one redemption makes a user");
    assert_eq!((made[0].tenant_id, made[0].role), (t, Role::Member));
    let users = store.users(t).await.unwrap();
    assert_eq!(users.len(), 2);
    assert_eq!(users[1].display_name, "New");

    // Expired, revoked, or another kind's secret: nothing.
    let expired = invite(
        t,
        owner.id,
        "late@example.com",
        2,
        Duration::milliseconds(1),
    );
    store.create_account_link(&expired).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    assert!(
        store
            .accept_invite(&[2; 32], &invitee("Late"))
            .await
            .unwrap()
            .is_none()
    );
    let revoked = store
        .create_account_link(&invite(
            t,
            owner.id,
            "no@example.com",
            3,
            Duration::hours(1),
        ))
        .await
        .unwrap();
    let gone = store
        .revoke_account_link(t, revoked.id)
        .await
        .unwrap()
        .unwrap();
    assert!(gone.revoked_at.is_some());
    assert!(
        store
            .accept_invite(&[3; 32], &invitee("No"))
            .await
            .unwrap()
            .is_none()
    );
    assert!(store.reset_password(&[3; 32], PHC).await.unwrap().is_none());
    // Another tenant can't revoke it; a used one can't be revoked.
    let other = tenant(store, None).await;
    assert!(
        store
            .revoke_account_link(other, link.id)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .revoke_account_link(t, link.id)
            .await
            .unwrap()
            .is_none()
    );

    // An address that has an account can't be invited; one that got an account meanwhile
    // leaves the invite unused.
    let taken = invite(t, owner.id, "new@example.com", 4, Duration::hours(1));
    assert!(matches!(
        store.create_account_link(&taken).await,
        Err(StoreError::Taken(Taken::Email(_)))
    ));
    store
        .create_account_link(&invite(
            t,
            owner.id,
            "race@example.com",
            5,
            Duration::hours(1),
        ))
        .await
        .unwrap();
    user(store, other, "race@example.com", Role::Owner).await;
    assert!(matches!(
        store.accept_invite(&[5; 32], &invitee("Race")).await,
        Err(StoreError::Taken(Taken::Email(_)))
    ));
    let listed = store.account_links(t, LinkKind::Invite).await.unwrap();
    let race = listed
        .iter()
        .find(|l| l.email == "race@example.com")
        .unwrap();
    assert!(race.used_at.is_none(), "the failed acceptance used nothing");
    assert_eq!(listed.len(), 4, "{listed:#?}");
    // Without a name of their own, the e-mail's local part.
    let plain = invite(t, owner.id, "plain@example.com", 6, Duration::hours(1));
    store.create_account_link(&plain).await.unwrap();
    let joined = store
        .accept_invite(&[6; 32], &invitee(" "))
        .await
        .unwrap()
        .unwrap();
    let shown = store.user_of(t, joined.id).await.unwrap().unwrap();
    assert_eq!(shown.display_name, "plain");
    assert!(
        store
            .account_links(other, LinkKind::Invite)
            .await
            .unwrap()
            .is_empty()
    );
}

/// Disabling a user ends their sessions and revokes their tokens in the same transaction, and
/// nothing of theirs authenticates while disabled; enabled again, they sign in anew.
pub async fn a_disabled_user_authenticates_nothing(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    user(store, t, "owner@example.com", Role::Owner).await;
    let member = user(store, t, "member@example.com", Role::Member).await;
    let session = NewSession {
        id_hash: [7; 32],
        user_id: member.id,
        csrf_hash: [8; 32],
        address: "192.0.2.1".into(),
        client: einsora_core::reasons::SessionClient::Browser,
        expires_at: OffsetDateTime::now_utc() + Duration::hours(1),
    };
    store.create_session(&session).await.unwrap();
    let token = NewApiToken {
        id: TokenId::new(),
        user_id: member.id,
        tenant_id: t,
        name: "laptop".into(),
        prefix: "tsk_Ab3x".into(),
        token_hash: [9; 32],
        expires_at: None,
    };
    store.create_api_token(&token).await.unwrap();
    assert!(store.session(&[7; 32]).await.unwrap().is_some());
    let disable = UserChange {
        disabled: Some(true),
        ..UserChange::default()
    };
    let changed = store
        .update_user(t, member.id, &disable)
        .await
        .unwrap()
        .unwrap();
    assert!(changed.disabled_at.is_some());
    assert!(store.session(&[7; 32]).await.unwrap().is_none());
    assert!(store.api_token(&[9; 32]).await.unwrap().is_none());
    assert!(
        store
            .password_login("member@example.com")
            .await
            .unwrap()
            .is_none()
    );
    let tokens = store.api_tokens(member.id).await.unwrap();
    assert!(tokens[0].revoked_at.is_some(), "revoked, not just hidden");
    let grants = [
        einsora_store::Grant::Session([7; 32]),
        einsora_store::Grant::Token(token.id),
    ];
    assert_eq!(store.grants_live(&grants).await.unwrap(), [false, false]);
    // Another tenant's call changes nothing.
    let other = tenant(store, None).await;
    assert!(
        store
            .update_user(other, member.id, &disable)
            .await
            .unwrap()
            .is_none()
    );
    let enable = UserChange {
        disabled: Some(false),
        ..UserChange::default()
    };
    let back = store
        .update_user(t, member.id, &enable)
        .await
        .unwrap()
        .unwrap();
    assert!(back.disabled_at.is_none());
    assert!(
        store
            .password_login("member@example.com")
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        store.api_token(&[9; 32]).await.unwrap().is_none(),
        "tokens stay revoked"
    );
}

/// A tenant keeps an enabled owner: the last one can't be demoted, disabled or removed, even by
/// two admins at once; a user who still owns workloads isn't removed.
pub async fn the_last_owner_stays_and_owners_of_things_stay(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    let first = user(store, t, "first@example.com", Role::Owner).await;
    let second = user(store, t, "second@example.com", Role::Owner).await;
    let demote = UserChange {
        role: Some(Role::Admin),
        ..UserChange::default()
    };
    // Each of the two owners demoted at once, from two stores: one stays an owner.
    let stores = [Arc::clone(&db.store), db.open_again().await];
    let (a, b) = tokio::join!(
        stores[0].update_user(t, first.id, &demote),
        stores[1].update_user(t, second.id, &demote),
    );
    let refused = [&a, &b]
        .iter()
        .filter(|r| matches!(r, Err(StoreError::Refused(UserRefusal::LastOwner))))
        .count();
    assert_eq!(refused, 1, "{a:?} {b:?}");
    let owners: Vec<_> = store
        .users(t)
        .await
        .unwrap()
        .into_iter()
        .filter(|u| u.role == Role::Owner)
        .collect();
    assert_eq!(owners.len(), 1);
    let last = owners[0].id;
    let disable = UserChange {
        disabled: Some(true),
        ..UserChange::default()
    };
    assert!(matches!(
        store.update_user(t, last, &disable).await,
        Err(StoreError::Refused(UserRefusal::LastOwner))
    ));
    assert!(matches!(
        store.remove_user(t, last).await,
        Err(StoreError::Refused(UserRefusal::LastOwner))
    ));

    // A member with a live workload stays until it is deleted.
    let member = user(store, t, "member@example.com", Role::Member).await;
    let mut new = crate::harness::new_workload(t, "theirs");
    new.owner = Some(member.id);
    store
        .create_workload(&new, &crate::harness::reason())
        .await
        .unwrap();
    assert!(matches!(
        store.remove_user(t, member.id).await,
        Err(StoreError::Refused(UserRefusal::StillOwns {
            workloads: 1,
            machines: 0
        }))
    ));
    let other = user(store, t, "other@example.com", Role::Member).await;
    let mine = create(store, t, "not-theirs").await;
    assert_ne!(mine.owner, Some(other.id));
    assert!(store.remove_user(t, other.id).await.unwrap());
    assert!(store.user_of(t, other.id).await.unwrap().is_none());
    assert!(
        !store.remove_user(t, other.id).await.unwrap(),
        "gone already"
    );
}

/// A reset sets the password once and ends the user's sessions; a disabled user's does
/// nothing.
pub async fn a_password_reset_works_once(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    let owner = user(store, t, "owner@example.com", Role::Owner).await;
    let member = user(store, t, "member@example.com", Role::Member).await;
    let reset = |secret: SecretHash| NewAccountLink {
        kind: LinkKind::PasswordReset,
        user_id: Some(member.id),
        secret_hash: secret,
        ..invite(t, owner.id, "", 0, Duration::hours(1))
    };
    let made = store.create_account_link(&reset([11; 32])).await.unwrap();
    assert_eq!(made.email, "member@example.com", "the user's own address");
    assert!(
        store
            .accept_invite(&[11; 32], &invitee("X"))
            .await
            .unwrap()
            .is_none()
    );
    let done = store
        .reset_password(&[11; 32], "new-phc")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(done.id, member.id);
    let login = store
        .password_login("member@example.com")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(login.phc, "new-phc");
    assert!(
        store
            .reset_password(&[11; 32], "again")
            .await
            .unwrap()
            .is_none()
    );
    // A reset for another tenant's user can't be made.
    let other = tenant(store, None).await;
    let foreign = NewAccountLink {
        tenant_id: other,
        ..reset([12; 32])
    };
    assert!(matches!(
        store.create_account_link(&foreign).await,
        Err(StoreError::NotFound)
    ));
    store.create_account_link(&reset([13; 32])).await.unwrap();
    let disable = UserChange {
        disabled: Some(true),
        ..UserChange::default()
    };
    store.update_user(t, member.id, &disable).await.unwrap();
    assert!(
        store
            .reset_password(&[13; 32], "x")
            .await
            .unwrap()
            .is_none()
    );
}

/// Only the machine's owning user sets whom it trusts; the list is read back with the machine
/// (and by placement's reads), and another tenant's or another user's call changes nothing.
pub async fn a_machines_owning_user_sets_whom_it_trusts(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    let reg = einsora_testkit::fixtures::registration(t, "studio", None);
    store.put_machine(&reg).await.unwrap();
    let (id, owner) = (reg.machine.id, reg.machine.owner_user.unwrap());
    let teammate = UserId::new();
    let set = store
        .set_trusted_users(t, id, owner, &[teammate])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(set.machine.trusted_users, [teammate]);
    let in_region = store.machines_in(&reg.machine.region).await.unwrap();
    assert_eq!(in_region[0].machine.trusted_users, [teammate]);
    assert!(
        store
            .set_trusted_users(t, id, teammate, &[])
            .await
            .unwrap()
            .is_none()
    );
    let other = tenant(store, None).await;
    assert!(
        store
            .set_trusted_users(other, id, owner, &[])
            .await
            .unwrap()
            .is_none()
    );
    // An agent's registration leaves it as it is.
    store.put_machine(&reg).await.unwrap();
    let read = store.machine_of(t, id).await.unwrap().unwrap();
    assert_eq!(read.machine.trusted_users, [teammate]);
    let cleared = store
        .set_trusted_users(t, id, owner, &[])
        .await
        .unwrap()
        .unwrap();
    assert!(cleared.machine.trusted_users.is_empty());
}
