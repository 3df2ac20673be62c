//! Mutual TLS over real TCP on loopback, with a real tonic server serving gRPC health.

// A test harness: a failed unwrap is a failed test, and it reads its own environment.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use einsora_runtime::pki::{Ca, IssuedCert, Role, RoleKind, Validity};
use einsora_runtime::shutdown::Shutdown;
use einsora_runtime::tls::{self, ClientTls};
use rustls::ServerConfig;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use time::OffsetDateTime;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tonic::Request;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Server;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use uuid::Uuid;

const HOUR: Duration = Duration::from_secs(3600);
const PATIENCE: Duration = Duration::from_secs(20);

struct Running {
    addr: String,
    shutdown: Shutdown,
    /// The role `peer_role` reported for every request that reached the service.
    seen: Arc<Mutex<Vec<Option<Role>>>>,
    task: JoinHandle<Result<(), tonic::transport::Error>>,
}

async fn serve(config: Arc<ServerConfig>) -> Running {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (_reporter, health) = tonic_health::server::health_reporter();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    let service = InterceptedService::new(health, move |request: Request<()>| {
        record.lock().unwrap().push(tls::peer_role(&request));
        Ok(request)
    });
    let shutdown = Shutdown::new();
    let task = tokio::spawn(
        Server::builder()
            .add_service(service)
            .serve_with_incoming_shutdown(tls::incoming(listener, config), shutdown.cancelled()),
    );
    Running {
        addr,
        shutdown,
        seen,
        task,
    }
}

/// Connects and calls Check; any refusal (at connect or at the call) is an `Err` with its cause.
async fn check(client: &ClientTls, addr: &str) -> Result<ServingStatus, String> {
    let call = async {
        let channel = client
            .connect(addr)
            .await
            .map_err(|e| format!("connect: {e:?}"))?;
        let request = HealthCheckRequest {
            service: String::new(),
        };
        let response = HealthClient::new(channel)
            .check(request)
            .await
            .map_err(|status| format!("check: {status:?}"))?;
        Ok(response.into_inner().status())
    };
    tokio::time::timeout(PATIENCE, call).await.expect("no hang")
}

fn issue(ca: &Ca, role: Role) -> IssuedCert {
    ca.issue(role, Validity::from_now(HOUR)).unwrap()
}

fn agent() -> Role {
    Role::Agent {
        machine_id: Uuid::now_v7(),
    }
}

/// A CA, and a controller server on it admitting `allowed`.
async fn controller(allowed: &[RoleKind]) -> (Ca, Running) {
    let ca = Ca::generate("test installation").unwrap();
    let own = issue(&ca, Role::Controller);
    let server = serve(tls::server_config(ca.cert_pem(), &own, allowed).unwrap()).await;
    (ca, server)
}

fn client(ca: &Ca, own: &IssuedCert) -> ClientTls {
    ClientTls::new(ca.cert_pem(), Some(own), Role::Controller).unwrap()
}

/// The server refused the client's certificate during the handshake, with this TLS alert.
fn assert_refused(result: Result<ServingStatus, String>, alert: &str) {
    let err = result.expect_err("the connection must be refused");
    assert!(
        err.contains(&format!("received fatal alert: {alert}")),
        "not refused with {alert}: {err}"
    );
}

#[tokio::test]
async fn an_admitted_role_is_served_and_visible_to_the_handler() {
    let (ca, server) = controller(&[RoleKind::Api]).await;
    let api = client(&ca, &issue(&ca, Role::Api));
    assert_eq!(check(&api, &server.addr).await, Ok(ServingStatus::Serving));
    assert_eq!(*server.seen.lock().unwrap(), vec![Some(Role::Api)]);
}

