//! Outbound network for the machine owner's own notebooks (`pip install`, `git clone`, a
//! dataset), behind a fence both local drivers put up the same way: a bridge of the driver's
//! own, and an nftables table on the host that lets nothing connect in (not the host, the LAN,
//! another workload) and lets nothing out reach the host's own addresses (the control plane,
//! the agents' port, anything else listening there) or the controller this agent syncs with.
//! The rules are re-applied whenever such a workload starts and every [`REFRESH`] while one
//! runs, so a firewall reload lifts them for no longer.
//!
//! The controller asks for egress (`WorkloadSpec.egress`); the agent gives it only when the
//! fence is up. Where it can't be (not root, no `nft`, a bridge that isn't the agent's), or
//! `EINSORA_AGENT_EGRESS=off`, workloads get no network at all, said at WARN. The docker
//! driver's bridge is a Docker network's (docker/egress.rs); the linux-native driver's is its
//! own, with a network namespace per workload (native/egress.rs).

use std::fmt::Write as _;
use std::future::Future;
use std::net::IpAddr;
use std::process::Stdio;
use std::time::{Duration, Instant};

use einsora_runtime::settings::{ConfigError, Settings};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use crate::controllers::Controllers;

/// `auto` (egress where the fence can be put up) or `off` (never).
pub const EGRESS: &str = "EINSORA_AGENT_EGRESS";
/// How often the rules are put back while a workload with egress runs.
const REFRESH: Duration = Duration::from_secs(30);
const NFT_LIMIT: Duration = Duration::from_secs(10);
/// Docker's bridges: its default one, its user networks' and the docker driver's egress one.
const DOCKER_BRIDGES: &[&str] = &["docker0", "br-*", "einsora0"];

/// What the machine's owner allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EgressSetting {
    Auto,
    Off,
}

impl EgressSetting {
    pub fn from_settings(settings: &Settings) -> Result<EgressSetting, ConfigError> {
        settings.choice(
            EGRESS,
            &[("auto", EgressSetting::Auto), ("off", EgressSetting::Off)],
            "auto",
        )
    }
}

#[derive(Debug, thiserror::Error)]
pub enum NftError {
    #[error("`nft` isn't installed (Debian: nftables)")]
    NoNft,
    #[error("`nft` failed (the agent needs root or CAP_NET_ADMIN): {0}")]
    Failed(String),
}

/// The fence's state on this machine, for one driver.
#[derive(Debug)]
pub struct Fence {
    setting: EgressSetting,
    /// The region's controllers the agent syncs with: unreachable from inside.
    controllers: Controllers,
    /// When the rules were last put up, if they are.
    up_since: Option<Instant>,
    /// The last failure said at WARN, so it is said once until it changes.
    warned: Option<String>,
}

impl Fence {
    pub fn new(setting: EgressSetting, controllers: Controllers) -> Fence {
        Fence {
            setting,
            controllers,
            up_since: None,
            warned: None,
        }
    }

    /// Whether a workload that `wants` egress gets it: only where it is allowed and the fence
    /// is up, put up now by `put_up` (given the controllers' addresses) if it isn't or hasn't
    /// been for [`REFRESH`]. `bridge` names it in the log.
    pub async fn up<F, Fut, E>(&mut self, wants: bool, bridge: &str, put_up: F) -> bool
    where
        F: FnOnce(Vec<IpAddr>) -> Fut,
        Fut: Future<Output = Result<(), E>>,
        E: std::fmt::Display,
    {
        if !wants || self.setting == EgressSetting::Off {
            return false;
        }
        if self.up_since.is_some_and(|at| at.elapsed() < REFRESH) {
            return true;
        }
        // A name that doesn't resolve now is one the agent can't reach either.
        let mut controllers = Vec::new();
        for controller in self.controllers.all() {
            let lookup = tokio::net::lookup_host(controller.as_str());
            if let Ok(Ok(addrs)) = tokio::time::timeout(NFT_LIMIT, lookup).await {
                controllers.extend(addrs.map(|a| a.ip()));
            }
        }
        match put_up(controllers).await {
            Ok(()) => {
                if self.warned.take().is_some() || self.up_since.is_none() {
                    tracing::info!(bridge, "egress fence up");
                }
                self.up_since = Some(Instant::now());
                true
            }
            Err(e) => {
                self.up_since = None;
                let said = e.to_string();
                if self.warned.as_deref() != Some(said.as_str()) {
                    tracing::warn!(bridge, error = %said, "no outbound network for workloads: the egress fence can't be put up");
                    self.warned = Some(said);
                }
                false
            }
        }
    }
}

