//! A TLS incoming with caps, for a port that strangers can reach (the agents' port): at most
//! `max` connections at once, handshakes included (one more is not accepted until one closes,
//! so it waits in the listen backlog), at most `per_address` from one address (an IPv6 /64;
//! one more is closed at once), a handshake that doesn't finish within `handshake` is dropped,
//! and so is a connection that hasn't sent its first request's headers within `first_request`
//! of its handshake (`first_request`). A connection keeps its slots until it closes.

mod first_request;

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use rustls::ServerConfig;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, mpsc};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::Connected;

use self::first_request::FirstRequest;
use super::server::{ACCEPT_RETRY, HANDSHAKE_TIMEOUT};
use crate::slots::Slots;

/// A client that connects has this long after its handshake to send a request.
const FIRST_REQUEST: Duration = Duration::from_secs(30);

/// How many connections a port holds, and for how long a handshake may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    pub max: usize,
    pub per_address: usize,
    pub handshake: Duration,
    pub first_request: Duration,
}

impl ConnectionLimits {
    /// `max` at once and `per_address` from one address, with the usual handshake timeout.
    pub fn new(max: usize, per_address: usize) -> ConnectionLimits {
        ConnectionLimits {
            max: max.max(1),
            per_address: per_address.max(1),
            handshake: HANDSHAKE_TIMEOUT,
            first_request: FIRST_REQUEST,
        }
    }
}

/// A connection holding its slots (released as it is dropped).
#[derive(Debug)]
pub struct Limited<T> {
    inner: T,
    first: FirstRequest,
    _slot: OwnedSemaphorePermit,
    _address: AddressSlot,
}

/// Like [`incoming`](super::incoming), within `limits`.
pub fn incoming_limited(
    listener: TcpListener,
    config: Arc<ServerConfig>,
    limits: ConnectionLimits,
) -> impl Stream<Item = io::Result<Limited<TlsStream<TcpStream>>>> + Send + 'static {
    let (tx, rx) = mpsc::channel(32);
    let acceptor = TlsAcceptor::from(config);
    let mut slots = Slots::new(limits.max);
    let addresses = Arc::new(Addresses::default());
    tokio::spawn(async move {
        loop {
            let slot = tokio::select! {
                () = tx.closed() => return,
                slot = slots.next() => slot,
            };
            let (tcp, peer) = tokio::select! {
                () = tx.closed() => return,
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(err) => {
                        tracing::warn!(%err, "accepting a connection failed");
                        tokio::time::sleep(ACCEPT_RETRY).await;
                        continue;
                    }
                },
            };
            let Some(address) = addresses.take(peer.ip(), limits.per_address) else {
                tracing::debug!(%peer, "too many connections from this address; closed");
                continue;
            };
            let held = (slot, address);
            let handshake = handshake(acceptor.clone(), tcp, peer, limits, held, tx.clone());
            tokio::spawn(handshake);
        }
    });
    ReceiverStream::new(rx)
}

async fn handshake(
    acceptor: TlsAcceptor,
    tcp: TcpStream,
    peer: SocketAddr,
    limits: ConnectionLimits,
    (slot, address): (OwnedSemaphorePermit, AddressSlot),
    tx: mpsc::Sender<io::Result<Limited<TlsStream<TcpStream>>>>,
) {
    if let Err(err) = tcp.set_nodelay(true) {
        tracing::debug!(%peer, %err, "cannot set TCP_NODELAY");
    }
    match tokio::time::timeout(limits.handshake, acceptor.accept(tcp)).await {
        Ok(Ok(tls)) => {
            let deadline = tokio::time::Instant::now() + limits.first_request;
            let limited = Limited {
                inner: tls,
                first: FirstRequest::new(deadline),
                _slot: slot,
                _address: address,
            };
            // An error here means the server has stopped; the connection just closes.
            let _ = tx.send(Ok(limited)).await;
        }
        Ok(Err(err)) => tracing::debug!(%peer, %err, "TLS handshake failed"),
        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
    }
}

/// Connections open per address.
#[derive(Debug, Default)]
struct Addresses {
    open: Mutex<HashMap<IpAddr, usize>>,
}

/// One connection's count against its address; given back when dropped.
#[derive(Debug)]
struct AddressSlot {
    addresses: Arc<Addresses>,
    key: IpAddr,
}

impl Addresses {
    fn take(self: &Arc<Self>, ip: IpAddr, max: usize) -> Option<AddressSlot> {
        let key = source(ip);
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(key).or_insert(0);
        if *count >= max {
            return None;
        }
        *count += 1;
        Some(AddressSlot {
            addresses: Arc::clone(self),
            key,
        })
    }
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut open = self
            .addresses
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&self.key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.remove(&self.key);
            }
        }
    }
}

/// An IPv4 address as it is; an IPv6 one by its /64, which one host usually holds whole.
fn source(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => IpAddr::V6((u128::from(v6) & !u128::from(u64::MAX)).into()),
        v4 => v4,
    }
}

impl<T: Connected> Connected for Limited<T> {
    type ConnectInfo = T::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Limited<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        this.first.check(cx)?;
        let before = buf.filled().len();
        let read = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = read {
            this.first.saw(&buf.filled()[before..]);
        }
        read
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Limited<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests;
