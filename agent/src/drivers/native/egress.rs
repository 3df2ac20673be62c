//! The linux-native driver's egress network (why, and the fence around it: local/fence.rs): a
//! bridge of the agent's own ([`BRIDGE`], the subnet's first address, no IPv6), and each owner's
//! notebook that gets egress in a network namespace of its own (`/run/netns/einsora-<hash>`,
//! made by root, so nothing inside can change it) holding one end of a veth pair, the other
//! end a port of the bridge isolated from its other ports (no traffic between workloads);
//! what leaves is masqueraded. IPv4 forwarding is turned on where it is off, as Docker and
//! libvirt do. A namespace outlives the agent with its workload (adopted) and is deleted when
//! the workload stops.

use std::fmt;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::controllers::Controllers;
use crate::drivers::local::fence::{self, EgressSetting, Fence, NftError};
use crate::inventory::command::run_tool;

/// The subnet of the bridge and the workloads' namespaces.
pub const SUBNET: &str = "EINSORA_NATIVE_EGRESS_SUBNET";
pub const DEFAULT_SUBNET: &str = "10.89.213.0/24";
/// The bridge on the host: what the rules match.
pub const BRIDGE: &str = "einsora-n0";
/// The nftables table holding the rules (family `inet`).
pub const TABLE: &str = "einsora_native_egress";
/// The host's ends of the workloads' veth pairs: `einsora-v<n>`, the workload's address the
/// subnet's `n + 2`th. The kernel's interface names are the allocation: two agents on one host
/// can't take the same.
const PORT_PREFIX: &str = "einsora-v";
/// Where `ip netns` keeps named namespaces (root's, on a tmpfs).
const NETNS_DIR: &str = "/run/netns";
const IP_LIMIT: Duration = Duration::from_secs(10);
/// Ports tried in a pass when another agent takes the one chosen meanwhile.
const TRIES: usize = 4;

/// An IPv4 subnet of the egress network, `/16` to `/28`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subnet {
    network: Ipv4Addr,
    prefix: u8,
}

impl Subnet {
    /// `text` as a subnet; what is wrong as a phrase that follows it (settings' errors).
    pub fn parse(text: &str) -> Result<Subnet, String> {
        let bad = || format!("is not an IPv4 subnet like {DEFAULT_SUBNET}");
        let (address, prefix) = text.trim().split_once('/').ok_or_else(bad)?;
        let network: Ipv4Addr = address.parse().map_err(|_| bad())?;
        let prefix: u8 = prefix.parse().map_err(|_| bad())?;
        if !(16..=28).contains(&prefix) {
            return Err("needs a prefix of /16 to /28".to_owned());
        }
        let host_bits = u32::MAX >> prefix;
        if u32::from(network) & host_bits != 0 {
            return Err(format!(
                "doesn't start at the first address of its /{prefix}"
            ));
        }
        Ok(Subnet { network, prefix })
    }
}

impl fmt::Display for Subnet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

impl Subnet {
    fn nth(self, n: u32) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.network) + n)
    }

    /// The bridge's address, the workloads' gateway.
    pub fn gateway(self) -> Ipv4Addr {
        self.nth(1)
    }

    /// How many workloads it holds: all but the network, the gateway and the broadcast.
    pub fn ports(self) -> u32 {
        (1u32 << (32 - self.prefix)) - 3
    }

    /// The address of the workload on port `n`, if the subnet holds it.
    pub fn address(self, n: u32) -> Option<Ipv4Addr> {
        (n < self.ports()).then(|| self.nth(n + 2))
    }
}

/// The name of a workload's network namespace: the agent's, not one its ID could choose.
pub fn netns_name(workload: &str) -> String {
    let hash = crate::models::hex(&Sha256::digest(workload.as_bytes()));
    format!("einsora-{}", &hash[..16])
}

fn netns_path(workload: &str) -> PathBuf {
    Path::new(NETNS_DIR).join(netns_name(workload))
}

