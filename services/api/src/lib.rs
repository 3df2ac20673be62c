//! The api role: authentication and authorization, validation, quota checks and recording
//! intent in the store. It never touches the runtime. It serves internal gRPC over mutual TLS to
//! the gateway and the access proxy.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use einsora_core::catalog::Catalog;
use einsora_runtime::grpc::{self, InternalTls};
use einsora_runtime::pki::{Role, RoleKind};
use einsora_runtime::settings::{ConfigError, Settings};
use einsora_runtime::shutdown::Shutdown;
use einsora_store::DatabaseUrl;
use tonic::service::Routes;

pub const ADDR: &str = "EINSORA_API_ADDR";
const DEFAULT_ADDR: &str = "127.0.0.1:8081";

#[derive(Debug, Clone)]
pub struct Config {
    pub addr: SocketAddr,
    pub database: DatabaseUrl,
    pub catalog: Arc<Catalog>,
    pub tls: InternalTls,
}

impl Config {
    pub fn from_settings(settings: &Settings) -> Result<Self, ConfigError> {
        Ok(Config {
            addr: settings.socket_addr(ADDR, DEFAULT_ADDR)?,
            database: DatabaseUrl::from_settings(settings)?,
            catalog: Arc::new(einsora_runtime::catalog::from_settings(settings)?),
            tls: InternalTls::from_settings(settings)?,
        })
    }
}

pub async fn run(cfg: Config, shutdown: Shutdown) -> anyhow::Result<()> {
    let store = einsora_store::open(&cfg.database).await?;
    let tls = cfg
        .tls
        .server(Role::Api, &[RoleKind::Gateway, RoleKind::Access])?;
    let listener = grpc::bind(ADDR, cfg.addr).await?;
    tracing::info!(addr = %cfg.addr, database = %cfg.database, classes = cfg.catalog.classes().len(), "api serving");
    grpc::serve(listener, tls, Routes::default(), shutdown)
        .await
        .context("api")?;
    drop(store);
    Ok(())
}