#[tokio::test]
async fn an_agent_port_sees_which_machine_is_calling() {
    let (ca, server) = controller(&[RoleKind::Agent]).await;
    let machine = agent();
    let lazy = client(&ca, &issue(&ca, machine))
        .connect_lazy(&server.addr)
        .unwrap();
    let status = HealthClient::new(lazy)
        .check(HealthCheckRequest::default())
        .await
        .unwrap()
        .into_inner()
        .status();
    assert_eq!(status, ServingStatus::Serving);
    assert_eq!(*server.seen.lock().unwrap(), vec![Some(machine)]);
}

#[tokio::test]
async fn an_agent_certificate_is_refused_by_a_service_port() {
    let (ca, server) = controller(&[RoleKind::Api]).await;
    // CertificateUnknown is how rustls reports a refusal by the verifier's own rule.
    let refused = check(&client(&ca, &issue(&ca, agent())), &server.addr).await;
    assert_refused(refused, "CertificateUnknown");
    let refused = check(&client(&ca, &issue(&ca, Role::Gateway)), &server.addr).await;
    assert_refused(refused, "CertificateUnknown");
    assert!(
        server.seen.lock().unwrap().is_empty(),
        "a refused peer reached the handler"
    );
    // The refusals did not end the server.
    let api = client(&ca, &issue(&ca, Role::Api));
    assert_eq!(check(&api, &server.addr).await, Ok(ServingStatus::Serving));
}

#[tokio::test]
async fn a_certificate_from_a_foreign_ca_is_refused() {
    let (ca, server) = controller(&[RoleKind::Api]).await;
    let foreign = Ca::generate("test installation").unwrap();
    let impostor = ClientTls::new(
        ca.cert_pem(),
        Some(&issue(&foreign, Role::Api)),
        Role::Controller,
    )
    .unwrap();
    // Same CA name, other key: the chain's signature does not verify.
    assert_refused(check(&impostor, &server.addr).await, "DecryptError");
    assert!(server.seen.lock().unwrap().is_empty());
}

