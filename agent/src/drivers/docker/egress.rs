//! The docker driver's egress network (why, and the fence around it: local/fence.rs): a Docker
//! network of the agent's own (`einsora-egress`, bridge `einsora0`, no traffic between its
//! containers, masqueraded by Docker), fenced by the host's table `inet einsora_egress`.

use serde_json::{Value, json};

use super::engine::{Engine, EngineError};
use crate::drivers::local::fence::{self, Fence, NftError};

/// The Docker network egress containers join.
pub const NETWORK: &str = "einsora-egress";
/// Its bridge on the host: what the rules match.
pub const BRIDGE: &str = "einsora0";
/// The nftables table holding the rules (family `inet`).
pub const TABLE: &str = "einsora_egress";

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
    #[error(transparent)]
    Nft(#[from] NftError),
}

/// The network a workload gets: egress only if it wants it and the fence is up (put up now if
/// it isn't, or hasn't been for a while).
pub async fn network(fence: &mut Fence, engine: &Engine, wants_egress: bool) -> Network {
    let put_up = |controller: Vec<std::net::IpAddr>| async move {
        ensure_network(engine).await?;
        fence::nft(&fence::rules(TABLE, BRIDGE, &controller, None)).await?;
        Ok::<(), FenceError>(())
    };
    if fence.up(wants_egress, BRIDGE, put_up).await {
        Network::Egress
    } else {
        Network::None
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

#[cfg(test)]
mod tests {
    use super::*;

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
