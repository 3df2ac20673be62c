//! The relay's agent side (a Lab's machines): while synced, the agent listens on its own
//! connection for the controller's requests to open one of its workloads, and answers each
//! with a tunnel. The socket is the one the agent's own driver reported for that workload and
//! attempt, never a path from anywhere else, and it is dialled as the access proxy dials one on
//! its host (`einsora_runtime::workload_socket`: by inode, never through a link, its owner
//! checked). Bytes go both ways a frame at a time, each side's end closing on its own.

use std::path::PathBuf;
use std::time::Duration;

use einsora_core::agent::{Mode, StatusCode};
use einsora_proto::agent::v1 as pb;
use einsora_proto::agent::v1::relay_service_client::RelayServiceClient;
use einsora_proto::convert::WorkloadStatuses;
use einsora_runtime::workload_socket;
use tokio::net::UnixStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

/// How long a workload's socket may take to accept.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Listens for the controller's open requests on `channel`, handing each to the session (which
/// knows its workloads' sockets), until the stream ends. A controller without a relay, or one
/// that refuses, is logged once: the session goes on without.
pub fn listen(channel: Channel, requests: mpsc::Sender<pb::OpenRequest>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let listening = RelayServiceClient::new(channel)
            .listen(pb::ListenRequest {})
            .await;
        let mut stream = match listening {
            Ok(response) => response.into_inner(),
            Err(status) => {
                tracing::info!(why = %status.message(), "the controller relays nothing to this machine");
                return;
            }
        };
        while let Ok(Some(request)) = stream.message().await {
            if requests.send(request).await.is_err() {
                return;
            }
        }
    })
}

/// The socket of the workload and attempt `request` names, as this machine's driver reported
/// it; why not, in words for the controller's log.
pub fn socket_of(
    statuses: &WorkloadStatuses,
    request: &pb::OpenRequest,
) -> Result<PathBuf, String> {
    let status = statuses
        .workloads
        .iter()
        .find(|s| s.workload_id.to_string() == request.workload_id)
        .ok_or("no such workload runs on this machine")?;
    if status.attempt != request.attempt {
        return Err(format!(
            "its attempt {} runs here, not {}",
            status.attempt, request.attempt
        ));
    }
    if status.mode != Mode::Run || status.code != StatusCode::Ready {
        return Err("it isn't ready here".into());
    }
    let target = status.access_target.as_ref().ok_or("it has no socket")?;
    Ok(PathBuf::from(&target.socket_path))
}

/// Answers request `id` on `channel` with a tunnel to `socket` (or its refusal), and carries
/// the connection's bytes until both ends closed.
pub fn answer(channel: Channel, id: Vec<u8>, socket: Result<PathBuf, String>) {
    tokio::spawn(async move {
        let opened = match socket {
            Ok(path) => dial(&path).await,
            Err(why) => Err(why),
        };
        let (tx, rx) = mpsc::channel(2);
        let answer = pb::TunnelAnswer {
            id,
            refused: opened.as_ref().err().cloned().unwrap_or_default(),
        };
        let first = pb::TunnelFrame {
            frame: Some(pb::tunnel_frame::Frame::Answer(answer)),
        };
        if tx.send(first).await.is_err() {
            return;
        }
        let tunnel = RelayServiceClient::new(channel)
            .tunnel(ReceiverStream::new(rx))
            .await;
        let (Ok(stream), Ok(response)) = (opened, tunnel) else {
            return;
        };
        einsora_runtime::relay_io::carry(stream, tx, response.into_inner()).await;
    });
}

async fn dial(path: &std::path::Path) -> Result<UnixStream, String> {
    match tokio::time::timeout(CONNECT_TIMEOUT, workload_socket::connect(path)).await {
        Ok(Ok(stream)) => Ok(stream),
        Ok(Err(e)) => {
            if e.is_tampering() {
                tracing::warn!(socket = %path.display(), error = %e, "not the workload's own socket; nothing relayed");
            }
            Err(format!("its socket: {e}"))
        }
        Err(_) => Err("its socket accepted no connection in time".into()),
    }
}

#[cfg(test)]
mod tests;