#[tokio::test]
async fn an_expired_client_certificate_is_refused() {
    let (ca, server) = controller(&[RoleKind::Api]).await;
    let now = OffsetDateTime::now_utc();
    let expired = Validity {
        not_before: now - time::Duration::days(2),
        not_after: now - time::Duration::days(1),
    };
    let stale = ca.issue(Role::Api, expired).unwrap();
    assert_refused(
        check(&client(&ca, &stale), &server.addr).await,
        "CertificateExpired",
    );
    assert!(server.seen.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_client_refuses_a_server_with_another_role() {
    let ca = Ca::generate("test installation").unwrap();
    let api_server = issue(&ca, Role::Api);
    let server =
        serve(tls::server_config(ca.cert_pem(), &api_server, &[RoleKind::Controller]).unwrap())
            .await;
    let me = issue(&ca, Role::Controller);

    let wants_controller = ClientTls::new(ca.cert_pem(), Some(&me), Role::Controller).unwrap();
    let err = check(&wants_controller, &server.addr).await.unwrap_err();
    assert!(
        err.starts_with("connect:"),
        "refused before any call: {err}"
    );
    assert!(server.seen.lock().unwrap().is_empty());

    let wants_api = ClientTls::new(ca.cert_pem(), Some(&me), Role::Api).unwrap();
    assert_eq!(
        check(&wants_api, &server.addr).await,
        Ok(ServingStatus::Serving)
    );
}

#[tokio::test]
async fn a_client_refuses_an_expired_server_certificate() {
    let ca = Ca::generate("test installation").unwrap();
    let now = OffsetDateTime::now_utc();
    let expired = Validity {
        not_before: now - time::Duration::days(2),
        not_after: now - time::Duration::days(1),
    };
    let stale = ca.issue(Role::Controller, expired).unwrap();
    let server = serve(tls::server_config(ca.cert_pem(), &stale, &[RoleKind::Api]).unwrap()).await;
    let err = check(&client(&ca, &issue(&ca, Role::Api)), &server.addr)
        .await
        .unwrap_err();
    assert!(err.starts_with("connect:"), "{err}");
}

#[tokio::test]
async fn a_client_without_a_certificate_is_refused_by_mutual_tls() {
    let (ca, server) = controller(&[RoleKind::Api, RoleKind::Agent]).await;
    let anonymous = ClientTls::new(ca.cert_pem(), None, Role::Controller).unwrap();
    assert_refused(check(&anonymous, &server.addr).await, "CertificateRequired");
    assert!(server.seen.lock().unwrap().is_empty());
}

/// An agents' port: the installation CA (`ca`) for the server, the agents CA for machines.
async fn agents_port() -> (Ca, Ca, Running) {
    let ca = Ca::generate("test installation").unwrap();
    let agents = Ca::generate("test agents").unwrap();
    let own = issue(&ca, Role::Controller);
    let config = tls::server_config_for_agents(ca.cert_pem(), &own, agents.cert_pem()).unwrap();
    (ca, agents, serve(config).await)
}

#[tokio::test]
async fn the_agents_port_serves_an_enrolling_agent_without_a_certificate() {
    let (ca, _agents, server) = agents_port().await;
    let anonymous = ClientTls::new(ca.cert_pem(), None, Role::Controller).unwrap();
    assert_eq!(
        check(&anonymous, &server.addr).await,
        Ok(ServingStatus::Serving)
    );
    assert_eq!(*server.seen.lock().unwrap(), vec![None]);

    // Still server-authenticated: a client of another installation does not trust it.
    let other = Ca::generate("another installation").unwrap();
    let stranger = ClientTls::new(other.cert_pem(), None, Role::Controller).unwrap();
    let err = check(&stranger, &server.addr).await.unwrap_err();
    assert!(err.starts_with("connect:"), "{err}");
}

/// The agents' port admits only machine certificates of the agents CA: a service certificate,
/// an agent certificate from the installation CA, or one from a foreign CA are refused.
#[tokio::test]
async fn the_agents_port_admits_only_machine_certificates_of_the_agents_ca() {
    let (ca, agents, server) = agents_port().await;
    let machine = agent();
    let enrolled = ClientTls::new(
        ca.cert_pem(),
        Some(&issue(&agents, machine)),
        Role::Controller,
    )
    .unwrap();
    assert_eq!(
        check(&enrolled, &server.addr).await,
        Ok(ServingStatus::Serving)
    );
    assert_eq!(*server.seen.lock().unwrap(), vec![Some(machine)]);

    let service = issue(&ca, Role::Api);
    let as_service = ClientTls::new(ca.cert_pem(), Some(&service), Role::Controller).unwrap();
    assert_refused(check(&as_service, &server.addr).await, "UnknownCA");
    let agent_of_the_installation_ca = issue(&ca, agent());
    let wrong_ca = ClientTls::new(
        ca.cert_pem(),
        Some(&agent_of_the_installation_ca),
        Role::Controller,
    )
    .unwrap();
    assert_refused(check(&wrong_ca, &server.addr).await, "UnknownCA");
    let agents_service = issue(&agents, Role::Api);
    let not_an_agent =
        ClientTls::new(ca.cert_pem(), Some(&agents_service), Role::Controller).unwrap();
    assert_refused(
        check(&not_an_agent, &server.addr).await,
        "CertificateUnknown",
    );
    assert_eq!(
        server.seen.lock().unwrap().len(),
        1,
        "no refused peer reached the handler"
    );
}

#[tokio::test]
async fn an_expired_machine_certificate_is_refused_by_the_agents_port() {
    let (ca, agents, server) = agents_port().await;
    let now = OffsetDateTime::now_utc();
    let expired = Validity {
        not_before: now - time::Duration::days(2),
        not_after: now - time::Duration::days(1),
    };
    let stale = agents.issue(agent(), expired).unwrap();
    let machine = ClientTls::new(ca.cert_pem(), Some(&stale), Role::Controller).unwrap();
    assert_refused(check(&machine, &server.addr).await, "CertificateExpired");
    assert!(server.seen.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_machine_certificate_is_refused_by_a_service_port() {
    let (ca, server) = controller(&[RoleKind::Api, RoleKind::Agent]).await;
    let agents = Ca::generate("test agents").unwrap();
    let machine = ClientTls::new(
        ca.cert_pem(),
        Some(&issue(&agents, agent())),
        Role::Controller,
    )
    .unwrap();
    assert_refused(check(&machine, &server.addr).await, "UnknownCA");
}

#[tokio::test]
async fn an_enrolling_agent_trusts_only_the_ca_its_pin_names() {
    use sha2::{Digest, Sha256};
    let ca = Ca::generate("test installation").unwrap();
    let own = issue(&ca, Role::Controller);
    let server =
        serve(tls::server_config_for_agents(ca.cert_pem(), &own, ca.cert_pem()).unwrap()).await;
    let ca_der = CertificateDer::from_pem_slice(ca.cert_pem().as_bytes()).unwrap();
    let pin: [u8; 32] = Sha256::digest(&ca_der).into();
    let pinned = ClientTls::pinned(pin, Role::Controller).unwrap();
    assert_eq!(
        check(&pinned, &server.addr).await,
        Ok(ServingStatus::Serving)
    );

    let wrong = ClientTls::pinned([7; 32], Role::Controller).unwrap();
    let err = check(&wrong, &server.addr).await.unwrap_err();
    assert!(err.starts_with("connect:"), "{err}");
    let not_a_controller = ClientTls::pinned(pin, Role::Api).unwrap();
    let err = check(&not_a_controller, &server.addr).await.unwrap_err();
    assert!(err.starts_with("connect:"), "{err}");
    // A server of another installation, presenting its own CA, doesn't match the pin.
    let other = Ca::generate("another installation").unwrap();
    let impostor = issue(&other, Role::Controller);
    let impostor = serve(
        tls::server_config_for_agents(other.cert_pem(), &impostor, other.cert_pem()).unwrap(),
    )
    .await;
    let err = check(&pinned, &impostor.addr).await.unwrap_err();
    assert!(err.starts_with("connect:"), "{err}");
}

#[tokio::test]
async fn triggering_shutdown_stops_the_server() {
    let (ca, server) = controller(&[RoleKind::Api]).await;
    let api = client(&ca, &issue(&ca, Role::Api));
    assert_eq!(check(&api, &server.addr).await, Ok(ServingStatus::Serving));
    server.shutdown.trigger();
    let stopped = tokio::time::timeout(PATIENCE, server.task)
        .await
        .expect("the server stops");
    stopped.unwrap().unwrap();
    assert!(check(&api, &server.addr).await.is_err());
}

/// A service gated to the access proxy, on a server that admits the api too (for its other
/// services): the api's certificate gets through the handshake but not to the service.
#[tokio::test]
async fn a_service_admits_only_the_roles_it_names() {
    let ca = Ca::generate("test installation").unwrap();
    let own = issue(&ca, Role::Controller);
    let config =
        tls::server_config(ca.cert_pem(), &own, &[RoleKind::Api, RoleKind::Access]).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (_reporter, health) = tonic_health::server::health_reporter();
    let gated = InterceptedService::new(health, einsora_runtime::grpc::only(&[RoleKind::Access]));
    let shutdown = Shutdown::new();
    let task = tokio::spawn(
        Server::builder()
            .add_service(gated)
            .serve_with_incoming_shutdown(tls::incoming(listener, config), shutdown.cancelled()),
    );
    let access = client(&ca, &issue(&ca, Role::Access));
    assert_eq!(check(&access, &addr).await, Ok(ServingStatus::Serving));
    let api = check(&client(&ca, &issue(&ca, Role::Api)), &addr).await;
    let refused = api.expect_err("the api may not call it");
    assert!(
        refused.contains("PermissionDenied") && refused.contains("api certificate may not call"),
        "{refused}"
    );
    shutdown.trigger();
    task.await.unwrap().unwrap();
}
