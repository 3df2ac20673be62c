//! The access role: the access proxy that opens a running notebook at its own origin
//! (`w-<id>.localhost`) with one-time tickets, and serves endpoints to API tokens.

use std::net::SocketAddr;

use einsora_runtime::settings::{ConfigError, Settings};
use einsora_runtime::shutdown::Shutdown;

pub const ADDR: &str = "EINSORA_ACCESS_ADDR";
pub const URL: &str = "EINSORA_ACCESS_URL";

#[derive(Debug, Clone)]
pub struct Config {
    pub addr: SocketAddr,
    /// What links are built from.
    pub public_url: String,
}

impl Config {
    pub fn from_settings(settings: &Settings) -> Result<Self, ConfigError> {
        Ok(Config {
            addr: settings.socket_addr(ADDR, "127.0.0.1:8090")?,
            public_url: settings.url(URL, &["http", "https"], "http://localhost:8090")?,
        })
    }
}

/// Runs until shutdown. The proxy itself arrives with the real workloads (docs/architecture.md).
pub async fn run(cfg: Config, shutdown: Shutdown) -> anyhow::Result<()> {
    tracing::info!(addr = %cfg.addr, public_url = %cfg.public_url, "access configured");
    shutdown.cancelled().await;
    Ok(())
}
