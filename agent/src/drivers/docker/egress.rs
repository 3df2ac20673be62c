//! Outbound network for the machine owner's own notebooks (`pip install`, `git clone`, a
//! dataset), behind a fence: a Docker network of the agent's own (`einsora-egress`, bridge
//! `einsora0`, no traffic between its containers) and nftables rules on the host that let
//! nothing connect in (not the host, the LAN, another container) and let nothing out reach the
//! host's own addresses (the control plane, the agents' port, anything else listening there) or
//! the controller this agent syncs with. The rules are re-applied whenever such a container is
//! made and every [`REFRESH`] while one runs, so a firewall reload lifts them for no longer.
//!
//! The controller asks for egress (`WorkloadSpec.egress`); the agent gives it only when the
//! fence is up. Where it can't be (not root, no `nft`, a network of that name that isn't the
//! agent's), or `EINSORA_AGENT_EGRESS=off`, workloads get no network at all, said at WARN.

use std::fmt::Write as _;
use std::net::IpAddr;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use super::engine::{Engine, EngineError};

/// `auto` (egress where the fence can be put up) or `off` (never).
pub const EGRESS: &str = "EINSORA_AGENT_EGRESS";
/// The Docker network egress containers join.
pub const NETWORK: &str = "einsora-egress";
/// Its bridge on the host: what the rules match.
pub const BRIDGE: &str = "einsora0";
/// The nftables table holding the rules (family `inet`).
pub const TABLE: &str = "einsora_egress";
/// How often the rules are put back while an egress container runs.
const REFRESH: Duration = Duration::from_secs(30);
const NFT_LIMIT: Duration = Duration::from_secs(10);

/// What the machine's owner allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EgressSetting {
    Auto,
    Off,
}

/// A workload container's network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Network {
    /// Loopback only.
    None,
    /// [`NETWORK`], behind the fence.
    Egress,
}

impl Network {
    /// The container's `NetworkMode`.
    pub fn mode(self) -> &'static str {
        match self {
            Network::None => "none",
            Network::Egress => NETWORK,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FenceError {
    #[error("the Docker engine: {0}")]
    Engine(#[from] EngineError),
    #[error(
        "a network named {NETWORK} exists that the agent didn't make ({0}); remove it \
         (docker network rm {NETWORK}) and the agent makes its own"
    )]
    ForeignNetwork(String),
    #[error("`nft` isn't installed (Debian: nftables)")]
    NoNft,
    #[error("`nft` failed (the agent needs root or CAP_NET_ADMIN): {0}")]
    Nft(String),
}

/// The fence's state on this machine.
#[derive(Debug)]
pub struct Fence {
    setting: EgressSetting,
    /// The controller the agent syncs with (`host:port`): unreachable from inside.
    controller: String,
    /// When the rules were last put up, if they are.
    up_since: Option<Instant>,
    /// The last failure said at WARN, so it is said once until it changes.
    warned: Option<String>,
}

impl Fence {
    pub fn new(setting: EgressSetting, controller: String) -> Fence {
        Fence {
            setting,
            controller,
            up_since: None,
            warned: None,
        }
    }

    /// The network a workload gets: egress only if it wants it and the fence is up (put up
    /// now if it isn't, or hasn't been for [`REFRESH`]).
    pub async fn network(&mut self, engine: &Engine, wants_egress: bool) -> Network {
        if !wants_egress || self.setting == EgressSetting::Off {
            return Network::None;
        }
        if self.up_since.is_some_and(|at| at.elapsed() < REFRESH) {
            return Network::Egress;
        }
        match self.put_up(engine).await {
            Ok(()) => {
                if self.warned.take().is_some() || self.up_since.is_none() {
                    tracing::info!(network = NETWORK, "egress fence up");
                }
                self.up_since = Some(Instant::now());
                Network::Egress
            }
            Err(e) => {
                self.up_since = None;
                let said = e.to_string();
                if self.warned.as_deref() != Some(said.as_str()) {
                    tracing::warn!(error = %said, "no outbound network for workloads: the egress fence can't be put up");
                    self.warned = Some(said);
                }
                Network::None
            }
        }
    }

