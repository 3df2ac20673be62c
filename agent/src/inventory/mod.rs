//! What this machine has, as its agent reports it ([`Inventory`]): usable CPUs, memory,
//! accelerators (NVIDIA GPUs from `nvidia-smi`, the Apple GPU from `sysctl`), OS and arch, and
//! its hostname as a label only. The parsers are pure and tested on recorded outputs;
//! [`collect`] runs the tools and reads `/proc`, each tool with a time limit.

mod apple;
mod command;
mod error;
mod linux;
mod nvidia;

use std::io::ErrorKind;
use std::time::Duration;

pub use apple::{APPLE_GPU_ID, MacHardware, parse_sysctl};
pub use einsora_core::machine::Inventory;
pub use error::InventoryError;
pub use linux::{parse_cgroup_memory_max, parse_meminfo};
pub use nvidia::parse_nvidia_smi;

use command::run_tool;

/// How long one inventory tool may take before it is killed and the inventory fails.
pub const TOOL_LIMIT: Duration = Duration::from_secs(10);

/// This machine's inventory, each tool given [`TOOL_LIMIT`].
pub async fn collect() -> Result<Inventory, InventoryError> {
    collect_within(TOOL_LIMIT).await
}

/// This machine's inventory, each tool given `limit`. A missing `nvidia-smi` means no NVIDIA
/// GPUs; one that fails, hangs or answers garbage is an error, never a silently smaller
/// machine.
pub async fn collect_within(limit: Duration) -> Result<Inventory, InventoryError> {
    match std::env::consts::OS {
        "linux" => collect_linux(limit).await,
        "macos" => collect_mac(limit).await,
        other => Err(InventoryError::UnsupportedOs(other)),
    }
}

async fn collect_linux(limit: Duration) -> Result<Inventory, InventoryError> {
    Ok(Inventory {
        hostname: linux::hostname().await?,
        os: std::env::consts::OS.to_owned(),
        arch: std::env::consts::ARCH.to_owned(),
        cpus: usable_cpus()?,
        memory_bytes: linux::memory_bytes().await?,
        devices: nvidia::nvidia_devices(limit).await?,
    })
}

async fn collect_mac(limit: Duration) -> Result<Inventory, InventoryError> {
    let Some(out) = run_tool(apple::SYSCTL, &apple::KEYS, limit).await? else {
        return Err(InventoryError::Spawn {
            command: apple::SYSCTL.to_owned(),
            cause: ErrorKind::NotFound.into(),
        });
    };
    let mac = parse_sysctl(&out.success()?)?;
    Ok(Inventory {
        os: std::env::consts::OS.to_owned(),
        arch: std::env::consts::ARCH.to_owned(),
        cpus: mac.cpus,
        memory_bytes: mac.memory_bytes,
        devices: mac.apple_gpu().into_iter().collect(),
        hostname: mac.hostname,
    })
}

/// CPUs this process may run on: its affinity mask and cgroup quota count, not just the
/// machine's cores.
fn usable_cpus() -> Result<u32, InventoryError> {
    let count = std::thread::available_parallelism().map_err(InventoryError::Cpus)?;
    Ok(u32::try_from(count.get()).unwrap_or(u32::MAX))
}
