//! Running one role in this process: every setting is validated before anything is bound or
//! written, then tracing, then the role until SIGINT or SIGTERM.

use std::future::Future;

use anyhow::{Context, bail};
use einsora_runtime::settings::{ConfigError, Settings};
use einsora_runtime::shutdown::Shutdown;
use einsora_runtime::telemetry::{self, TelemetryOptions};

use crate::up::SUPERVISOR_PID;

pub fn run<C, F>(
    settings: &Settings,
    name: &'static str,
    config: fn(&Settings) -> Result<C, ConfigError>,
    role: fn(C, Shutdown) -> F,
) -> anyhow::Result<()>
where
    F: Future<Output = anyhow::Result<()>>,
{
    let cfg = config(settings)?;
    follow_supervisor()?;
    telemetry::init(TelemetryOptions::for_role(settings, name)?)?;
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async {
        let shutdown = Shutdown::new();
        shutdown
            .on_signals()
            .context("listening for SIGINT and SIGTERM")?;
        role(cfg, shutdown).await
    })
}

/// Under `einsora up`, which names itself in the environment: on Linux, SIGTERM when the
/// supervisor dies without stopping this role (killed, say), so no role outlives it holding
/// its ports; and no start at all if the supervisor is already gone.
fn follow_supervisor() -> anyhow::Result<()> {
    let Some(supervisor) = std::env::var_os(SUPERVISOR_PID) else {
        return Ok(());
    };
    #[cfg(target_os = "linux")]
    rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::TERM))
        .context("asking to be stopped with the supervisor")?;
    let parent = rustix::process::getppid().map(|p| p.as_raw_pid().to_string());
    if parent.as_deref().map(std::ffi::OsStr::new) != Some(supervisor.as_os_str()) {
        bail!("the supervisor that started this role (PID {supervisor:?}) is gone");
    }
    Ok(())
}
