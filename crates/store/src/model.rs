//! What goes into and comes out of the store, beside the core's domain types.

use einsora_core::attempt::Attempt;
use einsora_core::catalog::ComputeClass;
use einsora_core::ids::{MachineId, TenantId, UserId, WorkloadId};
use einsora_core::kind::WorkloadKind;
use einsora_core::lifecycle::State;
use einsora_core::reasons::Reason;
use einsora_core::region::Region;
use einsora_core::workload::Workload;
use time::OffsetDateTime;

#[derive(Debug, Clone)]
pub struct NewTenant {
    pub id: TenantId,
    pub slug: String,
    pub name: String,
    /// Trusted tenants see how much capacity is free in their queue reasons.
    pub trusted: bool,
}

/// Which classes a quota row covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuotaClass {
    Class(String),
    /// The tenant's default for every class without a row of its own.
    Default,
}

impl QuotaClass {
    pub(crate) const DEFAULT_KEY: &'static str = "*";

    pub(crate) fn key(&self) -> &str {
        match self {
            QuotaClass::Class(c) => c,
            QuotaClass::Default => Self::DEFAULT_KEY,
        }
    }
}

/// What one unit of a class counts against a quota's CPU and memory limits: the catalog's `cpus`
/// and `memory_gib` of the class (a CPU class's unit is a workload). The caller looks it up in
/// the catalog at each create and start; a class the catalog no longer has counts nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UnitShape {
    pub cpus: u32,
    pub memory_gib: u32,
}

impl UnitShape {
    pub fn of(class: &ComputeClass) -> UnitShape {
        UnitShape {
            cpus: class.cpus(),
            memory_gib: class.memory_gib(),
        }
    }
}

/// A workload as the API records it at create. Validation against the catalog happened before.
#[derive(Debug, Clone)]
pub struct NewWorkload {
    pub id: WorkloadId,
    pub tenant_id: TenantId,
    /// The user creating it (`None` only outside the API: tests, tools).
    pub owner: Option<UserId>,
    pub kind: WorkloadKind,
    pub name: String,
    pub gpu_class: String,
    pub units: u32,
    /// What each unit of `gpu_class` counts against CPU and memory quotas.
    pub shape: UnitShape,
    pub image: String,
    pub region: Region,
    pub fallback: Vec<String>,
    pub fallback_after_s: Option<u32>,
    /// The kind's own parameters, as a JSON object.
    pub params: String,
    /// The creating request's trace context (a W3C `traceparent`), when spans are exported:
    /// the controller's work on it joins that trace.
    pub trace_context: Option<String>,
}

/// Placement recorded with the move to provisioning; it starts a new attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    pub placed_class: String,
    pub machine_id: Option<MachineId>,
    pub driver: Option<String>,
    /// The machine's devices it is given, by UUID (empty for CPU classes and clusters).
    pub devices: Vec<String>,
}

/// One lifecycle step, compare-and-swapped on the workload as it was read.
#[derive(Debug, Clone, Copy)]
pub struct Transition<'a> {
    pub workload: &'a Workload,
    pub to: State,
    pub reason: &'a Reason,
    /// Only with `to == Provisioning`.
    pub admission: Option<&'a Admission>,
    /// A controller's writes carry its region lease: refused once the lease is lost.
    pub fence: Option<&'a Lease>,
}

/// A row of a workload's timeline. `from == Some(to)` is a note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The timeline's order across the whole database.
    pub seq: i64,
    pub workload_id: WorkloadId,
    pub from: Option<State>,
    pub to: State,
    pub reason: String,
    pub attempt: Attempt,
    pub at: OffsetDateTime,
}

impl Event {
    pub fn is_note(&self) -> bool {
        self.from == Some(self.to)
    }
}

#[derive(Debug, Clone, Default)]
pub struct WorkloadFilter {
    pub tenant: Option<TenantId>,
    pub region: Option<Region>,
    /// Only these states (empty: any).
    pub states: Vec<State>,
    pub include_deleted: bool,
}

impl WorkloadFilter {
    /// The workloads whose state holds capacity (and so their machine's devices).
    pub fn holding_capacity() -> WorkloadFilter {
        WorkloadFilter {
            states: State::ALL
                .iter()
                .copied()
                .filter(|s| s.holds_capacity())
                .collect(),
            ..WorkloadFilter::default()
        }
    }
}

/// A held lease. Every controller write checks `epoch`: a leader that was paused and lost its
/// lease can't write after another took over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub name: String,
    pub holder: String,
    pub epoch: i64,
    pub expires_at: OffsetDateTime,
}