#[derive(Debug, thiserror::Error)]
pub enum EgressError {
    #[error("{0}")]
    Tool(String),
    #[error("only a root agent can make its workloads' network namespaces")]
    NotRoot,
    #[error("{0} isn't installed")]
    Missing(&'static str),
    #[error(
        "{BRIDGE} exists and isn't a bridge the agent can use; remove it (ip link delete \
         {BRIDGE}) and the agent makes its own"
    )]
    ForeignBridge,
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
    #[error(transparent)]
    Nft(#[from] NftError),
    #[error("the egress subnet {0} has no address left")]
    Full(Subnet),
}

/// The driver's egress: its fence, and the workloads' namespaces.
#[derive(Debug)]
pub struct Egress {
    fence: Fence,
    subnet: Subnet,
}

impl Egress {
    pub fn new(setting: EgressSetting, controllers: Controllers, subnet: Subnet) -> Egress {
        Egress {
            fence: Fence::new(setting, controllers),
            subnet,
        }
    }

    /// The namespace a workload that `wants` egress runs in, if it gets egress: the fence is
    /// up (only a root agent can put it up). Not made here: see [`Egress::provide`].
    pub async fn netns(&mut self, workload: &str, wants: bool) -> Option<PathBuf> {
        let subnet = self.subnet;
        let put_up = |controller: Vec<std::net::IpAddr>| async move {
            if !rustix::process::geteuid().is_root() {
                return Err(EgressError::NotRoot);
            }
            put_up_bridge(subnet).await?;
            let rules = fence::rules(TABLE, BRIDGE, &controller, Some(&subnet.to_string()));
            fence::nft(&rules).await?;
            through_docker().await?;
            Ok::<(), EgressError>(())
        };
        self.fence
            .up(wants, BRIDGE, put_up)
            .await
            .then(|| netns_path(workload))
    }

    /// Makes the workload's namespace unless it is there whole (one half made, by an agent
    /// that stopped meanwhile or a step that failed, is made again).
    pub async fn provide(&self, workload: &str) -> Result<(), EgressError> {
        let name = netns_name(workload);
        if Path::new(NETNS_DIR).join(&name).exists() {
            let addresses = ["-n", &name, "-4", "-o", "address", "show", "dev", "eth0"];
            let routes = ["-n", &name, "route", "show", "default"];
            let whole = matches!(ip_output(&addresses).await, Ok(a) if a.contains(" inet "))
                && matches!(ip_output(&routes).await, Ok(r) if r.starts_with("default via"));
            if whole {
                return Ok(());
            }
            ip(&["netns", "delete", &name]).await?;
        }
        let mut last = EgressError::Full(self.subnet);
        for _ in 0..TRIES {
            let Some(n) = free_port(self.subnet)? else {
                return Err(EgressError::Full(self.subnet));
            };
            match make_netns(&name, n, self.subnet).await {
                Ok(()) => return Ok(()),
                Err(e) => {
                    let _ = ip(&["netns", "delete", &name]).await;
                    last = e;
                }
            }
        }
        Err(last)
    }

    /// Deletes the workload's namespace, if it has one (its veth pair goes with it).
    pub async fn release(&self, workload: &str) -> Result<(), EgressError> {
        if !netns_path(workload).exists() {
            return Ok(());
        }
        ip(&["netns", "delete", &netns_name(workload)]).await
    }
}

