//! What this machine has, as its agent reports it ([`Inventory`]): usable CPUs, memory,
//! accelerators (NVIDIA GPUs from `nvidia-smi`, the Apple GPU from `sysctl`), OS and arch, and
//! its hostname as a label only. The parsers are pure and tested on recorded outputs;
//! [`collect`] runs the tools and reads `/proc`, each tool with a time limit.

mod apple;
pub(crate) mod command;
mod error;
mod gpu_usage;
mod linux;
pub(crate) mod nvidia;

use std::io::ErrorKind;
use std::time::Duration;

pub use apple::{APPLE_GPU_ID, MacHardware, parse_cores, parse_sysctl};
pub use einsora_core::machine::Inventory;
pub use error::InventoryError;
pub use gpu_usage::{QUERY as GPU_USAGE_QUERY, parse_gpu_usage, sample as sample_gpu_usage};
pub use linux::{parse_cgroup_memory_max, parse_meminfo};
pub use nvidia::{NvidiaGpus, QUERY as NVIDIA_SMI_QUERY, parse_nvidia_smi};

use command::run_tool;

/// How long one inventory tool may take before it is killed and the inventory fails.
pub const TOOL_LIMIT: Duration = Duration::from_secs(10);
/// The `nvidia-smi` the agent runs: a path, or a name found on PATH.
pub const NVIDIA_SMI: &str = "EINSORA_NVIDIA_SMI";
/// The `sysctl` a Mac's agent runs.
pub const SYSCTL: &str = "EINSORA_MACOS_SYSCTL";

/// The tools an inventory read runs, and how long each may take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    pub nvidia_smi: String,
    pub sysctl: String,
    /// A Mac played on Linux by stand-ins (`EINSORA_MACOS_STANDIN`): read as a Mac.
    pub standin_mac: bool,
    pub limit: Duration,
}

impl Default for Probe {
    fn default() -> Self {
        Probe {
            nvidia_smi: nvidia::NVIDIA_SMI.to_owned(),
            sysctl: apple::SYSCTL.to_owned(),
            standin_mac: false,
            limit: TOOL_LIMIT,
        }
    }
}

impl Probe {
    pub fn from_settings(
        settings: &einsora_runtime::settings::Settings,
    ) -> Result<Self, einsora_runtime::settings::ConfigError> {
        Ok(Probe {
            nvidia_smi: settings.string(NVIDIA_SMI, nvidia::NVIDIA_SMI)?,
            sysctl: settings.string(SYSCTL, apple::SYSCTL)?,
            standin_mac: crate::drivers::macos::config::standin(settings)?,
            ..Probe::default()
        })
    }
}

/// This machine's inventory, read with `probe`'s tools. A missing `nvidia-smi` means no
/// NVIDIA GPUs; one that fails, hangs or answers garbage is an error, never a silently smaller
/// machine.
pub async fn collect(probe: &Probe) -> Result<Inventory, InventoryError> {
    match std::env::consts::OS {
        _ if probe.standin_mac => collect_mac(probe).await,
        "linux" => collect_linux(probe).await,
        "macos" => collect_mac(probe).await,
        other => Err(InventoryError::UnsupportedOs(other)),
    }
}

async fn collect_linux(probe: &Probe) -> Result<Inventory, InventoryError> {
    Ok(Inventory {
        hostname: linux::hostname().await?,
        os: std::env::consts::OS.to_owned(),
        arch: std::env::consts::ARCH.to_owned(),
        cpus: usable_cpus()?,
        memory_bytes: linux::memory_bytes().await?,
        devices: nvidia::nvidia_devices(&probe.nvidia_smi, probe.limit).await?,
        cores: None,
    })
}

async fn collect_mac(probe: &Probe) -> Result<Inventory, InventoryError> {
    let Some(out) = run_tool(&probe.sysctl, &apple::KEYS, probe.limit).await? else {
        return Err(InventoryError::Spawn {
            command: probe.sysctl.clone(),
            cause: ErrorKind::NotFound.into(),
        });
    };
    let mac = parse_sysctl(&out.success()?)?;
    // Asked apart: an Intel Mac has no such keys, and its sysctl fails on them.
    // Shown, never placed on: an answer that doesn't read leaves them out, said at WARN.
    let cores = match run_tool(&probe.sysctl, &apple::CORE_KEYS, probe.limit).await {
        Ok(Some(out)) if out.status.success() => apple::parse_cores(&out.stdout, mac.cpus)
            .unwrap_or_else(|e| {
                tracing::warn!(error = %e, "this Mac's cores by kind are left out");
                None
            }),
        _ => None,
    };
    Ok(Inventory {
        os: "macos".to_owned(),
        arch: std::env::consts::ARCH.to_owned(),
        cpus: mac.cpus,
        memory_bytes: mac.memory_bytes,
        devices: mac.apple_gpu().into_iter().collect(),
        hostname: mac.hostname,
        cores,
    })
}

/// CPUs this process may run on: its affinity mask and cgroup quota count, not just the
/// machine's cores.
fn usable_cpus() -> Result<u32, InventoryError> {
    let count = std::thread::available_parallelism().map_err(InventoryError::Cpus)?;
    Ok(u32::try_from(count.get()).unwrap_or(u32::MAX))
}