/// The fence around `bridge`, as the nftables table `table` (family `inet`), replacing any
/// earlier one in one transaction. The prerouting hook runs before any DNAT, so a port the
/// host publishes is one of its own addresses too. With `masquerade` (a subnet: the bridge is
/// the agent's own, not Docker's), what leaves it for anywhere but the bridge is masqueraded,
/// and nothing from it is forwarded onto Docker's bridges, whose isolation rules its traffic
/// would pass once accepted in `DOCKER-USER` (native/egress.rs).
pub fn rules(table: &str, bridge: &str, controller: &[IpAddr], masquerade: Option<&str>) -> String {
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
    let nat = masquerade.map_or_else(String::new, |subnet| {
        format!(
            "chain postrouting {{ type nat hook postrouting priority srcnat; policy accept;\n\
             ip saddr {subnet} oifname != \"{bridge}\" masquerade\n\
             }}\n"
        )
    });
    let off_docker = if masquerade.is_some() {
        DOCKER_BRIDGES
            .iter()
            .map(|docker| format!("iifname \"{bridge}\" oifname \"{docker}\" drop\n"))
            .collect()
    } else {
        String::new()
    };
    format!(
        "add table inet {table}\n\
         delete table inet {table}\n\
         table inet {table} {{\n\
         set controller4 {{ type ipv4_addr; {v4s}}}\n\
         set controller6 {{ type ipv6_addr; {v6s}}}\n\
         chain prerouting {{ type filter hook prerouting priority raw; policy accept;\n\
         iifname \"{bridge}\" fib daddr type {{ local, broadcast, multicast }} drop\n\
         iifname \"{bridge}\" ip daddr @controller4 drop\n\
         iifname \"{bridge}\" ip6 daddr @controller6 drop\n\
         }}\n\
         chain forward {{ type filter hook forward priority filter - 10; policy accept;\n\
         {off_docker}\
         oifname \"{bridge}\" ct state established,related accept\n\
         oifname \"{bridge}\" drop\n\
         }}\n\
         chain output {{ type filter hook output priority filter - 10; policy accept;\n\
         oifname \"{bridge}\" ct state established,related accept\n\
         oifname \"{bridge}\" drop\n\
         }}\n\
         {nat}\
         }}\n",
        v4s = elements(&v4),
        v6s = elements(&v6),
    )
}

/// `nft -f -` with `script` on its standard input.
pub async fn nft(script: &str) -> Result<(), NftError> {
    let mut child = Command::new("nft")
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => NftError::NoNft,
            _ => NftError::Failed(e.to_string()),
        })?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(script.as_bytes())
            .await
            .map_err(|e| NftError::Failed(e.to_string()))?;
    }
    let out = tokio::time::timeout(NFT_LIMIT, child.wait_with_output())
        .await
        .map_err(|_| NftError::Failed(format!("took longer than {NFT_LIMIT:?}")))?
        .map_err(|e| NftError::Failed(e.to_string()))?;
    if out.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&out.stderr);
    let first = said.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    Err(NftError::Failed(format!("{}: {first}", out.status)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rules_fence_the_bridge_and_name_the_controller() {
        let controller = ["192.0.2.7".parse().unwrap(), "2001:db8::1".parse().unwrap()];
        let script = rules("einsora_egress", "einsora0", &controller, None);
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
        assert!(!script.contains("masquerade"), "{script}");
        let none = rules("einsora_egress", "einsora0", &[], None);
        assert!(
            none.contains("set controller4 { type ipv4_addr; }"),
            "{none}"
        );
    }

    #[test]
    fn a_bridge_of_the_agents_own_is_masqueraded_out_and_fenced_the_same() {
        let script = rules("t", "einsora-n0", &[], Some("10.89.213.0/24"));
        assert!(script.contains("type nat hook postrouting priority srcnat"));
        assert!(
            script.contains("ip saddr 10.89.213.0/24 oifname != \"einsora-n0\" masquerade"),
            "{script}"
        );
        assert_eq!(
            script.matches("oifname \"einsora-n0\" drop").count(),
            2,
            "{script}"
        );
        assert!(script.trim_end().ends_with('}'), "{script}");
        for docker in ["docker0", "br-*", "einsora0"] {
            let off = format!("iifname \"einsora-n0\" oifname \"{docker}\" drop");
            assert!(script.contains(&off), "{script}");
        }
        let docker = rules("t", "einsora0", &[], None);
        assert!(!docker.contains("oifname \"docker0\""), "{docker}");
    }

    #[tokio::test]
    async fn the_fence_is_put_up_only_for_who_wants_it_where_allowed_and_then_kept() {
        let mut off = Fence::new(
            EgressSetting::Off,
            Controllers::joined("127.0.0.1:1".into()),
        );
        let never = |_| async { Err::<(), _>("must not be called") };
        assert!(!off.up(true, "b", never).await);
        let mut fence = Fence::new(
            EgressSetting::Auto,
            Controllers::joined("127.0.0.1:1".into()),
        );
        assert!(!fence.up(false, "b", never).await);
        let given = std::sync::Mutex::new(Vec::new());
        let put_up = |c: Vec<IpAddr>| {
            given.lock().unwrap().extend(c);
            async { Ok::<(), String>(()) }
        };
        assert!(fence.up(true, "b", put_up).await);
        assert_eq!(
            *given.lock().unwrap(),
            ["127.0.0.1".parse::<IpAddr>().unwrap()]
        );
        // Up, and not put up again within REFRESH.
        assert!(fence.up(true, "b", never).await);
        let mut broken = Fence::new(
            EgressSetting::Auto,
            Controllers::joined("127.0.0.1:1".into()),
        );
        assert!(!broken.up(true, "b", |_| async { Err("no nft") }).await);
    }
}
