//! A workload as the store records it: the intent (what was asked for) and where the lifecycle
//! has taken it (state, placement, attempt).

use time::OffsetDateTime;

use crate::attempt::Attempt;
use crate::ids::{MachineId, TenantId, UserId, WorkloadId};
use crate::kind::WorkloadKind;
use crate::lifecycle::State;
use crate::region::Region;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workload {
    pub id: WorkloadId,
    pub tenant_id: TenantId,
    /// The user who created it: a member sees and manages only their own, and weakly isolated
    /// drivers run it only on machines that user owns or is trusted on. `None` only for a
    /// workload made without a user (never through the API).
    pub owner: Option<UserId>,
    pub kind: WorkloadKind,
    pub name: String,
    /// The class requested; differs from `placed_class` only after an opt-in fallback.
    pub gpu_class: String,
    /// The class it was admitted on; set in the same transaction as the move to provisioning.
    pub placed_class: Option<String>,
    /// Devices of the class it holds (one unit per workload for CPU classes).
    pub units: u32,
    pub image: String,
    pub region: Region,
    pub machine_id: Option<MachineId>,
    pub driver: Option<String>,
    /// The devices it holds on its machine, by UUID: chosen with its latest admission, and
    /// held while its state holds capacity. Empty for CPU classes, and on a cluster.
    pub devices: Vec<String>,
    pub attempt: Attempt,
    /// Classes to try, in order, after `fallback_after_s` (the seeds' fallbacks, planned).
    pub fallback: Vec<String>,
    pub fallback_after_s: Option<u32>,
    /// The kind's own parameters, as a JSON object.
    pub params: String,
    pub state: State,
    /// The latest timeline reason.
    pub reason: String,
    /// Grows with every state change; transitions compare-and-swap on it.
    pub version: i64,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

impl Workload {
    /// Admission recorded a placement, so usage can be accounted to a class.
    pub fn is_placed(&self) -> bool {
        self.placed_class.is_some()
    }
}
