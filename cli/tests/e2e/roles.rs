//! Each gRPC role starts on a migrated database, answers gRPC health over mutual TLS with the
//! installation's certificates (without the CA's key), refuses an agent's certificate, and stops
//! cleanly on SIGTERM.

use std::time::{Duration, Instant};

use einsora_runtime::pki::{Pki, Role, RoleIdentity};
use einsora_runtime::tls::ClientTls;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

use crate::support::{Einsora, free_addr, stderr, terminate};

async fn healthy(
    e: &Einsora,
    own: Role,
    server: Role,
    addr: &str,
) -> Result<ServingStatus, String> {
    let id = RoleIdentity::load(&e.dir().join("pki"), own).map_err(|e| e.to_string())?;
    let tls = ClientTls::new(&id.ca_pem, Some(&id.cert), server).map_err(|e| e.to_string())?;
    let channel = tls.connect(addr).await.map_err(|e| e.to_string())?;
    let request = HealthCheckRequest {
        service: String::new(),
    };
    let answer = HealthClient::new(channel)
        .check(request)
        .await
        .map_err(|e| e.to_string())?;
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
        let addr = free_addr();
        // Node agents (the controller's default backend) arrive later: the fake runs here.
        let agents = free_addr();
        let child = e.spawn(
            &[role],
            &[
                (setting, &addr),
                ("EINSORA_CLUSTER_BACKEND", "fake"),
                ("EINSORA_AGENT_ADDR", &agents),
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
        let refused = healthy(&e, agent, server, &addr).await;
        assert!(refused.is_err(), "{role} admitted an agent");
        let out = terminate(child);
        assert!(out.status.success(), "{role} exit: {}", stderr(&out));
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
