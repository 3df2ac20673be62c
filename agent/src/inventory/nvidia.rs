//! NVIDIA GPUs, as `nvidia-smi` lists them.

use std::time::Duration;

use einsora_core::accelerator::AcceleratorKind;
use einsora_core::machine::Device;

use super::command::run_tool;
use super::error::InventoryError;

pub(crate) const NVIDIA_SMI: &str = "nvidia-smi";
/// One line per GPU: `GPU-<uuid>, <name>, <memory in MiB>, <MIG mode>`.
pub const QUERY: [&str; 2] = [
    "--query-gpu=uuid,name,memory.total,mig.mode.current",
    "--format=csv,noheader,nounits",
];
/// The MIG mode of a GPU partitioned into MIG instances.
const MIG_ENABLED: &str = "Enabled";
/// What `nvidia-smi` says (exiting unsuccessfully) on a machine whose driver sees no GPU.
const NO_DEVICES: &str = "No devices were found";
const MIB: u64 = 1 << 20;

/// The GPUs `nvidia-smi` lists: those offered whole, and those in MIG mode.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NvidiaGpus {
    pub devices: Vec<Device>,
    /// GPUs partitioned into MIG instances, by UUID: not given out whole (a workload given one
    /// couldn't use it as a GPU), and Einsora doesn't give out MIG instances yet.
    pub in_mig_mode: Vec<String>,
}

/// The machine's NVIDIA GPUs offered whole: none if `nvidia-smi` (`program`) isn't installed
/// or sees no GPU. GPUs in MIG mode are left out, and said so in the agent's log.
pub(crate) async fn nvidia_devices(
    program: &str,
    limit: Duration,
) -> Result<Vec<Device>, InventoryError> {
    let Some(out) = run_tool(program, &QUERY, limit).await? else {
        return Ok(Vec::new());
    };
    let says_no_devices = [&out.stdout, &out.stderr]
        .iter()
        .any(|s| s.trim() == NO_DEVICES);
    if !out.status.success() && says_no_devices {
        return Ok(Vec::new());
    }
    let gpus = parse_nvidia_smi(&out.success()?)?;
    if !gpus.in_mig_mode.is_empty() {
        tracing::info!(gpus = ?gpus.in_mig_mode, "GPUs in MIG mode aren't offered: Einsora doesn't give out MIG instances yet");
    }
    Ok(gpus.devices)
}

/// Parses the answer to `nvidia-smi --query-gpu=uuid,name,memory.total,mig.mode.current
/// --format=csv,noheader,nounits`. Blank lines are skipped; any other line that isn't a GPU
/// is an error naming it.
pub fn parse_nvidia_smi(output: &str) -> Result<NvidiaGpus, InventoryError> {
    let mut gpus = NvidiaGpus::default();
    if output.trim() == NO_DEVICES {
        return Ok(gpus);
    }
    let mut uuids: Vec<String> = Vec::new();
    for (index, line) in output.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = |problem: &str| InventoryError::bad_line(NVIDIA_SMI, index, line, problem);
        // The name sits between the first comma and the last two, should one hold a comma.
        let Some((uuid, (name, memory), mig)) = line.split_once(',').and_then(|(uuid, rest)| {
            let (rest, mig) = rest.rsplit_once(',')?;
            Some((uuid, rest.rsplit_once(',')?, mig))
        }) else {
            return Err(bad("expected `uuid, name, memory in MiB, MIG mode`"));
        };
        let (uuid, name, memory) = (uuid.trim(), name.trim(), memory.trim());
        if !uuid.starts_with("GPU-") || uuid.len() == "GPU-".len() {
            return Err(bad("the UUID is not GPU-…"));
        }
        if name.is_empty() {
            return Err(bad("the GPU has no name"));
        }
        let memory_bytes = memory
            .parse::<u64>()
            .ok()
            .and_then(|mib| mib.checked_mul(MIB))
            .filter(|&bytes| bytes > 0)
            .ok_or_else(|| bad("the memory is not a number of MiB"))?;
        if uuids.iter().any(|u| u == uuid) {
            return Err(bad("the UUID is listed twice"));
        }
        uuids.push(uuid.to_owned());
        let mig = mig.trim();
        // A bracketed value ("[N/A]", "[Not Supported]") is a GPU without MIG.
        let bracketed = mig.starts_with('[') && mig.ends_with(']');
        if !(bracketed || [MIG_ENABLED, "Disabled"].contains(&mig)) {
            return Err(bad("the MIG mode is not Enabled, Disabled or [N/A]"));
        }
        if mig == MIG_ENABLED {
            gpus.in_mig_mode.push(uuid.to_owned());
            continue;
        }
        gpus.devices.push(Device {
            vendor: AcceleratorKind::Nvidia,
            model: name.to_owned(),
            uuid: uuid.to_owned(),
            memory_bytes,
        });
    }
    Ok(gpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_of(output: &str) -> String {
        match parse_nvidia_smi(output) {
            Ok(devices) => panic!("{output:?} parsed as {devices:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn garbage_and_partial_lines_name_the_line() {
        let good =
            "GPU-4f6e1b2a-8c3d-4e5f-9a0b-1c2d3e4f5a6b, NVIDIA GeForce RTX 4090, 24564, [N/A]";
        let cases = [
            (
                "Failed to initialize NVML: Driver/library version mismatch",
                "expected",
            ),
            ("GPU-4f6e1b2a, NVIDIA GeForce RTX 4090, 24564", "expected"),
            ("GPU-4f6e1b2a, NVIDIA GeForce RTX 4090, [N/A], [N/A]", "MiB"),
            ("GPU-4f6e1b2a, , 24564, [N/A]", "no name"),
            ("4f6e1b2a, NVIDIA GeForce RTX 4090, 24564, [N/A]", "GPU-"),
            ("GPU-4f6e1b2a, NVIDIA GeForce RTX 4090, -1, [N/A]", "MiB"),
            ("GPU-4f6e1b2a, NVIDIA GeForce RTX 4090, 0, [N/A]", "MiB"),
            (
                "GPU-4f6e1b2a, NVIDIA GeForce RTX 4090, 24564, Maybe",
                "MIG mode",
            ),
        ];
        for (bad, problem) in cases {
            let err = error_of(&format!("{good}\n{bad}\n"));
            assert!(err.starts_with("nvidia-smi, line 2:"), "{err}");
            assert!(err.contains(problem), "{err}");
            assert!(err.contains(bad), "the error quotes the line: {err}");
        }
        let twice = error_of(&format!("{good}\n{good}\n"));
        assert!(
            twice.contains("line 2") && twice.contains("twice"),
            "{twice}"
        );
    }

    #[test]
    fn a_huge_memory_figure_is_refused_not_wrapped() {
        let err = error_of("GPU-1, NVIDIA H200, 99999999999999999, Disabled");
        assert!(err.contains("MiB"), "{err}");
    }

    #[test]
    fn a_gpu_without_mig_is_offered_whatever_nvidia_smi_calls_it() {
        let gpus = parse_nvidia_smi("GPU-1, NVIDIA L40S, 46068, [Not Supported]\n").unwrap();
        assert_eq!(gpus.devices.len(), 1);
        assert!(gpus.in_mig_mode.is_empty());
    }

    #[test]
    fn no_devices_and_blank_output_are_no_gpus() {
        for none in ["No devices were found\n", "", "\n  \n"] {
            assert_eq!(
                parse_nvidia_smi(none).unwrap(),
                NvidiaGpus::default(),
                "{none:?}"
            );
        }
    }
}
