//! The runtime boundary (seeds: "Backends"): everything the controller asks of a runtime goes
//! through `Backend`, whatever runs the workloads (the fake, node agents, Kubernetes). A spec is
//! the placed workload; each backend turns it into what its runtime needs.

use std::collections::BTreeMap;

use async_trait::async_trait;

use crate::attempt::Attempt;
use crate::ids::{MachineId, TenantId, WorkloadId};
use crate::kind::WorkloadKind;
use crate::reasons::Reason;
use crate::workload::Workload;

/// A placed workload, as a backend runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    pub target: Target,
    pub tenant: TenantId,
    /// The workload's own name. Runtime objects are named from the ID, never from this.
    pub name: String,
    /// The class it was admitted on.
    pub class: String,
    pub units: u32,
    pub image: String,
    /// The image's runtime for the class's accelerator (e.g. `vllm`, `jupyterlab-cpu`).
    pub runtime: String,
    pub driver: Option<String>,
    /// The kind's own parameters, as a JSON object.
    pub params: String,
}

/// Which workload (and which admission of it) a backend call is about. Parking, removing and
/// observing need nothing from the catalog, so they work after an entry was removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub workload: WorkloadId,
    pub kind: WorkloadKind,
    pub attempt: Attempt,
    pub machine: Option<MachineId>,
}

impl Target {
    pub fn of(w: &Workload) -> Target {
        Target {
            workload: w.id,
            kind: w.kind,
            attempt: w.attempt,
            machine: w.machine_id,
        }
    }
}

/// What the runtime says about a workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observation {
    /// Running this attempt and serving.
    Ready,
    /// Asked to run and on its way (pulling an image, starting).
    Starting,
    /// Present in its stopped form (a notebook scaled to zero, a halted VM), data kept.
    Parked,
    /// The runtime has nothing for it.
    Absent,
    /// It failed, for a reason from the backend's fixed vocabulary.
    Failed(Reason),
    /// Nobody can tell right now (its machine is offline or reconnecting): decides nothing.
    Unknown,
}

/// A runtime call that didn't happen. The message is for the operator's log only: timelines get a
/// fixed note instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BackendError(pub String);

#[async_trait]
pub trait Backend: Send + Sync + std::fmt::Debug {
    /// Units per class the runtime has in total in this region (free or not). The controller
    /// subtracts what the store says is held.
    async fn capacity(&self) -> Result<BTreeMap<String, u64>, BackendError>;

    /// Runs the spec's attempt. Idempotent: running what already runs changes nothing.
    async fn run(&self, spec: &Spec) -> Result<(), BackendError>;

    /// Brings it to its stopped form, keeping its data (an endpoint's stopped form is removal).
    async fn park(&self, target: &Target) -> Result<(), BackendError>;

    /// Removes everything that belongs to it, volumes included.
    async fn delete(&self, target: &Target) -> Result<(), BackendError>;

    async fn observe(&self, target: &Target) -> Result<Observation, BackendError>;
}