    async fn put_up(&self, engine: &Engine) -> Result<(), FenceError> {
        ensure_network(engine).await?;
        // A name that doesn't resolve now is one the agent can't reach either.
        let lookup = tokio::net::lookup_host(self.controller.as_str());
        let controller: Vec<IpAddr> = match tokio::time::timeout(NFT_LIMIT, lookup).await {
            Ok(Ok(addrs)) => addrs.map(|a| a.ip()).collect(),
            _ => Vec::new(),
        };
        nft(&rules(&controller)).await
    }
}

/// The network's create body: a bridge of a fixed name, its containers unable to reach each
/// other, masqueraded out, IPv4 only.
fn network_spec() -> Value {
    json!({
        "Name": NETWORK,
        "Driver": "bridge",
        "CheckDuplicate": true,
        "Internal": false,
        "EnableIPv6": false,
        "Options": {
            "com.docker.network.bridge.name": BRIDGE,
            "com.docker.network.bridge.enable_icc": "false",
            "com.docker.network.bridge.enable_ip_masquerade": "true",
        },
        "Labels": { "einsora.network": "egress" },
    })
}

/// Why an existing network isn't the agent's, if it isn't: the rules match its bridge's name,
/// so a network on another bridge would be unfenced.
fn foreign(network: &Value) -> Option<String> {
    let options = &network["Options"];
    let checks = [
        (network["Driver"] == "bridge", "not a bridge"),
        (network["Internal"] == false, "internal"),
        (
            options["com.docker.network.bridge.name"] == BRIDGE,
            "its bridge isn't einsora0",
        ),
        (
            options["com.docker.network.bridge.enable_icc"] == "false",
            "its containers can reach each other",
        ),
    ];
    checks
        .iter()
        .find(|(ok, _)| !ok)
        .map(|(_, why)| (*why).to_owned())
}

async fn ensure_network(engine: &Engine) -> Result<(), FenceError> {
    if engine.network(NETWORK).await?.is_none() {
        // Another agent on the same engine may make it meanwhile: the engine then answers 409
        // or, when the two raced past its name check to the bridge, 403. Either way the
        // network there now is checked below like any.
        if let Err(e) = engine.create_network(&network_spec()).await
            && engine.network(NETWORK).await?.is_none()
        {
            return Err(e.into());
        }
    }
    let network = engine
        .network(NETWORK)
        .await?
        .ok_or(FenceError::Engine(EngineError::NotFound))?;
    match foreign(&network) {
        Some(why) => Err(FenceError::ForeignNetwork(why)),
        None => Ok(()),
    }
}

/// The rules, replacing any earlier ones in one transaction. The prerouting hook runs before
/// any DNAT, so a port the host publishes is one of its own addresses too.
fn rules(controller: &[IpAddr]) -> String {
    let (mut v4, mut v6) = (String::new(), String::new());
    for ip in controller {
        let set = if ip.is_ipv4() { &mut v4 } else { &mut v6 };
        let _ = write!(set, "{}{ip}", if set.is_empty() { "" } else { ", " });
    }
    let elements = |list: &str| {
        if list.is_empty() {
            String::new()
        } else {
            format!("elements = {{ {list} }}; ")
        }
    };
    format!(
        "add table inet {TABLE}\n\
         delete table inet {TABLE}\n\
         table inet {TABLE} {{\n\
         set controller4 {{ type ipv4_addr; {v4s}}}\n\
         set controller6 {{ type ipv6_addr; {v6s}}}\n\
         chain prerouting {{ type filter hook prerouting priority raw; policy accept;\n\
         iifname \"{BRIDGE}\" fib daddr type {{ local, broadcast, multicast }} drop\n\
         iifname \"{BRIDGE}\" ip daddr @controller4 drop\n\
         iifname \"{BRIDGE}\" ip6 daddr @controller6 drop\n\
         }}\n\
         chain forward {{ type filter hook forward priority filter - 10; policy accept;\n\
         oifname \"{BRIDGE}\" ct state established,related accept\n\
         oifname \"{BRIDGE}\" drop\n\
         }}\n\
         chain output {{ type filter hook output priority filter - 10; policy accept;\n\
         oifname \"{BRIDGE}\" ct state established,related accept\n\
         oifname \"{BRIDGE}\" drop\n\
         }}\n\
         }}\n",
        v4s = elements(&v4),
        v6s = elements(&v6),
    )
}

/// `nft -f -` with `script` on its standard input.
async fn nft(script: &str) -> Result<(), FenceError> {
    let mut child = Command::new("nft")
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => FenceError::NoNft,
            _ => FenceError::Nft(e.to_string()),
        })?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(script.as_bytes())
            .await
            .map_err(|e| FenceError::Nft(e.to_string()))?;
    }
    let out = tokio::time::timeout(NFT_LIMIT, child.wait_with_output())
        .await
        .map_err(|_| FenceError::Nft(format!("took longer than {NFT_LIMIT:?}")))?
        .map_err(|e| FenceError::Nft(e.to_string()))?;
    if out.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&out.stderr);
    let first = said.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    Err(FenceError::Nft(format!("{}: {first}", out.status)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rules_fence_the_bridge_and_name_the_controller() {
        let script = rules(&["192.0.2.7".parse().unwrap(), "2001:db8::1".parse().unwrap()]);
        assert!(script.starts_with("add table inet einsora_egress\ndelete table"));
        assert!(script.contains("set controller4 { type ipv4_addr; elements = { 192.0.2.7 }; }"));
        assert!(script.contains("elements = { 2001:db8::1 }"));
        assert!(
            script.contains(
                "iifname \"einsora0\" fib daddr type { local, broadcast, multicast } drop"
            )
        );
        assert_eq!(
            script.matches("oifname \"einsora0\" drop").count(),
            2,
            "{script}"
        );
        let none = rules(&[]);
        assert!(
            none.contains("set controller4 { type ipv4_addr; }"),
            "{none}"
        );
    }

    #[test]
    fn only_the_agents_own_network_is_used() {
        let ours = network_spec();
        assert_eq!(foreign(&ours), None);
        let mut open = network_spec();
        open["Options"]["com.docker.network.bridge.enable_icc"] = json!("true");
        assert_eq!(
            foreign(&open).as_deref(),
            Some("its containers can reach each other")
        );
        let mut renamed = network_spec();
        renamed["Options"]["com.docker.network.bridge.name"] = json!("br-1234");
        assert_eq!(
            foreign(&renamed).as_deref(),
            Some("its bridge isn't einsora0")
        );
        assert_eq!(foreign(&json!({})).as_deref(), Some("not a bridge"));
    }
}
