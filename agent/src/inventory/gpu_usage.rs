//! How busy each NVIDIA GPU is, as `nvidia-smi` samples it: utilisation over its last sample
//! period and memory in use, read every few seconds (EINSORA_AGENT_GPU_SAMPLE_EVERY) on a
//! machine whose inventory lists GPUs, and sent to the controller for the machine's page and
//! each GPU workload's.

use std::time::Duration;

use einsora_core::machine::GpuSample;

use super::command::run_tool;
use super::error::InventoryError;
use super::nvidia::NVIDIA_SMI;

/// One line per GPU: `GPU-<uuid>, <utilisation %>, <memory used in MiB>`.
pub const QUERY: [&str; 2] = [
    "--query-gpu=uuid,utilization.gpu,memory.used",
    "--format=csv,noheader,nounits",
];
const MIB: u64 = 1 << 20;

/// The GPUs' use now, as `program` says; none when it isn't installed.
pub async fn sample(program: &str, limit: Duration) -> Result<Vec<GpuSample>, InventoryError> {
    let Some(out) = run_tool(program, &QUERY, limit).await? else {
        return Ok(Vec::new());
    };
    parse_gpu_usage(&out.success()?)
}

/// Parses the answer to [`QUERY`]. A GPU whose figures nvidia-smi can't give (`[N/A]`, as for
/// one in MIG mode, `[Not Supported]`) is left out; any other line that doesn't read is an
/// error naming it.
pub fn parse_gpu_usage(output: &str) -> Result<Vec<GpuSample>, InventoryError> {
    let mut samples: Vec<GpuSample> = Vec::new();
    for (index, line) in output.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = |problem: &str| InventoryError::bad_line(NVIDIA_SMI, index, line, problem);
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        let [uuid, utilization, memory] = fields[..] else {
            return Err(bad("expected `uuid, utilization %, memory used in MiB`"));
        };
        if !uuid.starts_with("GPU-") || uuid.len() == "GPU-".len() {
            return Err(bad("the UUID is not GPU-…"));
        }
        let unknown = |v: &str| v.starts_with('[') && v.ends_with(']');
        if unknown(utilization) || unknown(memory) {
            continue;
        }
        let utilization_percent = utilization
            .parse::<u32>()
            .ok()
            .filter(|p| *p <= 100)
            .ok_or_else(|| bad("the utilization is not 0 to 100"))?;
        let memory_used_bytes = memory
            .parse::<u64>()
            .ok()
            .and_then(|mib| mib.checked_mul(MIB))
            .ok_or_else(|| bad("the memory used is not a number of MiB"))?;
        if samples.iter().any(|s| s.uuid == uuid) {
            return Err(bad("the UUID is listed twice"));
        }
        samples.push(GpuSample {
            uuid: uuid.to_owned(),
            utilization_percent,
            memory_used_bytes,
        });
    }
    Ok(samples)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_gpu_reads_and_what_nvidia_smi_cant_say_is_left_out() {
        let out = "GPU-6c3c1e2a-9d0f-4a36-b0a2-5f1e8c7d9b10, 87, 20480\n\
                   GPU-0e8f4b7d-2c41-4f5a-8e9b-3a6d1c2b7f44, [N/A], [N/A]\n\n";
        assert_eq!(
            parse_gpu_usage(out).unwrap(),
            [GpuSample {
                uuid: "GPU-6c3c1e2a-9d0f-4a36-b0a2-5f1e8c7d9b10".into(),
                utilization_percent: 87,
                memory_used_bytes: 20480 << 20,
            }]
        );
        assert_eq!(parse_gpu_usage("").unwrap(), []);
        for bad in [
            "GPU-1, 101, 5",
            "GPU-1, -1, 5",
            "GPU-1, 5",
            "NVIDIA-1, 5, 5",
            "GPU-1, 5, lots",
            "GPU-1, 5, 5\nGPU-1, 6, 6",
        ] {
            assert!(parse_gpu_usage(bad).is_err(), "{bad:?}");
        }
    }
}
