//! The node agent: runs workloads on one machine through drivers, reports inventory and
//! status, and keeps the controller's Sync stream open over mutual TLS.

pub mod drivers;
pub mod inventory;
pub mod join;

use std::path::PathBuf;

use einsora_runtime::settings::{ConfigError, Settings};
use einsora_runtime::shutdown::Shutdown;

/// The controller's agent port this agent dials.
pub const CONTROLLER: &str = "EINSORA_AGENT_CONTROLLER";
/// Where the agent keeps its machine ID, certificate and workload state.
pub const STATE_DIR: &str = "EINSORA_AGENT_STATE_DIR";

#[derive(Debug, Clone)]
pub struct Config {
    pub controller: String,
    pub state_dir: PathBuf,
}

impl Config {
    pub fn from_settings(settings: &Settings) -> Result<Self, ConfigError> {
        let default_state = settings.data_dir()?.join("agent");
        Ok(Config {
            controller: settings.parse_with(CONTROLLER, "127.0.0.1:8443", |v| {
                v.parse::<std::net::SocketAddr>()
                    .map(|_| v.to_owned())
                    .or_else(|_| match v.rsplit_once(':') {
                        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {
                            Ok(v.to_owned())
                        }
                        _ => Err("is not host:port".to_owned()),
                    })
            })?,
            state_dir: settings.path(STATE_DIR, &default_state)?,
        })
    }
}

/// Runs until shutdown. Sync and the drivers arrive with node agents (docs/architecture.md).
pub async fn run(cfg: Config, shutdown: Shutdown) -> anyhow::Result<()> {
    tracing::info!(controller = %cfg.controller, state_dir = %cfg.state_dir.display(), "agent configured");
    shutdown.cancelled().await;
    Ok(())
}
