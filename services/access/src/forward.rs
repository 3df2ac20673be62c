//! Forwarding to a workload: HTTP/1.1 on a connection kept from an earlier request to the same
//! run (`kept.rs`) or a new one, bodies streamed both ways, and WebSocket upgrades joined, each
//! on a connection of its own. A workload on this host is reached at its Unix socket, dialled
//! only if it is the workload's own (`einsora_runtime::workload_socket`: the workload can write
//! the directory it is in); one on another machine through the relay (`Upstream::relay`), whose
//! agent makes the same checks.

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use axum::http::{Method, Request, Response, StatusCode};
use einsora_runtime::shutdown::Shutdown;
use einsora_runtime::workload_socket;
use hyper::body::{Body as _, Incoming};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;

use crate::errors::Failure;
use crate::kept::Answer;
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
    // Most messages carry none: looking at the names they have costs less than removing each
    // (every request and answer passes here). Headers the Connection header names are looked
    // for only where there is one, and it is among these.
    if headers
        .keys()
        .any(|name| HOP_BY_HOP.contains(&name.as_str()))
    {
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
    }
    if websocket {
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    }
}

/// Sends `request` (already rewritten for the workload) to `target`.
/// A WebSocket handshake the workload accepts is joined to the client's connection until
/// either side closes or `shutdown` fires.
pub(crate) async fn send(
    site: Site,
    target: &Target,
    upstream: &Upstream,
    request: Request<Body>,
    shutdown: &Shutdown,
) -> Result<Response<Counted<Answer>>, Failure> {
    let started = Instant::now();
    let sent = dial(site, target, upstream, request, shutdown).await;
    let status = sent.as_ref().map_or(0, |r| r.status().as_u16());
    metrics::upstream(site, status, started.elapsed());
    let counter = metrics::bytes(site, Direction::FromWorkload);
    Ok(sent?.map(|body| Counted::new(body, counter)))
}

/// A connection to the workload, on this host or relayed.
pub(crate) trait Connection:
    tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static
{
}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static> Connection for T {}

pub(crate) async fn connect(
    target: &Target,
    upstream: &Upstream,
) -> Result<Box<dyn Connection>, Failure> {
    match &target.route {
        Route::Socket(socket) => {
            let connect = tokio::time::timeout(CONNECT_TIMEOUT, workload_socket::connect(socket));
            match connect.await {
                Ok(Ok(stream)) => Ok(Box::new(stream)),
                Ok(Err(e)) if e.is_tampering() => {
                    tracing::warn!(socket = %socket.display(), error = %e, "not the workload's own socket; nothing dialled");
                    Err(Failure::tampered())
                }
                Ok(Err(e)) => Err(unreachable(target, &e)),
                Err(_) => Err(unreachable(target, &"no connection in time")),
            }
        }
        Route::Relayed { tenant_id } => {
            match upstream
                .relay(target.workload, tenant_id, target.attempt)
                .await
            {
                Ok(stream) => Ok(Box::new(stream)),
                Err(status) => Err(unreachable(target, &status.message())),
            }
        }
    }
}

async fn dial(
    site: Site,
    target: &Target,
    upstream: &Upstream,
    request: Request<Body>,
    shutdown: &Shutdown,
) -> Result<Response<Answer>, Failure> {
    let counter = metrics::bytes(site, Direction::ToWorkload);
    let mut request = request.map(|body| Body::new(Counted::new(body, counter)));
    let websocket = is_websocket(request.headers());
    // A connection is kept between requests (`kept.rs`); a WebSocket's never is.
    let run = (target.workload, target.attempt);
    if !websocket && let Some(mut sender) = upstream.kept.take(run) {
        let again = replayable(&request);
        match sender.try_send_request(request).await {
            Ok(response) => {
                let response = answered(response, false, target)?;
                let kept = &upstream.kept;
                return Ok(response.map(|body| kept.answer(run, &target.route, sender, body)));
            }
            // Not sent: the workload closed the connection. A fresh one below.
            Err(mut e) => match (e.take_message(), again) {
                (Some(unsent), _) => request = unsent,
                // Sent as the workload closed it (its idle time ending as the request came): a
                // request that may be sent twice goes again on a fresh one, as a reverse proxy
                // retries an idempotent request on another connection (RFC 9110 §9.2.2).
                (None, Some(again)) => {
                    tracing::debug!(error = %e.into_error(), "a kept connection closed under a request; sending it again");
                    request = again;
                }
                (None, None) => return Err(unreachable(target, &e.into_error())),
            },
        }
    }
    let client_upgrade = websocket.then(|| hyper::upgrade::on(&mut request));
    let stream = connect(target, upstream).await?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| unreachable(target, &e))?;
    tokio::spawn(async move {
        if let Err(e) = connection.with_upgrades().await {
            tracing::debug!(error = %e, "workload connection ended with an error");
        }
    });
    let mut response = sender
        .send_request(request)
        .await
        .map_err(|e| unreachable(target, &e))?;
    let switched = response.status() == StatusCode::SWITCHING_PROTOCOLS;
    match client_upgrade {
        Some(client) if switched => {
            let upstream = hyper::upgrade::on(&mut response);
            tokio::spawn(join(site, client, upstream, shutdown.clone()));
        }
        None if switched => return Err(unreachable(target, &"switched protocols unasked")),
        _ => {}
    }
    let response = answered(response, switched, target)?;
    Ok(response.map(|body| match websocket {
        true => Answer::unkept(body),
        false => upstream.kept.answer(run, &target.route, sender, body),
    }))
}

/// A copy of `request` to send again should its first sending fail: only an idempotent one
/// without a body (whose bytes would be gone).
fn replayable(request: &Request<Body>) -> Option<Request<Body>> {
    let idempotent = [
        Method::GET,
        Method::HEAD,
        Method::OPTIONS,
        Method::PUT,
        Method::DELETE,
    ];
    if !idempotent.contains(request.method()) || request.body().size_hint().exact() != Some(0) {
        return None;
    }
    let mut again = Request::new(Body::empty());
    *again.method_mut() = request.method().clone();
    *again.uri_mut() = request.uri().clone();
    *again.version_mut() = request.version();
    *again.headers_mut() = request.headers().clone();
    Some(again)
}

/// The workload's answer, its hop-by-hop headers gone.
fn answered(
    mut response: Response<Incoming>,
    switched: bool,
    target: &Target,
) -> Result<Response<Incoming>, Failure> {
    if !switched && response.status() == StatusCode::SWITCHING_PROTOCOLS {
        return Err(unreachable(target, &"switched protocols unasked"));
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

fn unreachable(target: &Target, error: &dyn std::fmt::Display) -> Failure {
    match &target.route {
        Route::Socket(socket) => {
            tracing::warn!(socket = %socket.display(), error = %error, "the workload did not answer");
        }
        Route::Relayed { .. } => {
            let workload = target.workload;
            tracing::warn!(%workload, error = %error, "the workload did not answer through the relay");
        }
    }
    Failure::unavailable("the workload isn't answering right now; try again shortly")
}
