//! The agent protocol's fixed vocabulary: what the controller asks a machine to do with a
//! workload, and the codes an agent reports back.

use crate::words::word_enum;

word_enum! {
    /// What a machine should do with a workload (computed from the store on every sync).
    pub enum Mode ("mode") {
        /// Provisioning or running.
        Run = "run",
        /// Stopped but kept: its disk and data stay.
        Park = "park",
        /// Deleting, or a stopped endpoint: remove it with everything it stored.
        Remove = "remove",
    }
}

word_enum! {
    /// A workload's status as an agent reports it. Agents never send free text: each code has
    /// one fixed reason for timelines (`reasons::Reason::Reported`).
    pub enum StatusCode ("status code") {
        Starting = "starting",
        PullingImage = "pulling_image",
        Ready = "ready",
        Stopping = "stopping",
        Stopped = "stopped",
        Removed = "removed",
        GpuBusy = "gpu_busy",
        OutOfMemory = "out_of_memory",
        Exited = "exited",
        StartFailed = "start_failed",
        ImageMissing = "image_missing",
        DriverMissing = "driver_missing",
        IsolationRefused = "isolation_refused",
        DiskMissing = "disk_missing",
        SandboxChanged = "sandbox_changed",
        ModelUnavailable = "model_unavailable",
        ModelRefused = "model_refused",
        ModelChecksumMismatch = "model_checksum_mismatch",
        ModelInvalid = "model_invalid",
        SocketTampered = "socket_tampered",
        DiskLow = "disk_low",
        DiskLimitUnavailable = "disk_limit_unavailable",
        GpuMissing = "gpu_missing",
        /// A VM's GPUs can't be passed through on its machine (VFIO: no IOMMU, an IOMMU group
        /// shared with another device, or a GPU the driver doesn't list).
        GpuPassthroughUnavailable = "gpu_passthrough_unavailable",
        /// A problem the agent has no code for. Not "status unknown", which is what the
        /// controller reads for an offline machine and which decides nothing.
        Other = "other",
    }
}

impl StatusCode {
    /// The timeline's words for this code.
    pub fn reason(self) -> &'static str {
        match self {
            StatusCode::Starting => "starting on its machine",
            StatusCode::PullingImage => "fetching its image on its machine",
            StatusCode::Ready => "ready",
            StatusCode::Stopping => "stopping on its machine",
            StatusCode::Stopped => "stopped on its machine",
            StatusCode::Removed => "removed from its machine",
            StatusCode::GpuBusy => "waiting for its machine's GPU to be free",
            StatusCode::OutOfMemory => "it ran out of memory",
            StatusCode::Exited => "it stopped by itself",
            StatusCode::StartFailed => "it couldn't start on its machine",
            StatusCode::ImageMissing => "its image isn't available on its machine",
            StatusCode::DriverMissing => "its machine has no driver that can run it",
            StatusCode::IsolationRefused => {
                "its machine refused it: the driver's isolation is too weak for it"
            }
            StatusCode::DiskMissing => "its disk is missing on its machine",
            StatusCode::SandboxChanged => {
                "its sandbox changed; start it again to run under the new one with its saved data"
            }
            StatusCode::ModelUnavailable => "its model couldn't be fetched onto its machine",
            StatusCode::ModelRefused => {
                "its machine refused its model: not in its models directory, too large, or holding \
                 what isn't served (pickled weights, code of its own)"
            }
            StatusCode::ModelChecksumMismatch => {
                "its model file doesn't match its SHA-256 checksum"
            }
            StatusCode::ModelInvalid => {
                "its model isn't valid (a GGUF file, or a safetensors model directory); nothing was served"
            }
            StatusCode::SocketTampered => {
                "its server's socket was replaced from inside the workload; nothing was connected \
                 to it"
            }
            StatusCode::DiskLow => {
                "its machine is low on disk space, so it wasn't started; free some space there or \
                 delete workloads, then start it again"
            }
            StatusCode::DiskLimitUnavailable => {
                "its machine can't give it a size-limited disk, so it wasn't started; the \
                 operator's log says why"
            }
            StatusCode::GpuMissing => {
                "a GPU it was given is no longer on its machine, so it wasn't started; start it \
                 again to be given one that is"
            }
            StatusCode::GpuPassthroughUnavailable => {
                "its machine can't pass its GPUs through to a VM (its IOMMU is off, or groups them \
                 with other devices), so it wasn't started; the operator's log says why"
            }
            StatusCode::Other => "its machine reported a problem",
        }
    }

    /// The workload failed and won't recover without being started again.
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            StatusCode::OutOfMemory
                | StatusCode::Exited
                | StatusCode::StartFailed
                | StatusCode::ImageMissing
                | StatusCode::DriverMissing
                | StatusCode::IsolationRefused
                | StatusCode::DiskMissing
                | StatusCode::SandboxChanged
                | StatusCode::ModelUnavailable
                | StatusCode::ModelRefused
                | StatusCode::ModelChecksumMismatch
                | StatusCode::ModelInvalid
                | StatusCode::SocketTampered
                | StatusCode::DiskLow
                | StatusCode::DiskLimitUnavailable
                | StatusCode::GpuMissing
                | StatusCode::GpuPassthroughUnavailable
                | StatusCode::Other
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_a_reason_and_round_trips() {
        for &code in StatusCode::ALL {
            assert!(!code.reason().is_empty());
            assert_eq!(code.as_str().parse::<StatusCode>(), Ok(code));
        }
    }
}
