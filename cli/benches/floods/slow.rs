//! Slow and idle connections: many at once, from many loopback addresses, each either
//! trickling one byte of a request head (or of a TLS ClientHello) a second, or sending nothing;
//! held until the server closes them or the phase ends. Each one's fate is counted: closed by
//! the server within a second of connecting (refused), closed later (when, after connecting),
//! or still open at the end. Connections that finished their TLS handshake and then send no
//! request (`idle_h2`) are counted from the server's side (`/proc/net/tcp`).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpSocket;
use tokio::time::Instant;

use super::world::World;
use crate::support::probe;

/// What each connection of a group does.
#[derive(Debug, Clone, Copy)]
pub enum How {
    /// Writes `prefix` and then `a`s, one byte a second, and never ends its head.
    Trickle(&'static [u8]),
    /// Sends nothing.
    Silent,
}

/// A request head that never ends.
pub const HTTP_HEAD: &[u8] = b"GET /v1/catalog HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
/// A TLS record header announcing a 512-byte ClientHello that never completes.
pub const TLS_HELLO: &[u8] = &[
    0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03,
];

/// Connections from `addresses`, `per_address` from each.
#[derive(Debug, Clone)]
pub struct Group {
    pub label: &'static str,
    pub addresses: Vec<Ipv4Addr>,
    pub per_address: usize,
    pub how: How,
}

/// How a group's connections fared.
#[derive(Debug, Default, Clone)]
pub struct Held {
    pub label: String,
    pub tried: usize,
    pub connect_failed: usize,
    /// Closed by the server within a second of connecting.
    pub refused: usize,
    /// Seconds after connecting at which the server closed the others.
    pub closed_after: Vec<f64>,
    /// Got bytes from the server before it closed (an error answer).
    pub answered: usize,
    pub open_at_end: usize,
    /// Seen from the server's side (`/proc/net/tcp`): the most at once, and at the end.
    pub server_peak: usize,
    pub server_end: usize,
}

impl Held {
    pub fn merge(&mut self, other: &Held) {
        self.tried += other.tried;
        self.connect_failed += other.connect_failed;
        self.refused += other.refused;
        self.closed_after.extend_from_slice(&other.closed_after);
        self.answered += other.answered;
        self.open_at_end += other.open_at_end;
        self.server_peak = self.server_peak.max(other.server_peak);
        self.server_end += other.server_end;
    }

