use einsora_proto::accounts::v1 as pb;
use einsora_proto::accounts::v1::account_service_server::AccountService;
use einsora_proto::accounts::v1::token_service_server::TokenService;
use tonic::Code;

use crate::{Creds, PASSWORD, api, assert_code};

#[tokio::test]
async fn a_token_authenticates_and_is_listed_without_its_secret() {
    let api = api().await;
    let session = api.login().await;
    let created = api.create_token(&session, "laptop").await.unwrap();
    let token = created.token.clone();
    let shown = created.api_token.unwrap();
    assert!(
        token.starts_with("tsk_") && token.len() >= 4 + 22,
        "≥128 bits"
    );
    assert_eq!(shown.prefix, token[..8]);

    let me = api.me(&Creds::token(&token)).await.unwrap();
    let credential = me.credential.unwrap();
    assert_eq!(credential.kind(), pb::CredentialKind::ApiToken);
    assert_eq!(credential.token_name, "laptop");
    assert_eq!(
        credential.description,
        format!("API token \"laptop\" ({}…)", shown.prefix)
    );

    let list = api
        .tokens
        .list_tokens(Creds::token(&token).request(pb::ListTokensRequest {}))
        .await
        .unwrap();
    let list = list.into_inner();
    assert_eq!(list.tokens.len(), 1);
    assert_eq!(list.tokens[0].name, "laptop");
    assert!(
        !format!("{list:?}").contains(&token[8..]),
        "never the secret"
    );

    let dup = api.create_token(&session, "laptop").await;
    assert_code(dup, Code::AlreadyExists);
}

#[tokio::test]
async fn a_token_cannot_mint_a_token_or_change_the_password() {
    let api = api().await;
    let token = api
        .create_token(&api.login().await, "ci")
        .await
        .unwrap()
        .token;
    let status = assert_code(
        api.create_token(&Creds::token(&token), "minted").await,
        Code::PermissionDenied,
    );
    assert!(status.message().contains("token"), "{status:?}");
    let change = pb::ChangePasswordRequest {
        current_password: PASSWORD.into(),
        new_password: "a brand new password".into(),
    };
    let changed = api
        .accounts
        .change_password(Creds::token(&token).request(change))
        .await;
    assert_code(changed, Code::PermissionDenied);
    let logout = api
        .accounts
        .logout(Creds::token(&token).request(pb::LogoutRequest {}))
        .await;
    assert_code(logout, Code::PermissionDenied);
}

#[tokio::test]
async fn a_revoked_token_stops_working_at_once() {
    let api = api().await;
    let session = api.login().await;
    let created = api.create_token(&session, "laptop").await.unwrap();
    let id = created.api_token.unwrap().id;
    api.me(&Creds::token(&created.token)).await.unwrap();
    let revoke = |id: &str| pb::RevokeTokenRequest { id: id.into() };
    let revoked = api
        .tokens
        .revoke_token(session.request(revoke(&id)))
        .await
        .unwrap()
        .into_inner();
    assert!(revoked.revoked_at.is_some());
    assert_code(
        api.me(&Creds::token(&created.token)).await,
        Code::Unauthenticated,
    );
    let unknown = api
        .tokens
        .revoke_token(session.request(revoke(&uuid_like())))
        .await;
    assert_code(unknown, Code::NotFound);
    let malformed = api
        .tokens
        .revoke_token(session.request(revoke("tsk_x")))
        .await;
    assert_code(malformed, Code::InvalidArgument);
}

#[tokio::test]
async fn a_token_expiring_in_the_past_is_refused() {
    let api = api().await;
    let req = pb::CreateTokenRequest {
        name: "old".into(),
        expires_at: Some(prost_types::Timestamp {
            seconds: 1,
            nanos: 0,
        }),
    };
    let created = api
        .tokens
        .create_token(api.login().await.request(req))
        .await;
    assert_code(created, Code::InvalidArgument);
}

fn uuid_like() -> String {
    einsora_core::ids::TokenId::new().to_string()
}