/// The bridge, up with the gateway's address and no IPv6, and forwarding on.
async fn put_up_bridge(subnet: Subnet) -> Result<(), EgressError> {
    let sys = Path::new("/sys/class/net").join(BRIDGE);
    if !sys.exists() {
        // Another agent may make it meanwhile: the one there then is checked like any.
        let made = ip(&["link", "add", BRIDGE, "type", "bridge"]).await;
        if made.is_err() && !sys.exists() {
            return made;
        }
    }
    if !sys.join("bridge").is_dir() {
        return Err(EgressError::ForeignBridge);
    }
    write_proc(
        &format!("/proc/sys/net/ipv6/conf/{BRIDGE}/disable_ipv6"),
        "1",
    )?;
    let gateway = format!("{}/{}", subnet.gateway(), subnet.prefix);
    ip(&["address", "replace", &gateway, "dev", BRIDGE]).await?;
    ip(&["link", "set", BRIDGE, "up"]).await?;
    let forward = "/proc/sys/net/ipv4/ip_forward";
    let on = std::fs::read_to_string(forward).map_err(|e| EgressError::Io(forward.into(), e))?;
    if on.trim() == "0" {
        write_proc(forward, "1")?;
        tracing::info!("IPv4 forwarding turned on, for the egress bridge");
    }
    Ok(())
}

/// Where a Docker engine manages iptables, its `FORWARD` policy drops what the bridge
/// forwards: the bridge's traffic out, and its replies in, are accepted first in the chain
/// Docker leaves to operators (`DOCKER-USER`), with iptables itself so Docker can still read
/// the table. The fence's own table runs first and has already dropped what it refuses (the
/// host, the controller, anything new coming in, Docker's bridges).
async fn through_docker() -> Result<(), EgressError> {
    async fn iptables(args: &[&str]) -> Result<Option<String>, EgressError> {
        tool("iptables", &[&["-w"], args].concat()).await
    }
    // No iptables, or no Docker chain in it: nothing of Docker's to pass.
    if !matches!(iptables(&["-n", "-L", "DOCKER-USER"]).await, Ok(Some(_))) {
        return Ok(());
    }
    let accepts: [&[&str]; 2] = [
        &["DOCKER-USER", "-i", BRIDGE, "-j", "ACCEPT"],
        &[
            "DOCKER-USER",
            "-o",
            BRIDGE,
            "-m",
            "conntrack",
            "--ctstate",
            "RELATED,ESTABLISHED",
            "-j",
            "ACCEPT",
        ],
    ];
    for rule in accepts {
        if iptables(&[&["-C"], rule].concat()).await.is_err() {
            iptables(&[&["-I"], rule].concat()).await?;
        }
    }
    Ok(())
}

/// The lowest port no interface of the host takes.
fn free_port(subnet: Subnet) -> Result<Option<u32>, EgressError> {
    let dir = "/sys/class/net";
    let taken: std::collections::BTreeSet<u32> = std::fs::read_dir(dir)
        .map_err(|e| EgressError::Io(dir.into(), e))?
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name();
            name.to_str()?.strip_prefix(PORT_PREFIX)?.parse().ok()
        })
        .collect();
    Ok((0..subnet.ports()).find(|n| !taken.contains(n)))
}

/// The namespace `name` with loopback and `eth0` (IPv4 only) on port `n` of the bridge.
async fn make_netns(name: &str, n: u32, subnet: Subnet) -> Result<(), EgressError> {
    let address = subnet.address(n).ok_or(EgressError::Full(subnet))?;
    let port = format!("{PORT_PREFIX}{n}");
    ip(&["netns", "add", name]).await?;
    // Before eth0 is there, so it starts with IPv6 off too.
    let path = Path::new(NETNS_DIR).join(name);
    no_ipv6_inside(&path).await?;
    let peer = ["link", "add", &port, "type", "veth", "peer", "name", "eth0"];
    ip(&[&peer[..], &["netns", name]].concat()).await?;
    ip(&["link", "set", &port, "master", BRIDGE]).await?;
    ip(&[
        "link",
        "set",
        &port,
        "type",
        "bridge_slave",
        "isolated",
        "on",
    ])
    .await?;
    ip(&["link", "set", &port, "up"]).await?;
    let cidr = format!("{address}/{}", subnet.prefix);
    let inside: [&[&str]; 4] = [
        &["address", "add", &cidr, "dev", "eth0"],
        &["link", "set", "lo", "up"],
        &["link", "set", "eth0", "up"],
        &[
            "route",
            "add",
            "default",
            "via",
            &subnet.gateway().to_string(),
        ],
    ];
    for args in inside {
        ip(&[&["-n", name][..], args].concat()).await?;
    }
    Ok(())
}

