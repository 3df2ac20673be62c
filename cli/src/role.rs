//! Running one role in this process: every setting is validated before anything is bound or
//! written, then tracing, its metrics port when `EINSORA_METRICS_ADDR` names one, then the role
//! until SIGINT or SIGTERM.

use std::future::Future;

use anyhow::{Context, bail};
use einsora_runtime::metrics::MetricsAddr;
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
    let metrics = MetricsAddr::from_settings(settings)?;
    let telemetry = TelemetryOptions::for_role(settings, name)?;
    follow_supervisor()?;
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    // The span exporter's connection lives on the runtime.
    let tracing = {
        let _entered = runtime.enter();
        telemetry::init(telemetry)?
    };
    raise_open_files();
    let ran = runtime.block_on(async {
        let shutdown = Shutdown::new();
        shutdown
            .on_signals()
            .context("listening for SIGINT and SIGTERM")?;
        if let Some(listener) = metrics.bind().await? {
            tokio::spawn(einsora_runtime::metrics::serve(listener, shutdown.clone()));
        }
        role(cfg, shutdown).await
    });
    tracing.flush();
    ran
}

/// Every connection a role holds is a file descriptor, and a soft limit of 1,024 (a common
/// default) would cap the agents' port far below the 10,000 machines it is sized for: the soft
/// limit is raised to the hard one, as Go's runtime does for its servers. The hard limit is the
/// operator's (systemd's `LimitNOFILE`, Docker's `--ulimit`); a failure leaves the soft one.
fn raise_open_files() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.current < limit.maximum {
        let raised = rustix::process::Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        };
        if let Err(e) = setrlimit(Resource::Nofile, raised) {
            tracing::warn!(error = %e, soft = ?limit.current, "couldn't raise the open-files limit");
        }
    }
    let now = getrlimit(Resource::Nofile).current;
    tracing::debug!(open_files = ?now, "open-files limit");
}

/// Under `einsora up`, which names itself in the environment: on Linux, SIGTERM when the
/// supervisor dies without stopping this role (killed, say), so no role outlives it holding
/// its ports; and no start at all if the supervisor is already gone.
fn follow_supervisor() -> anyhow::Result<()> {
    let settings = einsora_runtime::settings::Settings::from_env();
    if !settings.is_set(SUPERVISOR_PID) {
        return Ok(());
    }
    let supervisor = settings.string(SUPERVISOR_PID, "")?;
    #[cfg(target_os = "linux")]
    rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::TERM))
        .context("asking to be stopped with the supervisor")?;
    let parent = rustix::process::getppid().map(|p| p.as_raw_pid().to_string());
    if parent.as_deref() != Some(supervisor.as_str()) {
        bail!("the supervisor that started this role (PID {supervisor:?}) is gone");
    }
    Ok(())
}
