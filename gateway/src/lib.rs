//! The gateway role: the public edge. The dashboard, the JSON `/v1` API derived from the
//! protos, request IDs and the error envelope; it talks to the api over gRPC.

use std::net::SocketAddr;

use einsora_runtime::settings::{ConfigError, Settings};
use einsora_runtime::shutdown::Shutdown;

pub const HTTP_ADDR: &str = "EINSORA_HTTP_ADDR";
pub const API_ADDR: &str = "EINSORA_API_ADDR";

#[derive(Debug, Clone)]
pub struct Config {
    pub http_addr: SocketAddr,
    pub api_addr: SocketAddr,
}

impl Config {
    pub fn from_settings(settings: &Settings) -> Result<Self, ConfigError> {
        Ok(Config {
            http_addr: settings.socket_addr(HTTP_ADDR, "127.0.0.1:8080")?,
            api_addr: settings.socket_addr(API_ADDR, "127.0.0.1:8081")?,
        })
    }
}

/// Runs until shutdown. The HTTP edge arrives with the public API (docs/architecture.md).
pub async fn run(cfg: Config, shutdown: Shutdown) -> anyhow::Result<()> {
    tracing::info!(http = %cfg.http_addr, api = %cfg.api_addr, "gateway configured");
    shutdown.cancelled().await;
    Ok(())
}
