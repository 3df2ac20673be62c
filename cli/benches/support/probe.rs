//! What the benches read of a process and of the host from /proc: CPU time (utime + stime of
//! `/proc/<pid>/stat`, over wall time), `VmRSS`, the host's busy time (`/proc/stat`), a
//! process's children, and the TCP connections a server port holds (`/proc/net/tcp`).

use std::net::Ipv4Addr;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::Context;

/// Clock ticks per second (`getconf CLK_TCK`; 100 if that can't be asked).
fn clock_ticks() -> f64 {
    static TICKS: OnceLock<f64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .filter(|t: &f64| *t > 0.0)
            .unwrap_or(100.0)
    })
}

/// The process's user + system time so far, in ticks.
fn ticks(pid: u32) -> anyhow::Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("process {pid} is gone"))?;
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let field = |i: usize| -> anyhow::Result<u64> {
        fields
            .get(i)
            .and_then(|v| v.parse().ok())
            .with_context(|| format!("/proc/{pid}/stat has no field {i}"))
    };
    // After the command's closing parenthesis: state is 0, utime 11, stime 12.
    Ok(field(11)? + field(12)?)
}

/// The process's user + system time so far, in seconds.
pub fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    Ok(ticks(pid)? as f64 / clock_ticks())
}

/// The processes whose parent is `parent`.
pub fn children_of(parent: u32) -> Vec<u32> {
    let children = einsora_testkit::process::children_of(parent);
    children.into_iter().map(|p| p.pid).collect()
}

/// The host's busy and total ticks, all cores.
fn host_ticks() -> anyhow::Result<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat")?;
    let cpu = stat.lines().next().context("/proc/stat is empty")?;
    let values: Vec<u64> = cpu
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    anyhow::ensure!(values.len() >= 5, "/proc/stat: {cpu}");
    let total: u64 = values.iter().sum();
    // idle and iowait
    let idle = values[3] + values[4];
    Ok((total - idle, total))
}

/// The process's resident memory, KiB.
pub fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("process {pid} is gone"))?;
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("no VmRSS for {pid}"))
}

/// CPU over a span: the process's, in % of one core, and the host's, in % of all its cores.
#[derive(Debug, Clone, Copy, Default)]
pub struct Usage {
    pub process: f64,
    pub host: f64,
}

/// Started at one moment, read at another.
pub struct Meter {
    pid: u32,
    ticks: u64,
    host: (u64, u64),
    at: Instant,
}

impl Meter {
    pub fn start(pid: u32) -> anyhow::Result<Meter> {
        Ok(Meter {
            pid,
            ticks: ticks(pid)?,
            host: host_ticks()?,
            at: Instant::now(),
        })
    }

    pub fn read(&self) -> anyhow::Result<Usage> {
        let used = ticks(self.pid)?.saturating_sub(self.ticks) as f64 / clock_ticks();
        let wall = self.at.elapsed().as_secs_f64().max(1e-3);
        let (busy, total) = host_ticks()?;
        let host_total = total.saturating_sub(self.host.1).max(1) as f64;
        let host_busy = busy.saturating_sub(self.host.0) as f64;
        Ok(Usage {
            process: used / wall * 100.0,
            host: host_busy / host_total * 100.0,
        })
    }
}

/// The process's CPU over `span` from now.
pub async fn usage_over(pid: u32, span: Duration) -> anyhow::Result<Usage> {
    let meter = Meter::start(pid)?;
    tokio::time::sleep(span).await;
    meter.read()
}

/// The largest `VmRSS` seen every 200 ms until `until`.
pub async fn peak_rss(pid: u32, until: tokio::time::Instant) -> anyhow::Result<u64> {
    let mut peak = rss_kib(pid)?;
    while tokio::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(200)).await;
        peak = peak.max(rss_kib(pid)?);
    }
    Ok(peak)
}

/// Connections in ESTABLISHED state whose local port is `port` (the server's side of them,
/// accepted or still in the listen backlog) and whose peer address `from` accepts. The table
/// is read in pieces while sockets come and go, so a line may be read twice: each connection
/// counts once.
pub fn established(port: u16, from: impl Fn(Ipv4Addr) -> bool) -> anyhow::Result<usize> {
    let table = std::fs::read_to_string("/proc/net/tcp")?;
    let mut seen = std::collections::HashSet::new();
    for line in table.lines().skip(1) {
        let mut fields = line.split_whitespace().skip(1);
        let (Some(local), Some(remote), Some(state)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        if state != "01" {
            continue;
        }
        let (Some(local_port), Some(remote_ip)) = (hex_port(local), hex_ip(remote)) else {
            continue;
        };
        if local_port == port && from(remote_ip) {
            seen.insert(remote.to_owned());
        }
    }
    Ok(seen.len())
}

fn hex_port(field: &str) -> Option<u16> {
    u16::from_str_radix(field.split_once(':')?.1, 16).ok()
}

/// `/proc/net/tcp` prints the address as the native-endian u32 of its network-order bytes.
fn hex_ip(field: &str) -> Option<Ipv4Addr> {
    let raw = u32::from_str_radix(field.split_once(':')?.0, 16).ok()?;
    Some(Ipv4Addr::from(raw.to_ne_bytes()))
}
