//! What the drivers that run workloads on this machine itself (`docker`, `linux-native`) share:
//! a workload's places under the agent's state directory and its disk, the records an agent
//! restart reads again, its endpoint's model, the contract its server is started with (the same
//! paths, arguments and environment in a container and in a native sandbox), and the readiness
//! probe on its socket.

pub mod contract;
pub mod dirs;
pub mod disk;
pub mod fence;
pub mod model;
pub mod output;
pub mod prepare;
pub mod probe;
pub mod records;
pub mod uds;

pub use disk::{DiskConfig, FLOOR as DISK_FLOOR, LIMITS as DISK_LIMITS, LOG_LIMIT};

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use einsora_core::agent::{Mode, StatusCode};
use einsora_proto::convert::PlacedSpec;

/// What the controller wants of one workload on a local driver.
#[derive(Debug, Clone, PartialEq)]
pub struct Wanted {
    pub workload: String,
    /// A device it was given isn't among the machine's GPUs: not started (`gpu_missing`).
    pub gpus_missing: bool,
    pub attempt: u32,
    pub mode: Mode,
    pub spec: PlacedSpec,
    /// Where the store has its output up to, as the desired state said.
    pub output: Option<einsora_core::output::OutputResume>,
    /// The sync stream that desired state came on (each new one counts up): a driver reads its
    /// output from the store's head again on a new one (local/output.rs).
    pub stream: u64,
}

impl Wanted {
    /// What its server serves, from its places: an endpoint its model (a file or a directory,
    /// as its runtime's server takes it), a notebook its files.
    pub fn serves(&self, places: &dirs::Places) -> contract::Serves {
        use contract::{ModelServer, Serves};
        match &self.spec.params {
            Some(einsora_proto::convert::WorkloadParams::Endpoint {
                slots, served_name, ..
            }) => {
                let server = ModelServer::of_runtime(&self.spec.runtime);
                Serves::Endpoint {
                    model: places.model.join(server.model_name()),
                    // The name the one base URL routes by, so the engine's own /v1/models
                    // says the same.
                    alias: served_name.clone(),
                    server,
                    slots: *slots,
                }
            }
            _ => Serves::Notebook {
                data: places.data.clone(),
            },
        }
    }
}

/// One workload's status, as last seen.
#[derive(Clone, PartialEq, Eq)]
pub struct Seen {
    pub attempt: u32,
    pub mode: Mode,
    pub code: StatusCode,
    /// A ready server's socket and token (SECRET).
    pub target: Option<(String, String)>,
}

impl std::fmt::Debug for Seen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Seen")
            .field("attempt", &self.attempt)
            .field("mode", &self.mode)
            .field("code", &self.code)
            .finish_non_exhaustive()
    }
}

pub type SeenMap = Arc<Mutex<BTreeMap<String, Seen>>>;

/// The user a workload runs as when the agent is root: no account of this machine's.
pub const WORKLOAD_USER: (u32, u32) = (61_000, 61_000);
/// How many processes and threads a workload may have at once, on either local driver.
pub const PIDS_LIMIT: u32 = 256;
/// How long a stopping server has to end by itself.
pub const STOP_GRACE: Duration = Duration::from_secs(10);

/// The user its workloads run as: [`WORKLOAD_USER`] when the agent is root; otherwise the
/// agent's own, so a workload's socket stays private to it.
pub fn workload_user() -> (u32, u32) {
    let euid = rustix::process::geteuid().as_raw();
    if euid == 0 {
        WORKLOAD_USER
    } else {
        (euid, rustix::process::getegid().as_raw())
    }
}

/// A local driver's side of its worker: the desired state it hands over, and the statuses the
/// worker saw.
#[derive(Debug)]
pub struct Handle {
    /// `None` until the first desired state: before it, nothing is "unlisted".
    wanted: tokio::sync::watch::Sender<Option<Vec<Wanted>>>,
    seen: SeenMap,
}

impl Handle {
    /// The handle, and what its worker reads the desired state from.
    pub fn new(seen: SeenMap) -> (Handle, tokio::sync::watch::Receiver<Option<Vec<Wanted>>>) {
        let (wanted, receiver) = tokio::sync::watch::channel(None);
        (Handle { wanted, seen }, receiver)
    }

    /// The driver's whole desired state; applied by its worker at once.
    pub fn apply(&self, wanted: Vec<Wanted>) {
        self.wanted.send_if_modified(|current| {
            let changed = current.as_ref() != Some(&wanted);
            *current = Some(wanted);
            changed
        });
    }

    pub fn statuses(&self) -> Vec<(String, Seen)> {
        let seen = self
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        seen.iter().map(|(id, s)| (id.clone(), s.clone())).collect()
    }
}

/// How long a local driver's worker waits before its next pass: a second, or a tenth of one
/// while a workload's code is one of `soon` (how soon it is ready decides how soon it opens).
pub fn next_pass(seen: &SeenMap, soon: &[StatusCode]) -> Duration {
    let seen = seen
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if seen.values().any(|s| soon.contains(&s.code)) {
        Duration::from_millis(100)
    } else {
        Duration::from_secs(1)
    }
}
