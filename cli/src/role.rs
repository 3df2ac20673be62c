//! Running one role in this process: every setting is validated before anything is bound or
//! written, then tracing, then the role until SIGINT or SIGTERM.

use std::future::Future;

use anyhow::Context;
use einsora_runtime::settings::{ConfigError, Settings};
use einsora_runtime::shutdown::Shutdown;
use einsora_runtime::telemetry::{self, TelemetryOptions};

pub fn run<C, F>(
    settings: &Settings,
    config: fn(&Settings) -> Result<C, ConfigError>,
    role: fn(C, Shutdown) -> F,
) -> anyhow::Result<()>
where
    F: Future<Output = anyhow::Result<()>>,
{
    let cfg = config(settings)?;
    telemetry::init(TelemetryOptions::from_settings(settings, None)?)?;
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async {
        let shutdown = Shutdown::new();
        shutdown
            .on_signals()
            .context("listening for SIGINT and SIGTERM")?;
        role(cfg, shutdown).await
    })
}
