//! The relay's broker over real mutual TLS, each machine a scripted fake agent: a request
//! reaches the machine's listening stream, the tunnel it opens in answer carries bytes both
//! ways and closes one way at a time; a machine can't answer another's request; a refusal, a
//! machine that doesn't listen, a standby and a full machine each end the attempt with its own
//! error.

use einsora_core::ids::{MachineId, WorkloadId};
use einsora_proto::agent::v1 as pb;
use einsora_proto::agent::v1::relay_service_client::RelayServiceClient;
use einsora_runtime::pki::IssuedCert;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;
use tonic::{Code, Streaming};

use super::harness::{PATIENCE, Port};
use crate::agents::relay::{RelayError, TUNNELS_PER_MACHINE};

/// A fake agent's relay: its listening stream.
#[derive(Debug)]
struct Listening {
    channel: Channel,
    requests: Streaming<pb::OpenRequest>,
}

impl Listening {
    async fn start(port: &Port, cert: &IssuedCert) -> Result<Listening, tonic::Status> {
        let channel = port.channel(cert).await;
        let requests = RelayServiceClient::new(channel.clone())
            .listen(pb::ListenRequest {})
            .await?
            .into_inner();
        Ok(Listening { channel, requests })
    }

    async fn request(&mut self) -> pb::OpenRequest {
        tokio::time::timeout(PATIENCE, self.requests.message())
            .await
            .expect("a request in time")
            .unwrap()
            .expect("the stream stays open")
    }
}

/// Answers request `id` over `channel`: the tunnel's sender and what the controller sends.
async fn answer(
    channel: &Channel,
    id: Vec<u8>,
    refused: &str,
) -> Result<(mpsc::Sender<pb::TunnelFrame>, Streaming<pb::TunnelFrame>), tonic::Status> {
    let (tx, rx) = mpsc::channel(4);
    let answer = pb::TunnelAnswer {
        id,
        refused: refused.into(),
    };
    tx.send(pb::TunnelFrame {
        frame: Some(pb::tunnel_frame::Frame::Answer(answer)),
    })
    .await
    .unwrap();
    let down = RelayServiceClient::new(channel.clone())
        .tunnel(ReceiverStream::new(rx))
        .await?
        .into_inner();
    Ok((tx, down))
}

fn data(bytes: &[u8]) -> pb::TunnelFrame {
    pb::TunnelFrame {
        frame: Some(pb::tunnel_frame::Frame::Data(bytes.to_vec())),
    }
}

async fn machine(port: &Port, token: &str) -> (MachineId, IssuedCert) {
    port.tenancy.token(token).await;
    port.enrol(token).await.unwrap()
}

#[tokio::test]
async fn a_tunnel_carries_bytes_both_ways_and_closes_one_way_at_a_time() {
    let port = Port::start(&[]).await;
    let (id, cert) = machine(&port, "enr_relay_one").await;
    let mut agent = Listening::start(&port, &cert).await.unwrap();
    let workload = WorkloadId::new();

    let relays = std::sync::Arc::clone(&port.relays);
    let opening = tokio::spawn(async move { relays.open(id, workload, 3).await });
    let request = agent.request().await;
    assert_eq!(request.workload_id, workload.to_string());
    assert_eq!((request.attempt, request.id.len()), (3, 16));
    let (up, mut down) = answer(&agent.channel, request.id, "").await.unwrap();
    let mut tunnel = opening.await.unwrap().expect("paired with the answer");

    up.send(data(b"HTTP/1.1 200 OK\r\n")).await.unwrap();
    let frame = tunnel.inbound.message().await.unwrap().unwrap();
    assert_eq!(frame, data(b"HTTP/1.1 200 OK\r\n"));
    tunnel
        .outbound
        .send(Ok(data(b"GET / HTTP/1.1\r\n")))
        .await
        .unwrap();
    assert_eq!(
        down.message().await.unwrap().unwrap(),
        data(b"GET / HTTP/1.1\r\n")
    );

    // The controller's side closes: the agent's stream ends, and its own still goes.
    drop(tunnel.outbound);
    assert_eq!(down.message().await.unwrap(), None);
    up.send(data(b"tail")).await.unwrap();
    assert_eq!(
        tunnel.inbound.message().await.unwrap().unwrap(),
        data(b"tail")
    );
    drop(up);
    assert_eq!(tunnel.inbound.message().await.unwrap(), None);
}

#[tokio::test]
async fn a_machine_cant_answer_anothers_request_and_a_refusal_says_why() {
    let port = Port::start(&[]).await;
    let (id, cert) = machine(&port, "enr_relay_owner").await;
    let (_, thief) = machine(&port, "enr_relay_thief").await;
    let mut agent = Listening::start(&port, &cert).await.unwrap();
    let relays = std::sync::Arc::clone(&port.relays);
    let opening = tokio::spawn(async move { relays.open(id, WorkloadId::new(), 1).await });
    let request = agent.request().await;

    let other = port.channel(&thief).await;
    let stolen = answer(&other, request.id.clone(), "")
        .await
        .expect_err("refused");
    assert_eq!(stolen.code(), Code::NotFound, "{stolen:?}");

    answer(&agent.channel, request.id.clone(), "its socket is gone")
        .await
        .unwrap();
    let refused = opening.await.unwrap().expect_err("refused");
    assert!(
        matches!(&refused, RelayError::Refused(why) if why == "its socket is gone"),
        "{refused}"
    );
    let again = answer(&agent.channel, request.id, "")
        .await
        .expect_err("spent");
    assert_eq!(again.code(), Code::NotFound, "an ID is answered once");
}

#[tokio::test]
async fn no_listener_a_standby_and_a_full_machine_each_refuse_in_their_own_words() {
    let port = Port::start(&[]).await;
    let (id, cert) = machine(&port, "enr_relay_full").await;
    let refused = port
        .relays
        .open(id, WorkloadId::new(), 1)
        .await
        .err()
        .unwrap();
    assert!(matches!(refused, RelayError::NotListening), "{refused}");

    let mut agent = Listening::start(&port, &cert).await.unwrap();
    let mut tunnels = Vec::new();
    for _ in 0..TUNNELS_PER_MACHINE {
        let relays = std::sync::Arc::clone(&port.relays);
        let opening = tokio::spawn(async move { relays.open(id, WorkloadId::new(), 1).await });
        let request = agent.request().await;
        let ends = answer(&agent.channel, request.id, "").await.unwrap();
        tunnels.push((opening.await.unwrap().unwrap(), ends));
    }
    let full = port
        .relays
        .open(id, WorkloadId::new(), 1)
        .await
        .err()
        .unwrap();
    assert!(matches!(full, RelayError::TooMany), "{full}");
    tunnels.pop();
    let relays = std::sync::Arc::clone(&port.relays);
    let opening = tokio::spawn(async move { relays.open(id, WorkloadId::new(), 1).await });
    let request = agent.request().await;
    answer(&agent.channel, request.id, "").await.unwrap();
    opening
        .await
        .unwrap()
        .expect("a closed tunnel frees its place");

    port.hub.stand_by();
    let ended = tokio::time::timeout(PATIENCE, agent.requests.message())
        .await
        .unwrap()
        .expect_err("the listening stream ends");
    assert_eq!(ended.code(), Code::Unavailable, "{ended:?}");
    let refused = Listening::start(&port, &cert)
        .await
        .expect_err("a standby refuses");
    assert!(refused.message().contains("stands by"), "{refused:?}");
}
