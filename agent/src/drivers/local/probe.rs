//! Whether a workload's server is ready: it answers, on its own socket, the token the agent
//! keeps (never one read back from anything the workload can write). The socket is dialled
//! through `einsora_runtime::workload_socket`, which refuses anything but the workload's own.

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use einsora_runtime::workload_socket;
use http_body_util::Full;

use super::contract::Serves;
use super::uds;

/// What a readiness probe found.
#[derive(Debug)]
pub enum Probe {
    Answered,
    /// No server yet, or not answering its token.
    NotYet,
    /// Something other than the workload's own socket is under its name: nothing was dialled.
    Tampered(workload_socket::SocketRefused),
}

/// Whether the server answers its own token on its own socket.
pub async fn answers(socket: &Path, serves: &Serves, token: &str) -> Probe {
    let (path, auth) = match serves {
        Serves::Notebook { .. } => ("/api/status", format!("token {token}")),
        Serves::Endpoint { .. } => ("/health", format!("Bearer {token}")),
    };
    let request = hyper::Request::get(path)
        .header("host", "localhost")
        .header("authorization", auth)
        .body(Full::new(Bytes::new()));
    let Ok(request) = request else {
        // The agent's own hex token always makes a valid header; never panic if it didn't.
        return Probe::NotYet;
    };
    let probe = async {
        let stream = workload_socket::connect(socket).await?;
        uds::send_over(stream, request)
            .await
            .map_err(workload_socket::SocketRefused::Io)
    };
    match tokio::time::timeout(Duration::from_secs(2), probe).await {
        Ok(Ok((status, _))) if status.is_success() => Probe::Answered,
        Ok(Err(refused)) if refused.is_tampering() => Probe::Tampered(refused),
        _ => Probe::NotYet,
    }
}