/// IPv6 off in the namespace at `path` (its `/proc/sys/net` is the namespace's own).
async fn no_ipv6_inside(path: &Path) -> Result<(), EgressError> {
    let script = "echo 1 >/proc/sys/net/ipv6/conf/all/disable_ipv6 && \
                  echo 1 >/proc/sys/net/ipv6/conf/default/disable_ipv6";
    let net = format!("--net={}", path.display());
    tool("/usr/bin/nsenter", &[&net, "--", "/bin/sh", "-c", script])
        .await?
        .ok_or(EgressError::Missing("nsenter (Debian: util-linux)"))
        .map(drop)
}

fn write_proc(path: &str, value: &str) -> Result<(), EgressError> {
    std::fs::write(path, value).map_err(|e| EgressError::Io(path.to_owned(), e))
}

async fn ip(args: &[&str]) -> Result<(), EgressError> {
    ip_output(args).await.map(drop)
}

/// What `ip args` prints.
async fn ip_output(args: &[&str]) -> Result<String, EgressError> {
    tool("ip", args)
        .await?
        .ok_or(EgressError::Missing("ip (Debian: iproute2)"))
}

/// What `program args` printed, within [`IP_LIMIT`]; `None` if it isn't installed.
async fn tool(program: &'static str, args: &[&str]) -> Result<Option<String>, EgressError> {
    let tool_error = |e: crate::inventory::InventoryError| EgressError::Tool(e.to_string());
    match run_tool(program, args, IP_LIMIT)
        .await
        .map_err(tool_error)?
    {
        None => Ok(None),
        Some(out) => out.success().map(Some).map_err(tool_error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subnet_is_an_aligned_ipv4_network_of_a_size_that_makes_sense() {
        let s = Subnet::parse(DEFAULT_SUBNET).unwrap();
        assert_eq!(s.to_string(), DEFAULT_SUBNET);
        assert_eq!(s.gateway(), Ipv4Addr::new(10, 89, 213, 1));
        assert_eq!(s.ports(), 253);
        assert_eq!(s.address(0), Some(Ipv4Addr::new(10, 89, 213, 2)));
        assert_eq!(s.address(252), Some(Ipv4Addr::new(10, 89, 213, 254)));
        assert_eq!(s.address(253), None, "the broadcast is no one's");
        for (bad, says) in [
            ("10.89.213.0", "not an IPv4 subnet"),
            ("10.89.213.7/24", "first address of its /24"),
            ("10.89.213.0/30", "/16 to /28"),
            ("10.0.0.0/8", "/16 to /28"),
            ("fd00::/64", "not an IPv4 subnet"),
        ] {
            let err = Subnet::parse(bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
        let small = Subnet::parse("192.168.7.16/28").unwrap();
        assert_eq!(small.ports(), 13);
        assert_eq!(small.address(12), Some(Ipv4Addr::new(192, 168, 7, 30)));
    }

    #[test]
    fn a_namespace_is_named_by_the_agent_whatever_the_workload_is_called() {
        let name = netns_name("../../etc/passwd");
        assert!(name.starts_with("einsora-") && name.len() == 24, "{name}");
        assert!(name[8..].chars().all(|c| c.is_ascii_hexdigit()), "{name}");
        assert_eq!(name, netns_name("../../etc/passwd"));
        assert_ne!(name, netns_name("another"));
        assert!(
            format!(
                "{PORT_PREFIX}{}",
                Subnet::parse("10.0.0.0/16").unwrap().ports()
            )
            .len()
                <= 15,
            "the kernel's names are at most 15 bytes"
        );
    }
}
