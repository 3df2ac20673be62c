use std::time::Duration;

use einsora_core::ids::{TenantId, TokenId, UserId};
use einsora_store::{
    Grant, NewApiToken, NewSession, NewTicket, NewUser, SecretHash, Store, StoreError, Taken, User,
};
use time::OffsetDateTime;

use crate::harness::{TestDb, create, tenant};

fn hash(seed: u8) -> SecretHash {
    [seed; 32]
}

fn later(secs: i64) -> OffsetDateTime {
    OffsetDateTime::now_utc() + time::Duration::seconds(secs)
}

async fn user(store: &dyn Store, tenant: TenantId, email: &str) -> User {
    let new = NewUser {
        role: einsora_core::role::Role::Owner,
        id: UserId::new(),
        tenant_id: tenant,
        email: email.into(),
        display_name: "You".into(),
        phc: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA".into(),
    };
    store.create_user(&new).await.unwrap();
    store.password_login(email).await.unwrap().unwrap().user
}

fn session(user: &User, id: u8, expires_at: OffsetDateTime) -> NewSession {
    NewSession {
        id_hash: hash(id),
        user_id: user.id,
        csrf_hash: hash(id.wrapping_add(100)),
        address: "192.0.2.1".into(),
        client: einsora_core::reasons::SessionClient::Browser,
        expires_at,
    }
}

fn token(user: &User, name: &str, seed: u8, expires_at: Option<OffsetDateTime>) -> NewApiToken {
    NewApiToken {
        id: TokenId::new(),
        user_id: user.id,
        tenant_id: user.tenant_id,
        name: name.into(),
        prefix: "tsk_Ab3x".into(),
        token_hash: hash(seed),
        expires_at,
    }
}

/// An email has one account across the installation; a password is replaced in place.
pub async fn users_are_unique_by_email(db: TestDb) {
    let store = &*db.store;
    let (a, b) = (tenant(store, None).await, tenant(store, None).await);
    let you = user(store, a, "you@example.com").await;
    assert_eq!((you.tenant_id, you.tenant_name.as_str()), (a, "Test"));
    let again = NewUser {
        role: einsora_core::role::Role::Owner,
        id: UserId::new(),
        tenant_id: b,
        email: "you@example.com".into(),
        display_name: "Other".into(),
        phc: "x".into(),
    };
    let err = store.create_user(&again).await.unwrap_err();
    assert!(
        matches!(err, StoreError::Taken(Taken::Email(ref e)) if e == "you@example.com"),
        "{err}"
    );
    assert!(
        store
            .password_login("nobody@example.com")
            .await
            .unwrap()
            .is_none()
    );
    store.set_password(you.id, "new-phc").await.unwrap();
    let login = store
        .password_login("you@example.com")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(login.phc, "new-phc");
    let err = store.set_password(UserId::new(), "x").await.unwrap_err();
    assert!(matches!(err, StoreError::NotFound), "{err}");
    let slug = format!("t-{a}");
    assert_eq!(store.tenant_by_slug(&slug).await.unwrap(), Some(a));
    assert_eq!(store.tenant_by_slug("missing").await.unwrap(), None);
    assert_eq!(store.tenant_founder(a).await.unwrap(), Some(you.id));
    assert_eq!(store.tenant_founder(b).await.unwrap(), None);
}

/// A session is found by its hash until it expires or ends; a password change ends the others.
pub async fn sessions_live_until_they_expire_or_end(db: TestDb) {
    let store = &*db.store;
    let you = user(store, tenant(store, None).await, "you@example.com").await;
    store
        .create_session(&session(&you, 1, later(3600)))
        .await
        .unwrap();
    let cli = NewSession {
        client: einsora_core::reasons::SessionClient::Cli,
        ..session(&you, 2, later(3600))
    };
    store.create_session(&cli).await.unwrap();
    store
        .create_session(&session(&you, 3, later(-1)))
        .await
        .unwrap();
    let found = store.session(&hash(1)).await.unwrap().unwrap();
    assert_eq!(found.user, you);
    assert_eq!(found.csrf_hash, hash(101));
    assert_eq!(found.client, einsora_core::reasons::SessionClient::Browser);
    let found = store.session(&hash(2)).await.unwrap().unwrap();
    assert_eq!(
        found.client,
        einsora_core::reasons::SessionClient::Cli,
        "what signed it in"
    );
    assert!(store.session(&hash(3)).await.unwrap().is_none(), "expired");
    assert!(store.session(&hash(9)).await.unwrap().is_none(), "unknown");

    assert!(store.delete_session(&hash(2)).await.unwrap());
    assert!(!store.delete_session(&hash(2)).await.unwrap());
    assert!(store.session(&hash(2)).await.unwrap().is_none(), "ended");

    store
        .create_session(&session(&you, 4, later(3600)))
        .await
        .unwrap();
    store
        .delete_other_sessions(you.id, Some(&hash(1)))
        .await
        .unwrap();
    assert!(
        store.session(&hash(1)).await.unwrap().is_some(),
        "the kept one"
    );
    assert!(store.session(&hash(4)).await.unwrap().is_none());
    store.delete_other_sessions(you.id, None).await.unwrap();
    assert!(store.session(&hash(1)).await.unwrap().is_none());
}

