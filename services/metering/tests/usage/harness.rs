//! The suite's defaults on the shared harness (`einsora_testkit`): notebooks asking for
//! `REQUESTED_CLASS` and admitted to `PLACED_CLASS`, and their timelines moved in time.

use einsora_core::ids::{TenantId, WorkloadId};
use einsora_core::lifecycle::State;
use einsora_core::workload::Workload;
use einsora_store::{NewWorkload, QuotaClass, Store, UsageRecord};
use einsora_testkit::fixtures::{self, Lifecycle, new_workload};
use time::OffsetDateTime;

pub use einsora_testkit::db::TestDb;

pub const REQUESTED_CLASS: &str = "gpu-h100";
pub const PLACED_CLASS: &str = "gpu-a100";
pub const UNITS: u32 = 2;

/// A tenant without limits.
pub async fn tenant(store: &dyn Store) -> TenantId {
    fixtures::tenant(store, QuotaClass::Default, None).await
}

fn lifecycle() -> Lifecycle {
    Lifecycle::placing_on(PLACED_CLASS)
}

/// One step of the lifecycle; admission places it on `PLACED_CLASS`.
pub async fn step(store: &dyn Store, w: &Workload, to: State) -> Workload {
    lifecycle().step(store, w, to).await
}

/// A new workload taken through `steps`.
pub async fn workload(store: &dyn Store, tenant: TenantId, steps: &[State]) -> Workload {
    let new = NewWorkload {
        gpu_class: REQUESTED_CLASS.into(),
        units: UNITS,
        shape: fixtures::shape_of(REQUESTED_CLASS),
        fallback: vec![PLACED_CLASS.into()],
        ..new_workload(tenant, &format!("w-{}", WorkloadId::new()))
    };
    lifecycle().through(store, &new, steps).await
}

/// Moves a workload's timeline to these times, one per event, oldest first: the store stamps
/// events with its own clock, and the test needs them on either side of an hour.
pub async fn set_event_times(db: &TestDb, id: WorkloadId, times: &[OffsetDateTime]) {
    let events = db.store.events(id).await.unwrap();
    assert_eq!(events.len(), times.len(), "one time per event");
    let sql: String = events
        .iter()
        .zip(times)
        .map(|(e, at)| {
            let ms = at.unix_timestamp_nanos() / 1_000_000;
            format!(
                "UPDATE workload_events SET at = {ms} WHERE seq = {};",
                e.seq
            )
        })
        .collect();
    db.execute(&sql);
}

/// `(hour, seconds)` of the workload's usage records.
pub async fn usage(db: &TestDb, w: &Workload) -> Vec<(OffsetDateTime, u32)> {
    records(db, w)
        .await
        .iter()
        .map(|r| (r.hour_start, r.seconds))
        .collect()
}

pub async fn records(db: &TestDb, w: &Workload) -> Vec<UsageRecord> {
    db.store.workload_usage(w.tenant_id, w.id).await.unwrap()
}
