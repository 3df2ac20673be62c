//! What the host sees of a workload: its container as the engine describes it, and its
//! processes, sockets, namespaces and cgroup as /proc and /sys show them.

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::process::Command;

use serde_json::Value;

use crate::harness::notebooks::containers;

/// The workload's one container.
pub fn container_of(id: &str) -> String {
    let mut all = containers(id);
    assert_eq!(all.len(), 1, "one container for {id}: {all:?}");
    all.pop().unwrap()
}

/// `docker inspect` of a container.
pub fn inspect(container: &str) -> Value {
    let out = Command::new("docker")
        .args(["inspect", container])
        .output()
        .unwrap();
    assert!(out.status.success(), "docker inspect {container}");
    let all: Value = serde_json::from_slice(&out.stdout).unwrap();
    all[0].clone()
}

/// The PID, on this machine, of the container's first process.
pub fn pid_of(container: &str) -> u32 {
    let pid = inspect(container)["State"]["Pid"].as_u64().unwrap();
    assert!(pid > 0, "{container} is running");
    u32::try_from(pid).unwrap()
}

pub use einsora_testkit::process::status_field;

/// The real uid of `pid` (`self` for this test).
pub fn uid_of(pid: &str) -> u32 {
    let uids = status_field(pid, "Uid").expect("a process's Uid");
    uids.split_whitespace().next().unwrap().parse().unwrap()
}

/// One socket of a /proc/<pid>/net table.
#[derive(Debug)]
pub struct Sock {
    pub local: std::net::IpAddr,
    pub port: u16,
    /// The kernel's state: 0A is TCP LISTEN; UDP sockets are 07 (unconnected) or 01.
    pub state: String,
    pub inode: u64,
}

/// The sockets of `/proc/<pid>/net/<table>` (`tcp`, `tcp6`, `udp`, `udp6`), in the network
/// namespace of `pid` (`self` for the host's, where this test runs).
pub fn sockets(pid: &str, table: &str) -> Vec<Sock> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap();
    text.lines()
        .skip(1)
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (addr, port) = fields[1].split_once(':').unwrap();
            Sock {
                local: address(addr),
                port: u16::from_str_radix(port, 16).unwrap(),
                state: fields[3].to_owned(),
                inode: fields[9].parse().unwrap(),
            }
        })
        .collect()
}

/// An address as /proc/net prints it: 32-bit words in hex, each in host (little-endian) order.
pub fn address(hex: &str) -> std::net::IpAddr {
    let bytes: Vec<u8> = hex
        .as_bytes()
        .chunks(8)
        .flat_map(|word| {
            let word = std::str::from_utf8(word).unwrap();
            u32::from_str_radix(word, 16).unwrap().to_le_bytes()
        })
        .collect();
    match bytes.len() {
        4 => Ipv4Addr::from(<[u8; 4]>::try_from(bytes).unwrap()).into(),
        16 => Ipv6Addr::from(<[u8; 16]>::try_from(bytes).unwrap()).into(),
        n => panic!("a {n}-byte address: {hex}"),
    }
}

pub fn is_loopback(ip: std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V4(v4) => v4.is_loopback(),
        std::net::IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// The sockets a process could be reached on: TCP listeners, and every bound UDP socket.
pub fn listening(pid: &str) -> Vec<Sock> {
    let mut all = Vec::new();
    for table in ["tcp", "tcp6"] {
        all.extend(sockets(pid, table).into_iter().filter(|s| s.state == "0A"));
    }
    for table in ["udp", "udp6"] {
        all.extend(sockets(pid, table));
    }
    all
}

/// Every process in the same network or PID namespace as `pid`.
pub fn sharing_namespaces_with(pid: u32) -> Vec<u32> {
    let ns = |p: &str, kind: &str| std::fs::read_link(format!("/proc/{p}/ns/{kind}")).ok();
    let (net, pids) = (ns(&pid.to_string(), "net"), ns(&pid.to_string(), "pid"));
    assert!(net.is_some() && pids.is_some(), "{pid}'s namespaces");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            let p = p.to_string();
            ns(&p, "net") == net || ns(&p, "pid") == pids
        })
        .collect()
}

/// The socket inodes the processes hold open.
pub fn socket_inodes(pids: &[u32]) -> BTreeSet<u64> {
    let mut inodes = BTreeSet::new();
    for pid in pids {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for fd in fds.filter_map(Result::ok) {
            let Ok(link) = std::fs::read_link(fd.path()) else {
                continue;
            };
            let link = link.to_string_lossy().into_owned();
            if let Some(inode) = link
                .strip_prefix("socket:[")
                .and_then(|l| l.strip_suffix(']'))
            {
                inodes.insert(inode.parse().unwrap());
            }
        }
    }
    inodes
}

/// The names of the network interfaces in `pid`'s namespace.
pub fn interfaces(pid: u32) -> Vec<String> {
    let dev = std::fs::read_to_string(format!("/proc/{pid}/net/dev")).unwrap();
    dev.lines()
        .skip(2)
        .filter_map(|l| l.split_once(':'))
        .map(|(name, _)| name.trim().to_owned())
        .collect()
}

/// The host's own non-loopback IPv4 addresses.
pub fn host_addresses() -> Vec<String> {
    let out = Command::new("ip")
        .args(["-4", "-o", "addr", "show", "scope", "global"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            l.split_whitespace()
                .nth(3)?
                .split('/')
                .next()
                .map(str::to_owned)
        })
        .collect()
}

/// The OOM kills counted in the memory cgroup of `pid` (cgroup v1 or v2).
pub fn oom_kills(pid: u32) -> u64 {
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let counter = cgroups.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        if controllers.split(',').any(|c| c == "memory") {
            Some(format!("/sys/fs/cgroup/memory{path}/memory.oom_control"))
        } else if controllers.is_empty() {
            Some(format!("/sys/fs/cgroup{path}/memory.events"))
        } else {
            None
        }
    });
    let counter = counter.expect("a memory cgroup");
    let text = std::fs::read_to_string(&counter).unwrap_or_else(|e| panic!("{counter}: {e}"));
    text.lines()
        .find_map(|l| l.strip_prefix("oom_kill "))
        .unwrap_or_else(|| panic!("no oom_kill in {counter}: {text}"))
        .trim()
        .parse()
        .unwrap()
}
