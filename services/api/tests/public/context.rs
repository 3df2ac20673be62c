//! The request context over real gRPC: services inside `context::layer`, served on a loopback
//! port (without TLS: the layer sees the same requests either way).

use einsora_api::context::{self, REQUEST_ID, SUBJECT, TENANT};
use einsora_proto::enrolment::v1 as pb;
use einsora_proto::enrolment::v1::enrolment_token_service_client::EnrolmentTokenServiceClient;
use einsora_proto::enrolment::v1::enrolment_token_service_server::EnrolmentTokenServiceServer;
use einsora_proto::workloads::v1 as workloads_pb;
use einsora_proto::workloads::v1::workload_service_client::WorkloadServiceClient;
use einsora_proto::workloads::v1::workload_service_server::WorkloadServiceServer;
use tonic::metadata::MetadataMap;
use tonic::service::Routes;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Server};
use tonic::{Code, Request};

use crate::{Env, Who, env, unknown_id};
use einsora_testkit::logs::{Captured, Format};

/// Serves the enrolment and workload services of `env` in the request context.
async fn serve(env: &Env) -> Channel {
    let routes = Routes::new(EnrolmentTokenServiceServer::new(env.enrolment.clone()))
        .add_service(WorkloadServiceServer::new(env.workloads.clone()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = Server::builder()
        .add_routes(context::layer(routes, std::sync::Arc::clone(&env.store)))
        .serve_with_incoming(TcpIncoming::from(listener));
    tokio::spawn(server);
    let endpoint = Channel::from_shared(format!("http://{addr}")).unwrap();
    endpoint.connect().await.unwrap()
}

/// The caller an answer names, as the gateway reads it.
fn named(md: &MetadataMap) -> (Option<&str>, Option<&str>) {
    let get = |key| md.get(key).and_then(|v| v.to_str().ok());
    (get(TENANT), get(SUBJECT))
}

fn get_workload(who: &Who) -> Request<workloads_pb::GetWorkloadRequest> {
    who.req(workloads_pb::GetWorkloadRequest {
        id: unknown_id(),
        ..workloads_pb::GetWorkloadRequest::default()
    })
}

#[tokio::test]
async fn answers_and_errors_name_the_authenticated_caller() {
    let env = env().await;
    let acme = env.tenant("acme", None).await;
    let mut workloads = WorkloadServiceClient::new(serve(&env).await);
    let expected = (Some(acme.tenant.to_string()), Some(acme.email.clone()));
    let as_owned =
        |(t, s): (Option<&str>, Option<&str>)| (t.map(str::to_owned), s.map(str::to_owned));

    let listed = workloads
        .list_workloads(acme.req(workloads_pb::ListWorkloadsRequest::default()))
        .await
        .unwrap();
    assert_eq!(as_owned(named(listed.metadata())), expected);

    let missing = workloads
        .get_workload(get_workload(&acme))
        .await
        .unwrap_err();
    assert_eq!(missing.code(), Code::NotFound);
    assert_eq!(as_owned(named(missing.metadata())), expected, "errors too");

    let mut anonymous = get_workload(&acme);
    anonymous.metadata_mut().remove("authorization");
    let refused = workloads.get_workload(anonymous).await.unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated);
    assert_eq!(named(refused.metadata()), (None, None), "no caller to name");
}

#[tokio::test]
async fn log_lines_carry_the_request_id_tenant_and_subject_and_no_secret() {
    let lines = Captured::global("info", Format::Text);
    let env = env().await;
    let acme = env.tenant("acme", None).await;
    let mut enrolment = EnrolmentTokenServiceClient::new(serve(&env).await);

    let create = |name: &str| {
        acme.browser(pb::CreateEnrolmentTokenRequest {
            name: name.into(),
            ..pb::CreateEnrolmentTokenRequest::default()
        })
    };
    let mut given = create("with-id");
    given
        .metadata_mut()
        .insert(REQUEST_ID, "req-ctx-1".parse().unwrap());
    let secret = enrolment.create_enrolment_token(given).await.unwrap();
    let secret = secret.into_inner().token;
    enrolment
        .create_enrolment_token(create("without-id"))
        .await
        .unwrap();

    let text = lines.text();
    let tenant = format!("tenant={}", acme.tenant);
    let created: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("enrolment token created") && l.contains(&tenant))
        .collect();
    assert_eq!(created.len(), 2, "{text}");
    for line in &created {
        assert!(line.contains(&format!("subject={}", acme.email)), "{line}");
    }
    assert!(
        created[0].contains("request_id=req-ctx-1 "),
        "{}",
        created[0]
    );
    assert!(created[1].contains("request_id="), "one is made up");
    assert!(!created[1].contains("req-ctx-1"), "{}", created[1]);
    let (session, csrf) = &acme.session;
    for secret in [session.as_str(), csrf, &acme.token, &secret[8..]] {
        assert!(!text.contains(secret), "a secret reached the log");
    }
}

