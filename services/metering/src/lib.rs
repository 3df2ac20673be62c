//! The metering role: turns lifecycle events into hourly usage records (never money).
//!
//! `accounting` says how long a timeline was metered in each hour, `records` turns that into
//! usage records and what must change in the stored ones, `meter` runs a pass over the store,
//! and `schedule` says when.

mod accounting;
mod clock;
mod meter;
mod records;
mod schedule;
#[cfg(test)]
mod test_support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use einsora_runtime::grpc::{self, InternalTls};
use einsora_runtime::pki::{Role, RoleKind};
use einsora_runtime::settings::{ConfigError, Settings};
use einsora_runtime::shutdown::Shutdown;
use einsora_store::DatabaseUrl;
use tonic::service::Routes;

pub use clock::{Clock, SystemClock};
pub use meter::{Meter, Pass, PassReport};
pub use schedule::run_passes;

pub const ADDR: &str = "EINSORA_METERING_ADDR";
pub const INTERVAL: &str = "EINSORA_METERING_INTERVAL";
const DEFAULT_ADDR: &str = "127.0.0.1:8083";

#[derive(Debug, Clone)]
pub struct Config {
    pub addr: SocketAddr,
    pub database: DatabaseUrl,
    pub tls: InternalTls,
    /// The longest time between sweeps, which keep running workloads' records current.
    pub interval: Duration,
}

impl Config {
    pub fn from_settings(settings: &Settings) -> Result<Self, ConfigError> {
        let interval = settings.duration(INTERVAL, "60s")?;
        if interval.is_zero() {
            return Err(ConfigError::new(INTERVAL, "must be longer than zero"));
        }
        Ok(Config {
            addr: settings.socket_addr(ADDR, DEFAULT_ADDR)?,
            database: DatabaseUrl::from_settings(settings)?,
            tls: InternalTls::from_settings(settings)?,
            interval,
        })
    }
}

pub async fn run(cfg: Config, shutdown: Shutdown) -> anyhow::Result<()> {
    let store = einsora_store::open(&cfg.database).await?;
    let tls = cfg
        .tls
        .server(Role::Metering, &[RoleKind::Api, RoleKind::Gateway])?;
    let listener = grpc::bind(ADDR, cfg.addr).await?;
    tracing::info!(
        addr = %cfg.addr, database = %cfg.database, interval = ?cfg.interval, "metering serving"
    );
    let accounting = shutdown.child();
    let meter = Meter::new(store);
    let accounting_loop = tokio::spawn(run_passes(
        meter,
        Arc::new(SystemClock),
        cfg.interval,
        accounting.clone(),
    ));
    let served = grpc::serve(listener, tls, Routes::default(), shutdown).await;
    accounting.trigger();
    accounting_loop.await.context("usage accounting")?;
    served.context("metering")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use einsora_runtime::settings::Settings;

    use super::{Config, INTERVAL};

    fn interval(value: &str) -> Result<Duration, String> {
        let settings = Settings::from_map([("HOME", "/home/solo"), (INTERVAL, value)]);
        Config::from_settings(&settings)
            .map(|c| c.interval)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn the_sweep_interval_is_a_positive_duration() {
        assert_eq!(
            interval(""),
            Ok(Duration::from_secs(60)),
            "unset: the default"
        );
        assert_eq!(interval("5m"), Ok(Duration::from_secs(300)));
        for bad in ["soon", "0s", "-1s"] {
            let err = interval(bad).unwrap_err();
            assert!(
                err.starts_with("EINSORA_METERING_INTERVAL: "),
                "{bad}: {err}"
            );
        }
    }
}
