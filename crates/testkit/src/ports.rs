//! TCP ports for a process under test to listen on, that nothing else can take between the
//! pick and that process's own bind, nor while it restarts.
//!
//! A [`Port`] is a socket bound here and never listened on, kept until it is dropped. It is
//! bound without SO_REUSEADDR, so it gets no port any other socket holds (another test's
//! `Port` or listener included), then SO_REUSEADDR is set on it: a listener that sets it too
//! (tokio's and std's do, and Postgres's) binds the same address beside it and listens, while
//! any other bind is refused. Ports are picked below the kernel's ephemeral range, which binds
//! to port 0 and outgoing connections draw from, and no bind to port 0 or outgoing connection
//! is given a port a socket is bound to anyway. Dialled while nothing listens, it refuses.

use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::BuildHasher;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

/// How many ports below the ephemeral range are drawn from.
const SPAN: u16 = 10_000;
/// Picks tried before giving up (each one taken means a test holds it).
const TRIES: usize = 200;

#[derive(Debug)]
pub struct Port {
    /// Held, never listened on, until dropped.
    _socket: Socket,
    addr: SocketAddr,
}

impl Port {
    /// A port on 127.0.0.1, held until dropped. Panics if none can be had.
    pub fn loopback() -> Port {
        Port::on(Ipv4Addr::LOCALHOST.into())
    }

    /// A port on `ip` (an address of this host), held until dropped. Panics if none can be
    /// had.
    pub fn on(ip: IpAddr) -> Port {
        Port::try_on(ip).unwrap_or_else(|e| panic!("can't hold a TCP port on {ip}: {e}"))
    }

    pub fn try_on(ip: IpAddr) -> io::Result<Port> {
        let Some((low, high)) = below_ephemeral() else {
            // No room beside the ephemeral range: the kernel's pick, held all the same.
            return Port::hold(SocketAddr::new(ip, 0));
        };
        let mut last = None;
        for _ in 0..TRIES {
            let port = low + u16::try_from(random() % u64::from(high - low)).unwrap_or(0);
            match Port::hold(SocketAddr::new(ip, port)) {
                Ok(held) => return Ok(held),
                Err(e) if e.kind() == io::ErrorKind::AddrInUse => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no port tried")))
    }

    fn hold(addr: SocketAddr) -> io::Result<Port> {
        // Close-on-exec, as socket2 makes every socket: no child inherits it.
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        socket.bind(&SockAddr::from(addr))?;
        socket.set_reuse_address(true)?;
        let addr = socket
            .local_addr()?
            .as_socket()
            .ok_or_else(|| io::Error::other("bound to a non-IP address"))?;
        Ok(Port {
            _socket: socket,
            addr,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }
}

/// `ip:port`, as an `EINSORA_*_ADDR` setting takes it.
impl fmt::Display for Port {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.addr.fmt(f)
    }
}

/// `[low, high)`: the [`SPAN`] ports just below the kernel's ephemeral range (32768 by
/// default), if there is room above 1024 for them.
fn below_ephemeral() -> Option<(u16, u16)> {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let first: u16 = range.split_whitespace().next()?.parse().ok()?;
    let low = first.checked_sub(SPAN)?;
    (low > 1024).then_some((low, first))
}

fn random() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    RandomState::new().hash_one(COUNTER.fetch_add(1, Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn a_held_port_is_refused_to_others_and_given_to_the_listener_it_was_held_for() {
        let held = Port::loopback();
        if let Some((low, high)) = below_ephemeral() {
            assert!((low..high).contains(&held.port()), "{held}");
        }
        // Nothing listens: dialling it is refused.
        assert!(TcpStream::connect(held.addr()).is_err());
        // Another reservation of it is refused.
        let again = Port::hold(held.addr()).unwrap_err();
        assert_eq!(again.kind(), io::ErrorKind::AddrInUse, "{again}");
        // The process it was held for binds it (std sets SO_REUSEADDR, as tokio does) and
        // listens; then nobody else binds it, and it answers.
        let listener = TcpListener::bind(held.addr()).unwrap();
        assert!(TcpListener::bind(held.addr()).is_err(), "bound twice");
        assert!(Port::hold(held.addr()).is_err(), "held while listened on");
        assert!(TcpStream::connect(held.addr()).is_ok());
        // It stops and starts again on the same port: still held between the two.
        drop(listener);
        assert!(
            Port::hold(held.addr()).is_err(),
            "released with the listener"
        );
        let _again = TcpListener::bind(held.addr()).unwrap();
    }

    #[test]
    fn a_bind_to_port_zero_never_gets_a_held_port() {
        // Held in the ephemeral range itself (the kernel's picks), where binds to port 0 draw.
        let any = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let held: Vec<Port> = (0..50).map(|_| Port::hold(any).unwrap()).collect();
        for _ in 0..2000 {
            let port = TcpListener::bind(any).unwrap().local_addr().unwrap().port();
            assert!(held.iter().all(|h| h.port() != port), "{port} given out");
        }
    }
}
