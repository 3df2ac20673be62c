use einsora_api::accounts::secrets;
use einsora_proto::internal::v1 as pb;
use einsora_proto::internal::v1::api_internal_service_server::ApiInternalService;
use einsora_proto::internal::v1::authenticate_request::Credential;
use einsora_store::NewTicket;
use tonic::{Code, Request};

use crate::{EMAIL, api, assert_code};

#[tokio::test]
async fn authenticate_names_the_token_owner() {
    let api = api().await;
    let session = api.login().await;
    let token = api.create_token(&session, "endpoint").await.unwrap().token;
    let ask = |credential: Credential, state_changing: bool, csrf: &str| {
        Request::new(pb::AuthenticateRequest {
            credential: Some(credential),
            csrf_token: csrf.into(),
            state_changing,
        })
    };
    let who = api
        .internal
        .authenticate(ask(Credential::ApiToken(token.clone()), true, ""))
        .await
        .unwrap();
    let who = who.into_inner();
    assert_eq!(who.subject, EMAIL);
    assert_eq!(who.credential.unwrap().token_name, "endpoint");
    assert!(who.expires_at.is_none());

    let id = session.session.clone().unwrap();
    let read = api
        .internal
        .authenticate(ask(Credential::SessionId(id.clone()), false, ""))
        .await;
    assert!(read.unwrap().into_inner().expires_at.is_some());
    let write = api
        .internal
        .authenticate(ask(Credential::SessionId(id.clone()), true, ""))
        .await;
    assert_code(write, Code::PermissionDenied);
    let csrf = session.csrf.clone().unwrap();
    api.internal
        .authenticate(ask(Credential::SessionId(id), true, &csrf))
        .await
        .unwrap();
    let bad = api
        .internal
        .authenticate(ask(Credential::ApiToken("tsk_nope".into()), false, ""))
        .await;
    assert_code(bad, Code::Unauthenticated);
}

#[tokio::test]
async fn a_ticket_is_redeemed_once() {
    let api = api().await;
    let me = api.me(&api.login().await).await.unwrap();
    let tenant = me.tenant_id.parse().unwrap();
    let workload = einsora_core::ids::WorkloadId::new();
    let new = einsora_store::NewWorkload {
        id: workload,
        gpu_class: "cpu-4c-16g".into(),
        shape: einsora_testkit::fixtures::shape_of("cpu-4c-16g"),
        ..einsora_testkit::fixtures::new_workload(tenant, "nb")
    };
    let by = einsora_core::reasons::Actor {
        subject: EMAIL.into(),
        credential: einsora_core::reasons::Credential::BrowserSession,
    };
    api.store
        .create_workload(&new, &einsora_core::reasons::Reason::Created { by })
        .await
        .unwrap();
    let (ticket, hash) = secrets::new_ticket().unwrap();
    // A token that no longer exists: the ticket still opens, but what it opens ends at once.
    let gone_token = einsora_core::ids::TokenId::new();
    let expires_at = time::OffsetDateTime::now_utc() + secrets::TICKET_LIFETIME;
    let new_ticket = NewTicket {
        ticket_hash: hash,
        workload_id: workload,
        tenant_id: tenant,
        user_id: me.user_id.parse().unwrap(),
        expires_at,
        granted_by: einsora_store::Grant::Token(gone_token),
    };
    api.store.create_ticket(&new_ticket).await.unwrap();
    let redeem = |workload_id: String| {
        Request::new(pb::RedeemTicketRequest {
            workload_id,
            ticket: ticket.clone(),
        })
    };
    let other = einsora_core::ids::WorkloadId::new().to_string();
    assert_code(
        api.internal.redeem_ticket(redeem(other)).await,
        Code::Unauthenticated,
    );
    let taken = api
        .internal
        .redeem_ticket(redeem(workload.to_string()))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (taken.subject.as_str(), taken.tenant_id.as_str()),
        (EMAIL, me.tenant_id.as_str())
    );
    assert_eq!(taken.grant, format!("token:{gone_token}"));
    let live = api
        .internal
        .live_grants(Request::new(pb::LiveGrantsRequest {
            grants: vec![taken.grant.clone(), "session:nothex".into(), String::new()],
        }))
        .await
        .unwrap()
        .into_inner();
    assert!(live.live.is_empty(), "{:?}", live.live);
    assert_code(
        api.internal
            .redeem_ticket(redeem(workload.to_string()))
            .await,
        Code::Unauthenticated,
    );
}
