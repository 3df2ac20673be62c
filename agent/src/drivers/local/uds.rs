//! One HTTP/1.1 request over a Unix socket, on a connection of its own: the engine's API, and
//! a workload's readiness.

use std::path::Path;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;

/// The answer's status and whole body, from the engine's socket (a path only the host
/// writes).
pub async fn send(
    socket: &Path,
    request: Request<Full<Bytes>>,
) -> std::io::Result<(StatusCode, Bytes)> {
    send_over(UnixStream::connect(socket).await?, request).await
}

/// The answer's status and whole body, over a connection already made (a workload's socket,
/// dialled through `einsora_runtime::workload_socket`).
pub async fn send_over(
    stream: UnixStream,
    request: Request<Full<Bytes>>,
) -> std::io::Result<(StatusCode, Bytes)> {
    let failed = |e: hyper::Error| std::io::Error::other(e);
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(failed)?;
    tokio::spawn(connection);
    let response = sender.send_request(request).await.map_err(failed)?;
    let status = response.status();
    let body = response.into_body().collect().await.map_err(failed)?;
    Ok((status, body.to_bytes()))
}
