use std::sync::Arc;

use einsora_core::ids::TenantId;
use einsora_runtime::pki::{Ca, Role, role_of};
use einsora_store::Store;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use einsora_proto::agent::v1::EnrollRequest;
use einsora_proto::agent::v1::enrolment_service_server::EnrolmentService;

use crate::testing::Tenancy;

use super::*;

const HOUR: Duration = Duration::from_secs(3600);

async fn store_with_token(token: &str) -> (Arc<dyn Store>, TenantId, Tenancy) {
    let tenancy = Tenancy::new().await;
    tenancy.token(token).await;
    (Arc::clone(&tenancy.store), tenancy.tenant, tenancy)
}

fn csr() -> String {
    einsora_runtime::pki::csr().unwrap().0
}

#[tokio::test]
async fn a_token_and_a_csr_make_a_machine_of_the_tokens_tenant_once() {
    let token = "enr_0123456789abcdefghijklmnopqrstuv";
    let (store, tenant, _dir) = store_with_token(token).await;
    let agents = Ca::generate("agents").unwrap();
    let enrolled = enrol(&*store, &agents, token, &csr(), "lab-box-3", HOUR)
        .await
        .unwrap();
    assert_eq!(
        (enrolled.owner, enrolled.region.as_str()),
        (tenant, "local")
    );
    let der = CertificateDer::from_pem_slice(enrolled.certificate.cert_pem.as_bytes()).unwrap();
    let machine_id = *enrolled.machine_id.as_uuid();
    assert_eq!(role_of(&der), Ok(Role::Agent { machine_id }));
    let machines = store.machines_of(tenant).await.unwrap();
    assert_eq!(machines.len(), 1);
    assert_eq!(
        machines[0].machine.name, "lab-box-3",
        "the host name is its label"
    );

    let again = enrol(&*store, &agents, token, &csr(), "another", HOUR)
        .await
        .unwrap_err();
    assert!(matches!(again, EnrolError::Token), "{again}");
    let unknown = enrol(&*store, &agents, "enr_nope", &csr(), "x", HOUR)
        .await
        .unwrap_err();
    assert_eq!(
        unknown.to_string(),
        again.to_string(),
        "no oracle: all bad tokens read alike"
    );
    assert!(
        !unknown.to_string().contains("enr_"),
        "the token never reaches an error"
    );
}

#[tokio::test]
async fn a_bad_csr_is_refused_without_using_the_token_up() {
    let token = "enr_0123456789abcdefghijklmnopqrstuv";
    let (store, tenant, _dir) = store_with_token(token).await;
    let agents = Ca::generate("agents").unwrap();
    let err = enrol(&*store, &agents, token, "garbage", "x", HOUR)
        .await
        .unwrap_err();
    assert!(matches!(err, EnrolError::Csr(_)), "{err}");
    assert!(store.machines_of(tenant).await.unwrap().is_empty());
    enrol(&*store, &agents, token, &csr(), "x", HOUR)
        .await
        .expect("the token is still good");
}

#[tokio::test]
async fn a_bad_token_is_refused_before_anything_else_it_came_with_is_looked_at() {
    let token = "enr_0123456789abcdefghijklmnopqrstuv";
    let (store, tenant, _dir) = store_with_token(token).await;
    let agents = Ca::generate("agents").unwrap();
    let huge = "A".repeat(MAX_CSR + 1);
    for (bad, csr) in [("enr_nope", "garbage"), ("enr_nope", huge.as_str())] {
        let err = enrol(&*store, &agents, bad, csr, "x", HOUR)
            .await
            .unwrap_err();
        assert!(matches!(err, EnrolError::Token), "{err}");
    }
    let long = format!("{token}{}", "x".repeat(300));
    let err = enrol(&*store, &agents, &long, &csr(), "x", HOUR)
        .await
        .unwrap_err();
    assert!(matches!(err, EnrolError::Token), "an overlong token: {err}");

    enrol(&*store, &agents, token, &csr(), "x", HOUR)
        .await
        .expect("the good token");
    let err = enrol(&*store, &agents, token, "garbage", "y", HOUR)
        .await
        .unwrap_err();
    assert!(matches!(err, EnrolError::Token), "a used token: {err}");
    assert_eq!(store.machines_of(tenant).await.unwrap().len(), 1);
}

