//! Serving HTTP/1.1 on a port anyone on the host can reach (the gateway, the access proxy),
//! plain or over TLS (the access proxy's `EINSORA_ACCESS_TLS`): at most `max_connections` at once (the next waits, unread, in the listen backlog
//! until one closes), and a connection that doesn't send a whole request head within
//! `header_read` (its first, or the next on a kept-alive connection; a TLS handshake within the
//! same time) is closed, so neither slow handshakes, slow headers nor idle connections hold the
//! port. WebSocket upgrades work; at shutdown the
//! connections finish what they are serving, then close.
//!
//! No cap per address: in Solo every client (the owner's browser and CLI, any local process)
//! is 127.0.0.1, so one would let a local process keep the owner out.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

use crate::settings::{ConfigError, Settings};
use crate::shutdown::Shutdown;
use crate::slots::Slots;

/// How many connections a port holds at once.
pub const MAX_CONNECTIONS: &str = "EINSORA_HTTP_MAX_CONNECTIONS";
/// How long a client has to send a request's head.
pub const HEADER_READ: &str = "EINSORA_HTTP_HEADER_TIMEOUT";

/// Connections open on the process's HTTP ports (its metrics port's among them).
static CONNECTIONS: std::sync::LazyLock<crate::metrics::Gauge> = std::sync::LazyLock::new(|| {
    crate::metrics::register(
        "einsora_http_connections",
        "HTTP connections open on this process's ports.",
        Default::default(),
    )
});

/// The limits of one port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    pub max_connections: usize,
    pub header_read: Duration,
}

impl HttpLimits {
    pub fn from_settings(settings: &Settings) -> Result<HttpLimits, ConfigError> {
        let max_connections =
            settings.parse_with(MAX_CONNECTIONS, "1024", |v| match v.parse::<usize>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err("is not a whole number above zero".to_owned()),
            })?;
        let header_read = settings.positive_duration(HEADER_READ, "10s")?;
        Ok(HttpLimits {
            max_connections,
            header_read,
        })
    }
}

/// Serves each connection with the service `make` makes for its peer, over TLS where `tls`
/// says, until `shutdown`.
pub async fn serve<M, S, B>(
    listener: TcpListener,
    limits: HttpLimits,
    tls: Option<TlsAcceptor>,
    shutdown: Shutdown,
    make: M,
) -> std::io::Result<()>
where
    M: Fn(SocketAddr) -> S,
    S: tower::Service<hyper::Request<Incoming>, Response = hyper::Response<B>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut slots = Slots::new(limits.max_connections);
    let stop = shutdown.cancelled();
    tokio::pin!(stop);
    loop {
        let slot = tokio::select! {
            () = &mut stop => break,
            slot = slots.next() => slot,
        };
        let (tcp, peer) = tokio::select! {
            () = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Usually out of file descriptors: wait rather than spin.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        nodelay(&tcp);
        let open = CONNECTIONS.clone();
        open.inc();
        let service = TowerToHyperService::new(make(peer));
        let (tls, shutdown) = (tls.clone(), shutdown.clone());
        tokio::spawn(async move {
            match tls {
                None => serve_connection(tcp, service, limits, peer, &shutdown).await,
                Some(tls) => {
                    if let Some(stream) = handshake(&tls, tcp, limits, peer, &shutdown).await {
                        serve_connection(stream, service, limits, peer, &shutdown).await;
                    }
                }
            }
            drop(slot);
            open.dec();
        });
    }
    slots.all_back().await;
    Ok(())
}

/// The TLS handshake, within the time a request's head has; none if it fails, is too slow, or
/// the port is shutting down.
async fn handshake(
    tls: &TlsAcceptor,
    tcp: TcpStream,
    limits: HttpLimits,
    peer: SocketAddr,
    shutdown: &Shutdown,
) -> Option<tokio_rustls::server::TlsStream<TcpStream>> {
    let accepting = tokio::time::timeout(limits.header_read, tls.accept(tcp));
    tokio::select! {
        accepted = accepting => match accepted {
            Ok(Ok(stream)) => Some(stream),
            Ok(Err(e)) => {
                tracing::debug!(%peer, error = %e, "TLS handshake failed");
                None
            }
            Err(_) => {
                tracing::debug!(%peer, "TLS handshake took too long");
                None
            }
        },
        () = shutdown.cancelled() => None,
    }
}

async fn serve_connection<IO, S, B>(
    io: IO,
    service: TowerToHyperService<S>,
    limits: HttpLimits,
    peer: SocketAddr,
    shutdown: &Shutdown,
) where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    S: tower::Service<hyper::Request<Incoming>, Response = hyper::Response<B>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read)
        .keep_alive(true)
        .serve_connection(TokioIo::new(io), service)
        .with_upgrades();
    tokio::pin!(connection);
    let served = tokio::select! {
        served = connection.as_mut() => served,
        () = shutdown.cancelled() => {
            // Finish the request in flight, then close.
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(e) = served {
        tracing::debug!(%peer, error = %e, "connection ended with an error");
    }
}

/// Nagle's algorithm would hold a response's last small segment for the client's delayed ACK
/// (40 ms a response on one connection).
fn nodelay(tcp: &TcpStream) {
    if let Err(e) = tcp.set_nodelay(true) {
        tracing::debug!(error = %e, "couldn't turn Nagle's algorithm off");
    }
}

#[cfg(test)]
mod tests;
