//! Each gRPC role starts on a migrated database, answers gRPC health over mutual TLS with the
//! installation's certificates (without the CA's key), refuses an agent's certificate, and stops
//! cleanly on SIGTERM.

use std::time::{Duration, Instant};

use einsora_runtime::pki::{Pki, Role, RoleIdentity};
use einsora_runtime::tls::ClientTls;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

use einsora_testkit::Port;

use crate::harness::support::{Einsora, stderr, terminate};

async fn healthy(
    e: &Einsora,
    own: Role,
    server: Role,
    addr: &str,
) -> Result<ServingStatus, String> {
    let id = RoleIdentity::load(&e.dir().join("pki"), own).map_err(|e| e.to_string())?;
    let tls = ClientTls::new(&id.ca_pem, Some(&id.cert), server).map_err(|e| e.to_string())?;
    // Debug, not Display: a refusal's TLS alert is in the error's sources.
    let channel = tls
        .connect(addr)
        .await
        .map_err(|e| format!("connect: {e:?}"))?;
    let request = HealthCheckRequest {
        service: String::new(),
    };
    let answer = HealthClient::new(channel)
        .check(request)
        .await
        .map_err(|status| format!("check: {status:?}"))?;
    Ok(answer.into_inner().status())
}

/// A migrated database and the installation's certificates, plus an agent's; the CA's key is
/// then moved away, as an operator may keep it offline.
fn installed() -> (Einsora, Role) {
    let e = Einsora::new();
    assert!(e.run(&["migrate"], &[]).status.success());
    assert!(e.run(&["pki", "init"], &[]).status.success());
    let pki_dir = e.dir().join("pki");
    let agent = Role::Agent {
        machine_id: uuid::Uuid::now_v7(),
    };
    Pki::load_or_create(&pki_dir)
        .unwrap()
        .role_cert(agent)
        .unwrap();
    std::fs::rename(pki_dir.join("ca.key"), e.dir().join("ca.key.offline")).unwrap();
    (e, agent)
}

#[tokio::test]
async fn grpc_roles_serve_health_over_mutual_tls_and_stop_on_sigterm() {
    let cases = [
        ("api", "EINSORA_API_ADDR", Role::Api, Role::Gateway),
        (
            "controller",
            "EINSORA_CONTROLLER_ADDR",
            Role::Controller,
            Role::Api,
        ),
        (
            "metering",
            "EINSORA_METERING_ADDR",
            Role::Metering,
            Role::Api,
        ),
    ];
    for (role, setting, server, caller) in cases {
        let (e, agent) = installed();
        // Dialled by the test, so held; the controller's agents' port is dialled by no one.
        let port = Port::loopback();
        let addr = port.to_string();
        // Node agents (the controller's default backend) arrive later: the fake runs here.
        let child = e.spawn(
            &[role],
            &[
                (setting, &addr),
                ("EINSORA_CLUSTER_BACKEND", "fake"),
                ("EINSORA_AGENT_ADDR", "127.0.0.1:0"),
                // Refused handshakes are logged at debug.
                ("EINSORA_LOG", "info,einsora_runtime::tls=debug"),
            ],
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            match healthy(&e, caller, server, &addr).await {
                Ok(status) => break status,
                Err(err) if Instant::now() > deadline => panic!("{role} never answered: {err}"),
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        };
        assert_eq!(status, ServingStatus::Serving, "{role}");
        // Refused at the handshake by the role rule (the chain is the installation CA's, so
        // only the role can refuse it): rustls's CertificateUnknown, not any other failure.
        // The agent's chain is the installation CA's, so only the role rule can refuse it, at
        // the handshake. TLS 1.3 sends that refusal after the client's side of the handshake,
        // so the client connects and its first call fails (with the CertificateUnknown alert,
        // or a closed or broken connection, whichever wins the race); the role's log says
        // which rule refused it.
        let refused = healthy(&e, agent, server, &addr)
            .await
            .expect_err(&format!("{role} admitted an agent"));
        assert!(
            refused.starts_with("check: "),
            "{role}: the agent didn't reach the handshake: {refused}"
        );
        let after = healthy(&e, caller, server, &addr).await;
        assert_eq!(after, Ok(ServingStatus::Serving), "{role} serves on");
        // Waited for off the runtime's thread, which must stay free to close the test's own
        // connections when the role drains them.
        let out = tokio::task::spawn_blocking(move || terminate(child))
            .await
            .unwrap();
        let logs = stderr(&out);
        assert!(out.status.success(), "{role} exit: {logs}");
        let rule = format!("a {agent} certificate is not admitted here");
        assert!(
            logs.lines()
                .any(|l| l.contains("TLS handshake failed") && l.contains(&rule)),
            "{role} didn't refuse the agent's certificate by its role ({refused}):\n{logs}"
        );
    }
}

#[test]
fn a_port_in_use_names_the_setting() {
    let (e, _) = installed();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = e.run(&["api"], &[("EINSORA_API_ADDR", &addr)]);
    let err = stderr(&out);
    assert!(!out.status.success());
    let expected = format!("EINSORA_API_ADDR: can't listen on {addr}");
    assert!(err.contains(&expected), "{err}");
}
