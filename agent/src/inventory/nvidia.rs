//! NVIDIA GPUs, as `nvidia-smi` lists them.

use std::time::Duration;

use einsora_core::accelerator::AcceleratorKind;
use einsora_core::machine::Device;

use super::command::run_tool;
use super::error::InventoryError;

pub(crate) const NVIDIA_SMI: &str = "nvidia-smi";
/// One line per GPU: `GPU-<uuid>, <name>, <memory in MiB>`.
pub(crate) const QUERY: [&str; 2] = [
    "--query-gpu=uuid,name,memory.total",
    "--format=csv,noheader,nounits",
];
/// What `nvidia-smi` says (exiting unsuccessfully) on a machine whose driver sees no GPU.
const NO_DEVICES: &str = "No devices were found";
const MIB: u64 = 1 << 20;

/// The machine's NVIDIA GPUs: none if `nvidia-smi` isn't installed or sees no GPU.
pub(crate) async fn nvidia_devices(limit: Duration) -> Result<Vec<Device>, InventoryError> {
    let Some(out) = run_tool(NVIDIA_SMI, &QUERY, limit).await? else {
        return Ok(Vec::new());
    };
    let says_no_devices = [&out.stdout, &out.stderr]
        .iter()
        .any(|s| s.trim() == NO_DEVICES);
    if !out.status.success() && says_no_devices {
        return Ok(Vec::new());
    }
    parse_nvidia_smi(&out.success()?)
}

/// Parses the answer to `nvidia-smi --query-gpu=uuid,name,memory.total
/// --format=csv,noheader,nounits`. Blank lines are skipped; any other line that isn't a GPU
/// is an error naming it.
pub fn parse_nvidia_smi(output: &str) -> Result<Vec<Device>, InventoryError> {
    if output.trim() == NO_DEVICES {
        return Ok(Vec::new());
    }
    let mut devices: Vec<Device> = Vec::new();
    for (index, line) in output.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = |problem: &str| InventoryError::bad_line(NVIDIA_SMI, index, line, problem);
        // The name sits between the first and the last comma, should one ever hold a comma.
        let Some((uuid, (name, memory))) = line
            .split_once(',')
            .and_then(|(uuid, rest)| Some((uuid, rest.rsplit_once(',')?)))
        else {
            return Err(bad("expected `uuid, name, memory in MiB`"));
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
        if devices.iter().any(|d| d.uuid == uuid) {
            return Err(bad("the UUID is listed twice"));
        }
        devices.push(Device {
            vendor: AcceleratorKind::Nvidia,
            model: name.to_owned(),
            uuid: uuid.to_owned(),
            memory_bytes,
        });
    }
    Ok(devices)
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
        let good = "GPU-4f6e1b2a-8c3d-4e5f-9a0b-1c2d3e4f5a6b, NVIDIA GeForce RTX 4090, 24564";
        let cases = [
            (
                "Failed to initialize NVML: Driver/library version mismatch",
                "expected",
            ),
            ("GPU-4f6e1b2a, NVIDIA GeForce RTX 4090", "expected"),
            ("GPU-4f6e1b2a, NVIDIA GeForce RTX 4090, [N/A]", "MiB"),
            ("GPU-4f6e1b2a, , 24564", "no name"),
            ("4f6e1b2a, NVIDIA GeForce RTX 4090, 24564", "GPU-"),
            ("GPU-4f6e1b2a, NVIDIA GeForce RTX 4090, -1", "MiB"),
            ("GPU-4f6e1b2a, NVIDIA GeForce RTX 4090, 0", "MiB"),
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
        let err = error_of("GPU-1, NVIDIA H200, 99999999999999999");
        assert!(err.contains("MiB"), "{err}");
    }

    #[test]
    fn no_devices_and_blank_output_are_no_gpus() {
        assert_eq!(parse_nvidia_smi("No devices were found\n").unwrap(), []);
        assert_eq!(parse_nvidia_smi("").unwrap(), []);
        assert_eq!(parse_nvidia_smi("\n  \n").unwrap(), []);
    }
}