/// A token works until it is revoked or expires; names are unique among live tokens; only
/// its owner can revoke it.
pub async fn tokens_live_until_revoked_or_expired(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    let (you, other) = (
        user(store, t, "you@x.test").await,
        user(store, t, "other@x.test").await,
    );
    let laptop = store
        .create_api_token(&token(&you, "laptop", 1, None))
        .await
        .unwrap();
    assert_eq!(
        (laptop.name.as_str(), laptop.prefix.as_str()),
        ("laptop", "tsk_Ab3x")
    );
    let (owner, found) = store.api_token(&hash(1)).await.unwrap().unwrap();
    assert_eq!((owner, found.id), (you.clone(), laptop.id));
    let noted = store.api_tokens(you.id).await.unwrap();
    assert!(noted[0].last_used_at.is_some(), "its use is noted");

    let err = store
        .create_api_token(&token(&you, "laptop", 2, None))
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::Taken(Taken::TokenName(ref n)) if n == "laptop"),
        "{err}"
    );
    store
        .create_api_token(&token(&other, "laptop", 3, None))
        .await
        .unwrap();
    store
        .create_api_token(&token(&you, "old", 4, Some(later(-1))))
        .await
        .unwrap();
    assert!(
        store.api_token(&hash(4)).await.unwrap().is_none(),
        "expired"
    );
    store
        .create_api_token(&token(&you, "old", 5, None))
        .await
        .unwrap();

    assert_eq!(
        store.revoke_api_token(other.id, laptop.id).await.unwrap(),
        None
    );
    let revoked = store
        .revoke_api_token(you.id, laptop.id)
        .await
        .unwrap()
        .unwrap();
    let at = revoked.revoked_at.unwrap();
    assert!(
        store.api_token(&hash(1)).await.unwrap().is_none(),
        "revoked"
    );
    let again = store
        .revoke_api_token(you.id, laptop.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        again.revoked_at,
        Some(at),
        "revoking twice keeps the first time"
    );
    store
        .create_api_token(&token(&you, "laptop", 6, None))
        .await
        .unwrap();
    let names: Vec<String> = store
        .api_tokens(you.id)
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(
        names,
        ["laptop", "old", "old", "laptop"],
        "oldest first, all kept"
    );
}

/// Ten redeemers race for one ticket, through two stores (two processes): exactly one wins.
/// A ticket is refused for another workload and once expired.
pub async fn tickets_are_redeemed_exactly_once(db: TestDb) {
    let store = &*db.store;
    let other = db.open_again().await;
    let t = tenant(store, None).await;
    let you = user(store, t, "you@example.com").await;
    let w = create(store, t, "nb").await;
    let elsewhere = create(store, t, "nb2").await;
    let ticket = |seed: u8, secs: i64| NewTicket {
        ticket_hash: hash(seed),
        workload_id: w.id,
        tenant_id: t,
        user_id: you.id,
        expires_at: later(secs),
        granted_by: Grant::Session(hash(200)),
    };
    store.create_ticket(&ticket(1, 60)).await.unwrap();
    let redeemers = (0..10).map(|i| {
        let s = if i % 2 == 0 {
            db.store.clone()
        } else {
            other.clone()
        };
        tokio::spawn(async move { s.redeem_ticket(&hash(1), w.id).await.unwrap() })
    });
    let won: Vec<_> = futures::future::join_all(redeemers)
        .await
        .into_iter()
        .filter_map(|r| r.unwrap())
        .collect();
    assert_eq!(won.len(), 1, "exactly one redeemer");
    assert_eq!((won[0].workload_id, &won[0].user), (w.id, &you));
    assert_eq!(won[0].granted_by, Grant::Session(hash(200)));

    store.create_ticket(&ticket(2, 60)).await.unwrap();
    assert!(
        store
            .redeem_ticket(&hash(2), elsewhere.id)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store.redeem_ticket(&hash(2), w.id).await.unwrap().is_some(),
        "still unused"
    );
    store.create_ticket(&ticket(3, 0)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert!(
        store.redeem_ticket(&hash(3), w.id).await.unwrap().is_none(),
        "expired"
    );
}

/// A ticket's grant stands while the credential that asked for it does: a session until it
/// ends or expires, a token until it is revoked or expires.
pub async fn grants_live_as_long_as_their_credential(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    let you = user(store, t, "you@example.com").await;
    let w = create(store, t, "nb").await;
    store
        .create_session(&session(&you, 1, later(3600)))
        .await
        .unwrap();
    store
        .create_session(&session(&you, 2, later(-1)))
        .await
        .unwrap();
    let laptop = store
        .create_api_token(&token(&you, "laptop", 3, None))
        .await
        .unwrap();
    let gone = TokenId::new();
    let grants = [
        Grant::Session(hash(1)),
        Grant::Session(hash(2)),
        Grant::Token(laptop.id),
        Grant::Token(gone),
    ];
    assert_eq!(
        store.grants_live(&grants).await.unwrap(),
        [true, false, true, false],
        "live session, expired session, live token, unknown token"
    );
    let ticket = NewTicket {
        ticket_hash: hash(9),
        workload_id: w.id,
        tenant_id: t,
        user_id: you.id,
        expires_at: later(60),
        granted_by: Grant::Token(laptop.id),
    };
    store.create_ticket(&ticket).await.unwrap();
    let redeemed = store.redeem_ticket(&hash(9), w.id).await.unwrap().unwrap();
    assert_eq!(redeemed.granted_by, Grant::Token(laptop.id));

    assert!(store.delete_session(&hash(1)).await.unwrap());
    store.revoke_api_token(you.id, laptop.id).await.unwrap();
    assert_eq!(
        store.grants_live(&grants[..3]).await.unwrap(),
        [false, false, false],
        "after logout and revocation"
    );
}
