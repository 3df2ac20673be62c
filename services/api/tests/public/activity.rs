//! ListActivity: the tenant's owner reads its log, newest first, in pages and within filters
//! it checks; another user of the tenant may not.

use einsora_api::accounts::secrets;
use einsora_core::ids::{TokenId, UserId};
use einsora_proto::activity::v1 as pb;
use einsora_proto::activity::v1::activity_service_server::ActivityService;
use einsora_store::{Activity, NewApiToken, NewUser};
use time::OffsetDateTime;
use tonic::Code;

use crate::{Who, env};

fn entry(who: &Who, action: &str) -> Activity {
    Activity {
        id: uuid::Uuid::now_v7(),
        tenant_id: who.tenant,
        user_id: Some(who.user),
        at: OffsetDateTime::now_utc(),
        actor: format!("{} (browser session)", who.email),
        action: action.into(),
        object: None,
        result: "ok".into(),
        request_id: "r".into(),
        client_addr: None,
    }
}

#[tokio::test]
async fn the_owner_reads_the_log_in_pages_and_nobody_else_does() {
    let env = env().await;
    let acme = env.tenant("acme", None).await;
    for action in ["login", "create_workload", "stop_workload"] {
        env.store
            .record_activity(&entry(&acme, action))
            .await
            .unwrap();
    }
    let list = |who: &Who, req: pb::ListActivityRequest| env.activity.list_activity(who.req(req));
    let first = list(
        &acme,
        pb::ListActivityRequest {
            page_size: 2,
            ..Default::default()
        },
    )
    .await
    .unwrap()
    .into_inner();
    let actions: Vec<&str> = first.entries.iter().map(|e| e.action.as_str()).collect();
    assert_eq!(actions, ["stop_workload", "create_workload"]);
    let rest = list(
        &acme,
        pb::ListActivityRequest {
            page_token: first.next_page_token.clone(),
            ..Default::default()
        },
    )
    .await
    .unwrap()
    .into_inner();
    assert_eq!(rest.entries.len(), 1);
    assert_eq!(rest.entries[0].action, "login");
    assert!(rest.next_page_token.is_empty());

    for bad in [
        pb::ListActivityRequest {
            page_size: 501,
            ..Default::default()
        },
        pb::ListActivityRequest {
            result: "maybe".into(),
            ..Default::default()
        },
        pb::ListActivityRequest {
            object_id: "not-an-id".into(),
            ..Default::default()
        },
        pb::ListActivityRequest {
            page_token: "garbage".into(),
            ..Default::default()
        },
    ] {
        let err = list(&acme, bad.clone()).await.unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{bad:?}");
    }

    // A member of the tenant may not read it.
    let (member, token) = (UserId::new(), secrets::new_token().unwrap());
    env.store
        .create_user(&NewUser {
            role: einsora_core::role::Role::Member,
            id: member,
            tenant_id: acme.tenant,
            email: "member@acme.example".into(),
            display_name: "member".into(),
            phc: "$argon2id$unused".into(),
        })
        .await
        .unwrap();
    env.store
        .create_api_token(&NewApiToken {
            id: TokenId::new(),
            user_id: member,
            tenant_id: acme.tenant,
            name: "member".into(),
            prefix: secrets::display_prefix(&token),
            token_hash: secrets::sha256(&token),
            expires_at: None,
        })
        .await
        .unwrap();
    let them = Who {
        user: member,
        email: "member@acme.example".into(),
        token,
        ..acme
    };
    let err = list(&them, pb::ListActivityRequest::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied);
    assert!(
        err.message().contains("owner or admin"),
        "{}",
        err.message()
    );
}
