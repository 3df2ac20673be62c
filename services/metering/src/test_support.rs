//! Fixtures for the unit tests.

use einsora_core::attempt::Attempt;
use einsora_core::ids::{MachineId, TenantId, WorkloadId};
use einsora_core::kind::WorkloadKind;
use einsora_core::lifecycle::State;
use einsora_core::region::Region;
use einsora_core::workload::Workload;
use time::macros::datetime;

/// A running workload on its second attempt, placed on `gpu-a100` on machine `machine`.
pub fn workload(machine: MachineId) -> Workload {
    let at = datetime!(2025-03-01 09:00 UTC);
    Workload {
        owner: None,
        id: WorkloadId::new(),
        tenant_id: TenantId::new(),
        kind: WorkloadKind::Notebook,
        name: "w".into(),
        gpu_class: "gpu-h100".into(),
        placed_class: Some("gpu-a100".into()),
        units: 2,
        image: "jupyterlab".into(),
        region: Region::new("local").unwrap(),
        machine_id: Some(machine),
        driver: Some("sim".into()),
        devices: Vec::new(),
        attempt: Attempt::new(2),
        fallback: vec!["gpu-a100".into()],
        fallback_after_s: None,
        params: "{}".into(),
        state: State::Running,
        reason: "running".into(),
        version: 7,
        created_at: at,
        updated_at: at,
    }
}