/// The activity log over real gRPC, inside the layer: an action's entry names the caller, the
/// object, the request and `ok`; a refused call's names the error code and the object its
/// request named; a read that succeeded and a call nobody signed for leave none; an action the
/// store refused leaves its refusal and nothing else.
#[tokio::test]
async fn actions_and_refusals_are_in_the_callers_tenants_activity_log() {
    use einsora_store::ActivityQuery;
    let env = env().await;
    let acme = env.tenant("acme", None).await;
    let globex = env.tenant("globex", None).await;
    let mut workloads = WorkloadServiceClient::new(serve(&env).await);
    let mut create = acme.req(crate::notebook("nb", "cpu-1c-2g"));
    create
        .metadata_mut()
        .insert(REQUEST_ID, "req-create-1".parse().unwrap());
    create
        .metadata_mut()
        .insert("x-einsora-client-addr", "192.0.2.7".parse().unwrap());
    let made = workloads
        .create_workload(create)
        .await
        .unwrap()
        .into_inner();
    workloads
        .list_workloads(acme.req(workloads_pb::ListWorkloadsRequest::default()))
        .await
        .unwrap();
    let unknown = get_workload(&acme);
    let unknown_id = unknown.get_ref().id.clone();
    workloads.get_workload(unknown).await.unwrap_err();
    let again = workloads
        .create_workload(acme.req(crate::notebook("nb", "cpu-1c-2g")))
        .await
        .unwrap_err();
    assert_eq!(again.code(), Code::AlreadyExists);
    let mut anonymous = get_workload(&acme);
    anonymous.metadata_mut().remove("authorization");
    workloads.get_workload(anonymous).await.unwrap_err();
    // Another tenant's read of acme's workload is globex's refusal, not acme's business.
    let theirs = globex.req(workloads_pb::GetWorkloadRequest {
        id: made.id.clone(),
        ..Default::default()
    });
    workloads.get_workload(theirs).await.unwrap_err();
    // A live session's write without its CSRF token: refused, and in the log.
    let mut forged = acme.browser(workloads_pb::StopWorkloadRequest {
        id: made.id.clone(),
    });
    forged
        .metadata_mut()
        .remove(einsora_api::caller::CSRF_HEADER);
    let refused = workloads.stop_workload(forged).await.unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied);

    let log = |who: &crate::Who| {
        let query = ActivityQuery::of(who.tenant);
        let store = std::sync::Arc::clone(&env.store);
        async move { store.activity(&query).await.unwrap().entries }
    };
    // Refusals are written just after their answers.
    let entries = einsora_testkit::eventually_async(
        "acme's four entries",
        std::time::Duration::from_secs(10),
        async || Some(log(&acme).await).filter(|e| e.len() == 4),
    )
    .await;
    let summary: Vec<(&str, &str, Option<&str>)> = entries
        .iter()
        .rev()
        .map(|e| {
            let object = e.object.as_ref().map(|o| o.id.as_str());
            (e.action.as_str(), e.result.as_str(), object)
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("create_workload", "ok", Some(made.id.as_str())),
            ("get_workload", "not_found", Some(unknown_id.as_str())),
            ("create_workload", "conflict", None),
            // Refused before its request was read: no object.
            ("stop_workload", "forbidden", None),
        ],
        "oldest first: {entries:#?}"
    );
    let created = entries.last().unwrap();
    assert!(
        entries[0].actor.ends_with("(browser session)"),
        "the forged write names the session: {}",
        entries[0].actor
    );
    assert_eq!(created.request_id, "req-create-1");
    assert_eq!(created.client_addr.as_deref(), Some("192.0.2.7"));
    assert_eq!(created.object.as_ref().unwrap().kind, "workload");
    assert!(
        created
            .actor
            .starts_with("you@acme.example (API token \"laptop\""),
        "{}",
        created.actor
    );
    let theirs = einsora_testkit::eventually_async(
        "globex's entry",
        std::time::Duration::from_secs(10),
        async || Some(log(&globex).await).filter(|e| !e.is_empty()),
    )
    .await;
    assert_eq!(theirs.len(), 1, "{theirs:#?}");
    assert_eq!(
        (theirs[0].action.as_str(), theirs[0].result.as_str()),
        ("get_workload", "not_found")
    );
}
