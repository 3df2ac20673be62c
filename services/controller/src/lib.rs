//! The controller role: admission, placement, reconciling the store with the runtime through a
//! backend, for one region under its lease; hosts the agents' Sync.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use einsora_core::catalog::Catalog;
use einsora_core::region::Region;
use einsora_runtime::grpc::{self, InternalTls};
use einsora_runtime::pki::{Role, RoleKind};
use einsora_runtime::settings::{ConfigError, Settings};
use einsora_runtime::shutdown::Shutdown;
use einsora_store::DatabaseUrl;
use tonic::service::Routes;

pub const ADDR: &str = "EINSORA_CONTROLLER_ADDR";
pub const AGENT_ADDR: &str = "EINSORA_AGENT_ADDR";
pub const REGION: &str = "EINSORA_REGION";
pub const INTERVAL: &str = "EINSORA_CONTROLLER_INTERVAL";
pub const BACKEND: &str = "EINSORA_CLUSTER_BACKEND";

/// Where workloads run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// Node agents syncing over mutual TLS (the default of `einsora up`).
    Agent,
    /// In memory, for development and tests (the default of `einsora dev`).
    Fake,
    Kubernetes,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub addr: SocketAddr,
    pub agent_addr: SocketAddr,
    pub database: DatabaseUrl,
    pub catalog: Arc<Catalog>,
    pub region: Region,
    pub interval: Duration,
    pub backend: Backend,
    pub tls: InternalTls,
}

impl Config {
    pub fn from_settings(settings: &Settings) -> Result<Self, ConfigError> {
        let catalog = einsora_runtime::catalog::from_settings(settings)?;
        let default_region = catalog.default_region().as_str().to_owned();
        let region = settings.parse_with(REGION, &default_region, |name| {
            let region =
                Region::new(name).map_err(|e| format!("is not a valid region: {}", e.problem))?;
            if !catalog.has_region(&region) {
                return Err("is not a region of the catalog".to_owned());
            }
            Ok(region)
        })?;
        let backends = [
            ("agent", Backend::Agent),
            ("fake", Backend::Fake),
            ("kubernetes", Backend::Kubernetes),
        ];
        Ok(Config {
            addr: settings.socket_addr(ADDR, "127.0.0.1:8082")?,
            agent_addr: settings.socket_addr(AGENT_ADDR, "127.0.0.1:8443")?,
            database: DatabaseUrl::from_settings(settings)?,
            region,
            interval: positive(settings.duration(INTERVAL, "5s")?, INTERVAL)?,
            backend: settings.choice(BACKEND, &backends, "agent")?,
            tls: InternalTls::from_settings(settings)?,
            catalog: Arc::new(catalog),
        })
    }
}

fn positive(d: Duration, setting: &str) -> Result<Duration, ConfigError> {
    if d.is_zero() {
        return Err(ConfigError::new(setting, "must be longer than zero"));
    }
    Ok(d)
}

pub async fn run(cfg: Config, shutdown: Shutdown) -> anyhow::Result<()> {
    let store = einsora_store::open(&cfg.database).await?;
    let tls = cfg
        .tls
        .server(Role::Controller, &[RoleKind::Api, RoleKind::Access])?;
    let listener = grpc::bind(ADDR, cfg.addr).await?;
    tracing::info!(
        addr = %cfg.addr, region = %cfg.region, backend = ?cfg.backend, database = %cfg.database,
        "controller serving"
    );
    grpc::serve(listener, tls, Routes::default(), shutdown)
        .await
        .context("controller")?;
    drop(store);
    Ok(())
}
