//! The metering role: turns lifecycle events into hourly usage records (never money).

use std::net::SocketAddr;

use anyhow::Context;
use einsora_runtime::grpc::{self, InternalTls};
use einsora_runtime::pki::{Role, RoleKind};
use einsora_runtime::settings::{ConfigError, Settings};
use einsora_runtime::shutdown::Shutdown;
use einsora_store::DatabaseUrl;
use tonic::service::Routes;

pub const ADDR: &str = "EINSORA_METERING_ADDR";
const DEFAULT_ADDR: &str = "127.0.0.1:8083";

#[derive(Debug, Clone)]
pub struct Config {
    pub addr: SocketAddr,
    pub database: DatabaseUrl,
    pub tls: InternalTls,
}

impl Config {
    pub fn from_settings(settings: &Settings) -> Result<Self, ConfigError> {
        Ok(Config {
            addr: settings.socket_addr(ADDR, DEFAULT_ADDR)?,
            database: DatabaseUrl::from_settings(settings)?,
            tls: InternalTls::from_settings(settings)?,
        })
    }
}

pub async fn run(cfg: Config, shutdown: Shutdown) -> anyhow::Result<()> {
    let store = einsora_store::open(&cfg.database).await?;
    let tls = cfg
        .tls
        .server(Role::Metering, &[RoleKind::Api, RoleKind::Gateway])?;
    let listener = grpc::bind(ADDR, cfg.addr).await?;
    tracing::info!(addr = %cfg.addr, database = %cfg.database, "metering serving");
    grpc::serve(listener, tls, Routes::default(), shutdown)
        .await
        .context("metering")?;
    drop(store);
    Ok(())
}
