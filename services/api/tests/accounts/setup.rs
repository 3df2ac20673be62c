use einsora_api::setup::{SetupOutcome, seed_dev, setup_owner};
use tonic::Code;

use crate::{EMAIL, PASSWORD, api, assert_code};

#[tokio::test]
async fn the_owner_password_is_stored_as_owasp_argon2id() {
    let api = api().await;
    let login = api.store.password_login(EMAIL).await.unwrap().unwrap();
    assert!(
        login.phc.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"),
        "{}",
        login.phc
    );
    assert!(!login.phc.contains(PASSWORD));
    let owner = api.store.tenant_by_slug("owner").await.unwrap();
    assert_eq!(owner, Some(login.user.tenant_id));
}

#[tokio::test]
async fn setup_refuses_a_second_owner_and_resets_on_request() {
    let api = api().await;
    let store = &*api.store;
    let again = setup_owner(store, EMAIL, "another long password", false).await;
    assert!(again.unwrap_err().to_string().contains("--reset-password"));
    let second = setup_owner(store, "second@example.com", "another long password", false).await;
    assert!(second.is_err(), "one owner per installation");
    let unknown = setup_owner(store, "second@example.com", "another long password", true).await;
    assert!(unknown.is_err());
    assert!(setup_owner(store, EMAIL, "too short", true).await.is_err());

    let session = api.login().await;
    let reset = setup_owner(store, EMAIL, "another long password", true)
        .await
        .unwrap();
    assert_eq!(reset, SetupOutcome::PasswordReset);
    assert_code(api.me(&session).await, Code::Unauthenticated);
    assert_code(
        api.try_login(EMAIL, PASSWORD, "192.0.2.1").await,
        Code::Unauthenticated,
    );
    api.try_login(EMAIL, "another long password", "192.0.2.1")
        .await
        .unwrap();
}

#[tokio::test]
async fn dev_mode_seeds_two_tenants_with_new_passwords_each_start() {
    let api = api().await;
    let first = seed_dev(&*api.store).await.unwrap();
    let second = seed_dev(&*api.store).await.unwrap();
    assert_eq!(first.len(), 2);
    let mut tenants = Vec::new();
    for (old, new) in first.iter().zip(&second) {
        assert_eq!(old.email, new.email);
        assert_ne!(old.password, new.password, "reset at every start");
        assert_code(
            api.try_login(old.email, &old.password, "192.0.2.1").await,
            Code::Unauthenticated,
        );
        let me = api
            .try_login(new.email, &new.password, "192.0.2.1")
            .await
            .unwrap();
        tenants.push(me.session.unwrap().me.unwrap().tenant_id);
    }
    assert_ne!(tenants[0], tenants[1], "one tenant each");
}