    /// `Err` unless every connection tried has one fate.
    pub fn check(&self) -> anyhow::Result<()> {
        let counted =
            self.connect_failed + self.refused + self.closed_after.len() + self.open_at_end;
        anyhow::ensure!(
            counted == self.tried,
            "{}: {} connections tried, {counted} counted",
            self.label,
            self.tried
        );
        Ok(())
    }
}

enum Fate {
    ConnectFailed,
    Closed { after: Duration, answered: bool },
    OpenAtEnd,
}

/// Opens every group's connections against `target` and holds them until `until`.
pub async fn hold(
    target: SocketAddr,
    groups: &[Group],
    until: Instant,
) -> anyhow::Result<Vec<Held>> {
    let sets: Vec<Vec<Ipv4Addr>> = groups.iter().map(|g| g.addresses.clone()).collect();
    let sampler = tokio::spawn(server_side(target.port(), sets, until));
    let mut tasks = Vec::new();
    for (g, group) in groups.iter().enumerate() {
        for &ip in &group.addresses {
            for _ in 0..group.per_address {
                let how = group.how;
                tasks.push((g, tokio::spawn(one(target, ip, how, until))));
                // About 1,000 a second: all at once would overflow the listen queue, and
                // the kernel would drop the handshakes it can't queue before the server saw
                // them.
                if tasks.len().is_multiple_of(20) {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    }
    let mut held: Vec<Held> = groups
        .iter()
        .map(|g| Held {
            label: g.label.to_owned(),
            ..Held::default()
        })
        .collect();
    for (g, task) in tasks {
        let fate = task
            .await
            .map_err(|e| anyhow::anyhow!("a slow connection's task failed: {e}"))?;
        let h = &mut held[g];
        h.tried += 1;
        match fate {
            Fate::ConnectFailed => h.connect_failed += 1,
            Fate::Closed { after, answered } => {
                h.answered += usize::from(answered);
                if after < Duration::from_secs(1) {
                    h.refused += 1;
                } else {
                    h.closed_after.push(after.as_secs_f64());
                }
            }
            Fate::OpenAtEnd => h.open_at_end += 1,
        }
    }
    let seen = sampler
        .await
        .map_err(|e| anyhow::anyhow!("the server-side sampler failed: {e}"))??;
    for (h, (peak, end)) in held.iter_mut().zip(seen) {
        (h.server_peak, h.server_end) = (peak, end);
    }
    for h in &held {
        h.check()?;
    }
    Ok(held)
}

/// The server side of each address set's connections (ESTABLISHED: accepted, or queued to
/// be): the most seen, sampled every 250 ms, and the count just before `until`.
async fn server_side(
    port: u16,
    sets: Vec<Vec<Ipv4Addr>>,
    until: Instant,
) -> anyhow::Result<Vec<(usize, usize)>> {
    let mut seen = vec![(0, 0); sets.len()];
    let last = until - Duration::from_millis(300);
    loop {
        let now = Instant::now();
        for (set, s) in sets.iter().zip(seen.iter_mut()) {
            let n = probe::established(port, |ip| set.contains(&ip))?;
            *s = (s.0.max(n), n);
        }
        if now >= last {
            return Ok(seen);
        }
        tokio::time::sleep_until((now + Duration::from_millis(250)).min(last)).await;
    }
}

async fn one(target: SocketAddr, ip: Ipv4Addr, how: How, until: Instant) -> Fate {
    let connected = async {
        let socket = TcpSocket::new_v4()?;
        socket.bind(SocketAddr::new(IpAddr::V4(ip), 0))?;
        socket.connect(target).await
    };
    let mut stream = match tokio::time::timeout(Duration::from_secs(5), connected).await {
        Ok(Ok(stream)) => stream,
        _ => return Fate::ConnectFailed,
    };
    let opened = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let (mut written, mut answered) = (0usize, false);
    let mut buf = [0u8; 1024];
    loop {
        tokio::select! {
            read = stream.read(&mut buf) => match read {
                Ok(0) | Err(_) => return Fate::Closed { after: opened.elapsed(), answered },
                Ok(_) => answered = true,
            },
            _ = tick.tick(), if matches!(how, How::Trickle(_)) => {
                let How::Trickle(prefix) = how else { continue };
                let byte = prefix.get(written).copied().unwrap_or(b'a');
                written += 1;
                if stream.write_all(&[byte]).await.is_err() {
                    return Fate::Closed { after: opened.elapsed(), answered };
                }
            }
            () = tokio::time::sleep_until(until) => return Fate::OpenAtEnd,
        }
    }
}

/// Connections that complete TLS and HTTP/2 to the agents' port (as an enrolling agent does,
/// answering the server's pings) and then send no request, held until `until`: how many
/// connected, and from the server's side, when each was closed.
pub async fn idle_h2(
    world: Arc<World>,
    addresses: Vec<Ipv4Addr>,
    per_address: usize,
    until: Instant,
) -> anyhow::Result<Held> {
    let mut held = Held {
        label: "TLS done, no request".into(),
        ..Held::default()
    };
    let channels: Arc<Mutex<Vec<tonic::transport::Channel>>> = Arc::default();
    let mut connecting = Vec::new();
    for &ip in &addresses {
        for _ in 0..per_address {
            let (world, channels) = (Arc::clone(&world), Arc::clone(&channels));
            connecting.push(tokio::spawn(async move {
                let channel = world.connect(IpAddr::V4(ip), None).await.ok()?;
                channels
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(channel);
                Some(Instant::now())
            }));
        }
    }
    let mut opened_at = Vec::new();
    for c in connecting {
        held.tried += 1;
        match c.await? {
            Some(at) => opened_at.push(at),
            None => held.connect_failed += 1,
        }
    }
    // Connected in a burst: times count from the median connection's.
    opened_at.sort();
    let opened = opened_at
        .get(opened_at.len() / 2)
        .copied()
        .unwrap_or_else(Instant::now);
    let port = world.agents.port();
    let ours = |ip: Ipv4Addr| addresses.contains(&ip);
    let mut open = opened_at.len();
    held.server_peak = probe::established(port, ours)?;
    while Instant::now() < until && open > 0 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = probe::established(port, ours)?;
        held.server_peak = held.server_peak.max(now);
        let now = now.min(open);
        for _ in now..open {
            held.closed_after.push(opened.elapsed().as_secs_f64());
        }
        open = now;
    }
    held.open_at_end = open;
    held.server_end = open;
    drop(channels);
    held.check()?;
    Ok(held)
}
