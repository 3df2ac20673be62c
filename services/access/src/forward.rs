//! Forwarding to a workload: HTTP/1.1, a new connection per request (connections to workloads
//! aren't reused), bodies streamed both ways, and WebSocket upgrades joined. A workload on this
//! host is reached at its Unix socket, dialled only if it is the workload's own
//! (`einsora_runtime::workload_socket`: the workload can write the directory it is in); one on
//! another machine through the relay (`Upstream::relay`), whose agent makes the same checks.

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use axum::http::{Request, Response, StatusCode};
use einsora_runtime::shutdown::Shutdown;
use einsora_runtime::workload_socket;
use hyper::body::Incoming;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;

use crate::errors::Failure;
use crate::metrics::{self, Counted, CountedReads, Direction, Site};
use crate::upstream::{Route, Target, Upstream};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Each direction's buffer of a joined WebSocket.
const RELAY_BUFFER: usize = 2 * 1024;

/// Hop-by-hop headers (RFC 9110 §7.6.1), and the proxy's view of the client, which the
/// workload has no use for.
const HOP_BY_HOP: [&str; 12] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "x-forwarded-for",
    "x-forwarded-proto",
    "x-real-ip",
];

/// Whether a request asks to become a WebSocket.
pub(crate) fn is_websocket(headers: &HeaderMap) -> bool {
    let upgrade = headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("websocket"));
    upgrade && has_token(headers, header::CONNECTION, "upgrade")
}

fn has_token(headers: &HeaderMap, name: HeaderName, token: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

/// Removes hop-by-hop headers, those the Connection header names included; a WebSocket
/// handshake keeps `Connection: upgrade` and `Upgrade: websocket`.
pub(crate) fn remove_hop_by_hop(headers: &mut HeaderMap, websocket: bool) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|t| HeaderName::from_bytes(t.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in HOP_BY_HOP {
        headers.remove(name);
    }
    if websocket {
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    }
}

/// Sends `request` (already rewritten for the workload) over a new connection to `target`.
/// A WebSocket handshake the workload accepts is joined to the client's connection until
/// either side closes or `shutdown` fires.
pub(crate) async fn send(
    site: Site,
    target: &Target,
    upstream: &Upstream,
    request: Request<Body>,
    shutdown: &Shutdown,
) -> Result<Response<Counted<Incoming>>, Failure> {
    let started = Instant::now();
    let sent = dial(site, target, upstream, request, shutdown).await;
    let status = sent.as_ref().map_or(0, |r| r.status().as_u16());
    metrics::upstream(site, status, started.elapsed());
    let counter = metrics::bytes(site, Direction::FromWorkload);
    Ok(sent?.map(|body| Counted::new(body, counter)))
}

/// A connection to the workload, on this host or relayed.
trait Connection: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static> Connection for T {}

async fn connect(target: &Target, upstream: &Upstream) -> Result<Box<dyn Connection>, Failure> {
    let route = &target.route;
    match route {
        Route::Socket(socket) => {
            let connect = tokio::time::timeout(CONNECT_TIMEOUT, workload_socket::connect(socket));
            match connect.await {
                Ok(Ok(stream)) => Ok(Box::new(stream)),
                Ok(Err(e)) if e.is_tampering() => {
                    tracing::warn!(socket = %socket.display(), error = %e, "not the workload's own socket; nothing dialled");
                    Err(Failure::tampered())
                }
                Ok(Err(e)) => Err(unreachable(route, &e)),
                Err(_) => Err(unreachable(route, &"no connection in time")),
            }
        }
        Route::Relayed {
            workload,
            tenant_id,
        } => match upstream.relay(*workload, tenant_id, target.attempt).await {
            Ok(stream) => Ok(Box::new(stream)),
            Err(status) => Err(unreachable(route, &status.message())),
        },
    }
}

async fn dial(
    site: Site,
    target: &Target,
    upstream: &Upstream,
    request: Request<Body>,
    shutdown: &Shutdown,
) -> Result<Response<Incoming>, Failure> {
    let counter = metrics::bytes(site, Direction::ToWorkload);
    let mut request = request.map(|body| Body::new(Counted::new(body, counter)));
    let websocket = is_websocket(request.headers());
    let route = &target.route;
    // A relayed connection is kept between requests (`relay_pool`); a WebSocket's never is.
    let kept_as = match route {
        Route::Relayed { workload, .. } if !websocket => Some((*workload, target.attempt)),
        _ => None,
    };
    if let Some(run) = kept_as
        && let Some(mut sender) = upstream.kept.take(run)
    {
        match sender.try_send_request(request).await {
            Ok(response) => {
                upstream.kept.give_back(run, sender);
                return answered(response, false, route);
            }
            // Not sent: the connection was closing. A fresh one below.
            Err(mut e) => match e.take_message() {
                Some(unsent) => request = unsent,
                None => return Err(unreachable(route, &e.into_error())),
            },
        }
    }
    let client_upgrade = websocket.then(|| hyper::upgrade::on(&mut request));
    let stream = connect(target, upstream).await?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| unreachable(route, &e))?;
    tokio::spawn(async move {
        if let Err(e) = connection.with_upgrades().await {
            tracing::debug!(error = %e, "workload connection ended with an error");
        }
    });
    let mut response = sender
        .send_request(request)
        .await
        .map_err(|e| unreachable(route, &e))?;
    let switched = response.status() == StatusCode::SWITCHING_PROTOCOLS;
    match client_upgrade {
        Some(client) if switched => {
            let upstream = hyper::upgrade::on(&mut response);
            tokio::spawn(join(site, client, upstream, shutdown.clone()));
        }
        None if switched => return Err(unreachable(route, &"switched protocols unasked")),
        _ => {}
    }
    if let Some(run) = kept_as {
        upstream.kept.give_back(run, sender);
    }
    answered(response, switched, route)
}

