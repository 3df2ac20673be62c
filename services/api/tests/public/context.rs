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
        .add_routes(context::layer(routes))
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
