//! One relayed connection's bytes, both ways, between the proxy's stream and the machine's
//! tunnel: a frame at a time through channels two frames deep, so each side goes only as fast
//! as the other takes them (HTTP/2's flow control does the rest, on both connections). A side
//! ending its stream closes that direction only (HTTP/1.1 and WebSockets close one way at a
//! time); a failure on either side ends both, with a status that says which side failed.

use einsora_proto::agent::v1 as agent_pb;
use einsora_proto::internal::v1 as pb;
use tokio::sync::mpsc;
use tonic::{Status, Streaming};

use super::AgentTunnel;

pub async fn join(
    mut proxy: Streaming<pb::RelayFrame>,
    to_proxy: mpsc::Sender<Result<pb::RelayFrame, Status>>,
    tunnel: AgentTunnel,
) {
    let AgentTunnel {
        mut inbound,
        outbound,
        _permit: permit,
    } = tunnel;
    let up = async move {
        loop {
            let data = match proxy.message().await {
                Ok(Some(pb::RelayFrame {
                    frame: Some(pb::relay_frame::Frame::Data(data)),
                })) => data,
                Ok(None) => break,
                Ok(Some(_)) => {
                    let refused =
                        Status::invalid_argument("a relay sends bytes after its first frame");
                    let _ = outbound.send(Err(refused)).await;
                    break;
                }
                Err(_) => {
                    let _ = outbound
                        .send(Err(Status::cancelled("the proxy's end went away")))
                        .await;
                    break;
                }
            };
            let frame = agent_pb::TunnelFrame {
                frame: Some(agent_pb::tunnel_frame::Frame::Data(data)),
            };
            if outbound.send(Ok(frame)).await.is_err() {
                break;
            }
        }
    };
    let down = async move {
        loop {
            let data = match inbound.message().await {
                Ok(Some(agent_pb::TunnelFrame {
                    frame: Some(agent_pb::tunnel_frame::Frame::Data(data)),
                })) => data,
                Ok(None) => break,
                Ok(Some(_)) => {
                    let refused = Status::data_loss("its machine sent something other than bytes");
                    let _ = to_proxy.send(Err(refused)).await;
                    break;
                }
                Err(status) => {
                    let lost = Status::unavailable(format!(
                        "the connection to its machine was lost: {}",
                        status.message()
                    ));
                    let _ = to_proxy.send(Err(lost)).await;
                    break;
                }
            };
            let frame = pb::RelayFrame {
                frame: Some(pb::relay_frame::Frame::Data(data)),
            };
            if to_proxy.send(Ok(frame)).await.is_err() {
                break;
            }
        }
    };
    tokio::join!(up, down);
    drop(permit);
}