#[tokio::test]
async fn an_oversized_csr_is_refused_without_using_the_token_up() {
    let token = "enr_0123456789abcdefghijklmnopqrstuv";
    let (store, tenant, _dir) = store_with_token(token).await;
    let agents = Ca::generate("agents").unwrap();
    let padded = format!("{}{}", csr(), "\n".repeat(MAX_CSR));
    let err = enrol(&*store, &agents, token, &padded, "x", HOUR)
        .await
        .unwrap_err();
    assert!(matches!(err, EnrolError::CsrTooLarge), "{err}");
    assert!(store.machines_of(tenant).await.unwrap().is_empty());
    enrol(&*store, &agents, token, &csr(), "x", HOUR)
        .await
        .expect("the token is still good");
}

fn api(store: &Arc<dyn Store>, per_hour: usize) -> EnrolmentApi {
    EnrolmentApi {
        store: Arc::clone(store),
        agents_ca: Arc::new(Ca::generate("agents").unwrap()),
        cert_lifetime: HOUR,
        ca_pem: String::new(),
        limit: EnrolLimit::new(per_hour, HOUR),
    }
}

fn request(token: &str) -> tonic::Request<EnrollRequest> {
    tonic::Request::new(EnrollRequest {
        enrolment_token: token.to_owned(),
        csr_pem: csr(),
        hostname: "x".into(),
    })
}

#[tokio::test]
async fn enroll_beyond_the_limit_is_resource_exhausted_and_uses_no_token() {
    let token = "enr_0123456789abcdefghijklmnopqrstuv";
    let (store, tenant, _dir) = store_with_token(token).await;
    let api = api(&store, 2);
    for _ in 0..2 {
        let refused = api.enroll(request("enr_guess")).await.unwrap_err();
        assert_eq!(refused.code(), tonic::Code::PermissionDenied);
    }
    let limited = api.enroll(request(token)).await.unwrap_err();
    assert_eq!(limited.code(), tonic::Code::ResourceExhausted);
    assert!(
        limited.message().contains("too many enrolment attempts"),
        "{}",
        limited.message()
    );
    assert!(
        store.machines_of(tenant).await.unwrap().is_empty(),
        "a refused attempt doesn't reach the token"
    );
}

/// The limit counts by the caller's address as the connection has it (here, connections from
/// two loopback addresses).
#[tokio::test]
async fn enroll_counts_each_callers_address_apart() {
    use tonic::transport::server::Connected;

    let (store, _tenant, _dir) = store_with_token("enr_unused").await;
    let api = api(&store, 1);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let at = listener.local_addr().unwrap();
    let mut connections = Vec::new();
    let mut from = async |ip: [u8; 4]| {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind((ip, 0).into()).unwrap();
        let client = socket.connect(at).await.unwrap();
        let (served, peer) = listener.accept().await.unwrap();
        assert_eq!(
            peer.ip().to_string(),
            format!("{}.{}.{}.{}", ip[0], ip[1], ip[2], ip[3])
        );
        let mut request = request("enr_guess");
        request.extensions_mut().insert(served.connect_info());
        connections.push((client, served));
        request
    };
    let first = api.enroll(from([127, 0, 0, 2]).await).await.unwrap_err();
    assert_eq!(first.code(), tonic::Code::PermissionDenied);
    let again = api.enroll(from([127, 0, 0, 2]).await).await.unwrap_err();
    assert_eq!(again.code(), tonic::Code::ResourceExhausted);
    let elsewhere = api.enroll(from([127, 0, 0, 3]).await).await.unwrap_err();
    assert_eq!(
        elsewhere.code(),
        tonic::Code::PermissionDenied,
        "another address has its own count"
    );
}
