use einsora_api::accounts::secrets;
use einsora_core::lifecycle::State;
use einsora_proto::access::v1 as pb;
use einsora_proto::access::v1::access_grant::Grant;
use einsora_proto::access::v1::access_service_server::AccessService;
use time::OffsetDateTime;
use tonic::Code;

use crate::machines::register;
use crate::{Env, Who, assert_code, endpoint, env, error_code, notebook};

async fn open(env: &Env, who: &Who, id: &str) -> Result<pb::AccessGrant, tonic::Status> {
    let req = pb::OpenWorkloadRequest { id: id.into() };
    env.access
        .open_workload(who.req(req))
        .await
        .map(|r| r.into_inner())
}

#[tokio::test]
async fn a_running_notebook_gets_a_one_time_link_and_a_timeline_note() {
    let env = env().await;
    let who = env.tenant("acme", None).await;
    let machine = register(&env, &who, "studio", true).await;
    let w = env.create(&who, notebook("nb", "cpu-1c-2g")).await.unwrap();
    let running = env
        .advance(&w.id, &[State::Provisioning, State::Running], Some(machine))
        .await;

    let grant = open(&env, &who, &w.id).await.unwrap();
    assert_eq!(grant.workload_id, w.id);
    let Some(Grant::Notebook(link)) = grant.grant else {
        panic!("a notebook link: {:?}", grant.grant);
    };
    let prefix = format!("http://w-{}.localhost:8090/_einsora/open?ticket=", w.id);
    let ticket = link.link.strip_prefix(&prefix).expect(&link.link);
    let secret = ticket.strip_prefix("tkt_").expect(ticket);
    assert!(
        secrets::looks_like_secret(secret),
        "≥128 random bits: {ticket}"
    );
    let expires = link.expires_at.unwrap().seconds - OffsetDateTime::now_utc().unix_timestamp();
    assert!((58..=60).contains(&expires), "valid 60 s: {expires}");

    let events = env.store.events(running.id).await.unwrap();
    let last = events.last().unwrap();
    assert!(last.is_note());
    assert_eq!(last.reason, format!("opened by {}", who.by_token()));
    assert!(!last.reason.contains(secret));

    let hash = secrets::sha256(ticket);
    let redeemed = env.store.redeem_ticket(&hash, running.id).await.unwrap();
    assert_eq!(redeemed.unwrap().user.id, who.user);
    assert!(
        env.store
            .redeem_ticket(&hash, running.id)
            .await
            .unwrap()
            .is_none(),
        "once"
    );

    let again = open(&env, &who, &w.id).await.unwrap();
    assert_ne!(
        again,
        open(&env, &who, &w.id).await.unwrap(),
        "a new ticket each time"
    );
}

#[tokio::test]
async fn a_running_endpoint_gets_its_base_url() {
    let env = env().await;
    let who = env.tenant("acme", None).await;
    let e = env.create(&who, endpoint("chat")).await.unwrap();
    env.advance(&e.id, &[State::Provisioning, State::Running], None)
        .await;
    let grant = open(&env, &who, &e.id).await.unwrap();
    let Some(Grant::Endpoint(access)) = grant.grant else {
        panic!("an endpoint's base URL: {:?}", grant.grant);
    };
    assert_eq!(
        access.base_url,
        format!("http://localhost:8090/e/{}/v1", e.id)
    );
}

#[tokio::test]
async fn only_running_notebooks_on_machines_open() {
    let env = env().await;
    let who = env.tenant("acme", None).await;
    let pending = env
        .create(&who, notebook("pending", "cpu-1c-2g"))
        .await
        .unwrap();
    let unplaced = env
        .create(&who, notebook("unplaced", "cpu-1c-2g"))
        .await
        .unwrap();
    env.advance(&unplaced.id, &[State::Provisioning, State::Running], None)
        .await;
    for id in [&pending.id, &unplaced.id] {
        let before = env.store.events(id.parse().unwrap()).await.unwrap().len();
        let status = assert_code(open(&env, &who, id).await, Code::FailedPrecondition);
        assert_eq!(error_code(&status), "conflict");
        let after = env.store.events(id.parse().unwrap()).await.unwrap().len();
        assert_eq!(before, after, "nothing noted");
    }
}
