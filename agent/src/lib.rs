//! The node agent: runs workloads on one machine through drivers, reports inventory and
//! status, and keeps the controller's Sync stream open over mutual TLS.

mod abort_on_drop;
pub mod controllers;
pub mod drivers;
mod identity;
pub mod inventory;
pub mod join;
pub mod models;
mod relay;
mod renew;
mod sync;

use std::path::PathBuf;

use einsora_runtime::settings::{ConfigError, Settings};
use einsora_runtime::shutdown::Shutdown;

/// The controllers' agent port this agent dials: one `host:port`, or the region's several,
/// separated by commas (`controllers.rs`).
pub const CONTROLLER: &str = "EINSORA_AGENT_CONTROLLER";
/// Where the agent keeps its machine ID, certificate and workload state.
pub const STATE_DIR: &str = einsora_core::run_dirs::STATE_DIR;
/// The longest the agent stays silent on its stream (the controller's offline threshold must
/// be well above it).
pub const HEARTBEAT: &str = "EINSORA_AGENT_HEARTBEAT";
/// How often the agent reads its inventory again (sent when it changed).
pub const INVENTORY_EVERY: &str = "EINSORA_AGENT_INVENTORY_EVERY";
/// How often a machine with GPUs samples how busy they are (at least a second: the
/// controller's rate for such reports).
pub const GPU_SAMPLE_EVERY: &str = "EINSORA_AGENT_GPU_SAMPLE_EVERY";
/// Offers the `sim` driver, which runs nothing: for development and tests only.
pub const SIM: &str = "EINSORA_AGENT_SIM";

#[derive(Debug, Clone)]
pub struct Config {
    /// Set only to override the controller the machine joined through.
    pub controllers: Option<controllers::Controllers>,
    pub state_dir: PathBuf,
    pub sim: bool,
    pub heartbeat: std::time::Duration,
    pub inventory_every: std::time::Duration,
    pub gpu_sample_every: std::time::Duration,
    /// `None` when the docker driver is turned off.
    pub docker: Option<drivers::docker::DockerConfig>,
    pub native: Option<drivers::native::NativeConfig>,
    pub macos: Option<drivers::native::NativeConfig>,
    pub libvirt: Option<drivers::libvirt::LibvirtConfig>,
    /// The tools its inventory reads run (EINSORA_NVIDIA_SMI).
    pub probe: inventory::Probe,
}

impl Config {
    pub fn from_settings(settings: &Settings) -> Result<Self, ConfigError> {
        let default_state = einsora_core::run_dirs::default_state_dir(&settings.data_dir()?);
        let state_dir = settings.path(STATE_DIR, &default_state)?;
        Ok(Config {
            docker: drivers::docker::DockerConfig::from_settings(settings, &state_dir)?,
            native: drivers::native::NativeConfig::from_settings(settings, &state_dir)?,
            macos: drivers::macos::config::from_settings(settings, &state_dir)?,
            libvirt: drivers::libvirt::LibvirtConfig::from_settings(settings, &state_dir)?,
            probe: inventory::Probe::from_settings(settings)?,
            controllers: settings
                .is_set(CONTROLLER)
                .then(|| settings.parse_with(CONTROLLER, "", controllers::Controllers::parse))
                .transpose()?,
            state_dir,
            sim: settings.choice(SIM, &[("true", true), ("false", false)], "false")?,
            heartbeat: settings.positive_duration(HEARTBEAT, "10s")?,
            inventory_every: settings.positive_duration(INVENTORY_EVERY, "60s")?,
            gpu_sample_every: match settings.duration(GPU_SAMPLE_EVERY, "15s")? {
                d if d < std::time::Duration::from_secs(1) => {
                    return Err(einsora_runtime::settings::ConfigError::new(
                        GPU_SAMPLE_EVERY,
                        "must be at least 1s",
                    ));
                }
                d => d,
            },
        })
    }
}

/// Syncs with its region's leading controller until shutdown: the controller it joined
/// through, unless EINSORA_AGENT_CONTROLLER names the region's controllers. Stops with an error once the machine is revoked.
pub async fn run(cfg: Config, shutdown: Shutdown) -> anyhow::Result<()> {
    // A panic outside a supervised driver task ends the agent, so its supervisor restarts it
    // (and adopts every running workload): never a machine online with a dead task.
    einsora_runtime::panics::exit_on_unsupervised_panic();
    let identity = identity::Identity::load(&cfg.state_dir)?;
    // One agent per machine, whatever the timing: held until this process ends.
    let _lock = lock_state_dir(&cfg.state_dir)?;
    let controllers = cfg
        .controllers
        .unwrap_or_else(|| controllers::Controllers::joined(identity.controller.clone()));
    tracing::info!(machine = %identity.machine_id, %controllers, "agent starting");
    let docker = cfg.docker.map(|docker| drivers::docker::DockerConfig {
        machine: identity.machine_id.clone(),
        controllers: controllers.clone(),
        ..docker
    });
    let native = cfg.native.map(|native| drivers::native::NativeConfig {
        controllers: controllers.clone(),
        ..native
    });
    let macos = cfg.macos.map(|macos| drivers::native::NativeConfig {
        controllers: controllers.clone(),
        ..macos
    });
    let libvirt = cfg.libvirt.map(|libvirt| drivers::libvirt::LibvirtConfig {
        machine: identity.machine_id.clone(),
        ..libvirt
    });
    let mut drivers =
        drivers::Drivers::start(&cfg.state_dir, docker, native, macos, libvirt, cfg.sim).await;
    let timing = sync::Timing {
        heartbeat: cfg.heartbeat,
        inventory_every: cfg.inventory_every,
        gpu_sample_every: cfg.gpu_sample_every,
    };
    let link = sync::Link {
        controllers: &controllers,
        timing,
        probe: &cfg.probe,
    };
    sync::run(&cfg.state_dir, &link, &mut drivers, &shutdown).await?;
    Ok(())
}

/// An OS lock on the state directory, so two agents never drive one machine's workloads.
fn lock_state_dir(dir: &std::path::Path) -> anyhow::Result<std::fs::File> {
    let path = dir.join(".agent.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => anyhow::bail!(
            "another agent already runs for this machine ({}): one agent per machine",
            dir.display()
        ),
        Err(std::fs::TryLockError::Error(e)) => anyhow::bail!("{}: {e}", path.display()),
    }
}
