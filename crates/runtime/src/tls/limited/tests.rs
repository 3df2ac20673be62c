//! Raw TCP clients that never say a word: how many the port takes in, and from where.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpSocket;
use tokio_stream::StreamExt;

use super::*;
use crate::pki::{Ca, Role, Validity};

const PATIENCE: Duration = Duration::from_secs(10);
/// Longer than a closed connection takes to read as closed on loopback.
const A_WHILE: Duration = Duration::from_millis(300);

fn config() -> Arc<ServerConfig> {
    let ca = Ca::generate("test installation").unwrap();
    let agents = Ca::generate("test agents").unwrap();
    let own = ca
        .issue(
            Role::Controller,
            Validity::from_now(Duration::from_secs(3600)),
        )
        .unwrap();
    super::super::server_config_for_agents(ca.cert_pem(), &own, agents.cert_pem()).unwrap()
}

/// Serves `limits` on 127.0.0.1, draining (and holding) what it yields.
async fn port(limits: ConnectionLimits) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut incoming = Box::pin(incoming_limited(listener, config(), limits));
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Some(conn) = incoming.next().await {
            held.push(conn);
        }
    });
    addr
}

async fn connect(from: [u8; 4], to: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind((from, 0).into()).unwrap();
    socket.connect(to).await.unwrap()
}

/// Whether the server closes the connection, or answers on it (a TLS alert), within `within`.
async fn closed_within(conn: &mut TcpStream, within: Duration) -> bool {
    let mut byte = [0u8; 1];
    tokio::time::timeout(within, conn.read(&mut byte))
        .await
        .is_ok()
}

#[tokio::test]
async fn one_connection_too_many_from_an_address_is_closed_and_others_are_not() {
    let limits = ConnectionLimits {
        handshake: PATIENCE * 6,
        ..ConnectionLimits::new(10, 2)
    };
    let addr = port(limits).await;
    let mut first = connect([127, 0, 0, 1], addr).await;
    let mut second = connect([127, 0, 0, 1], addr).await;
    let mut third = connect([127, 0, 0, 1], addr).await;
    assert!(
        closed_within(&mut third, PATIENCE).await,
        "the third from one address, well before its handshake would time out"
    );
    let mut elsewhere = connect([127, 0, 0, 2], addr).await;
    for (name, conn) in [
        ("first", &mut first),
        ("second", &mut second),
        ("another address's", &mut elsewhere),
    ] {
        assert!(!closed_within(conn, A_WHILE).await, "the {name} stays");
    }
    drop(first);
    // Once the server saw it close, the address may open another.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let mut again = connect([127, 0, 0, 1], addr).await;
        if !closed_within(&mut again, A_WHILE).await {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the address stays full"
        );
    }
}

#[tokio::test]
async fn past_the_cap_a_connection_waits_unread_until_one_closes() {
    let limits = ConnectionLimits {
        handshake: PATIENCE * 6,
        ..ConnectionLimits::new(1, 10)
    };
    let addr = port(limits).await;
    let holder = connect([127, 0, 0, 1], addr).await;
    let mut waiting = connect([127, 0, 0, 2], addr).await;
    // Not TLS: a connection taken in is closed for it at once.
    waiting.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
    assert!(
        !closed_within(&mut waiting, A_WHILE).await,
        "not taken in while the only slot is held"
    );
    drop(holder);
    assert!(
        closed_within(&mut waiting, PATIENCE).await,
        "taken in once the slot is free, and read"
    );
}

#[tokio::test]
async fn a_handshake_that_never_comes_is_dropped_after_its_timeout() {
    let limits = ConnectionLimits {
        handshake: Duration::from_millis(200),
        ..ConnectionLimits::new(10, 10)
    };
    let addr = port(limits).await;
    let mut silent = connect([127, 0, 0, 1], addr).await;
    assert!(closed_within(&mut silent, PATIENCE).await);
}

/// Over real TLS and HTTP/2 (gRPC health): a connection that never sends a request is closed
/// after the header-read timeout (here, its address's one slot comes free); one that did stays.
#[tokio::test]
async fn a_connection_without_a_request_is_closed_and_one_with_a_request_stays() {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_client::HealthClient;

    let first_request = Duration::from_millis(300);
    let past_it = first_request * 3;
    let limits = ConnectionLimits {
        first_request,
        ..ConnectionLimits::new(10, 1)
    };
    let ca = Ca::generate("test installation").unwrap();
    let agents = Ca::generate("test agents").unwrap();
    let own = ca
        .issue(
            Role::Controller,
            Validity::from_now(Duration::from_secs(3600)),
        )
        .unwrap();
    let config =
        super::super::server_config_for_agents(ca.cert_pem(), &own, agents.cert_pem()).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (_reporter, health) = tonic_health::server::health_reporter();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(health)
            .serve_with_incoming(incoming_limited(listener, config, limits)),
    );
    let client = crate::tls::ClientTls::new(ca.cert_pem(), None, Role::Controller).unwrap();
    let check = async |channel: &tonic::transport::Channel| {
        let request = HealthCheckRequest {
            service: String::new(),
        };
        HealthClient::new(channel.clone()).check(request).await
    };

    let idle = client.connect(&addr).await.expect("the address's one slot");
    tokio::time::sleep(past_it).await;
    let busy = client
        .connect(&addr)
        .await
        .expect("the idle connection was closed, so its slot is free");
    check(&busy).await.expect("served");
    tokio::time::sleep(past_it).await;
    let probe = match client.connect(&addr).await {
        Ok(channel) => check(&channel).await.is_ok(),
        Err(_) => false,
    };
    assert!(!probe, "the busy connection still holds the slot");
    check(&busy).await.expect("and still is served");
    drop(idle);
}