/// The workload's answer, its hop-by-hop headers gone.
fn answered(
    mut response: Response<Incoming>,
    switched: bool,
    route: &Route,
) -> Result<Response<Incoming>, Failure> {
    if !switched && response.status() == StatusCode::SWITCHING_PROTOCOLS {
        return Err(unreachable(route, &"switched protocols unasked"));
    }
    remove_hop_by_hop(response.headers_mut(), switched);
    Ok(response)
}

async fn join(site: Site, client: OnUpgrade, upstream: OnUpgrade, shutdown: Shutdown) {
    let relay = async {
        let (client, upstream) = tokio::try_join!(client, upstream)?;
        // Counted as the bytes pass, so a WebSocket open for hours shows as it goes.
        let to = metrics::bytes(site, Direction::ToWorkload);
        let from = metrics::bytes(site, Direction::FromWorkload);
        let mut client = CountedReads::new(TokioIo::new(client), to);
        let mut upstream = CountedReads::new(TokioIo::new(upstream), from);
        // Small buffers: most WebSockets sit idle, and each holds its two for its whole life.
        tokio::io::copy_bidirectional_with_sizes(
            &mut client,
            &mut upstream,
            RELAY_BUFFER,
            RELAY_BUFFER,
        )
        .await?;
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
    };
    tokio::select! {
        result = relay => if let Err(e) = result {
            tracing::debug!(error = %e, "websocket relay ended with an error");
        },
        () = shutdown.cancelled() => {}
    }
}

fn unreachable(route: &Route, error: &dyn std::fmt::Display) -> Failure {
    match route {
        Route::Socket(socket) => {
            tracing::warn!(socket = %socket.display(), error = %error, "the workload did not answer");
        }
        Route::Relayed { workload, .. } => {
            tracing::warn!(%workload, error = %error, "the workload did not answer through the relay");
        }
    }
    Failure::unavailable("the workload isn't answering right now; try again shortly")
}
