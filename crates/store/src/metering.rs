//! What usage accounting reads and writes. Usage is derived from the timelines, so the metering
//! role reads many workloads' timelines and existing records at once, and brings one workload's
//! records up to date in one transaction.

use std::collections::BTreeMap;

use async_trait::async_trait;
use einsora_core::ids::WorkloadId;
use einsora_core::workload::Workload;
use time::OffsetDateTime;

use crate::{Event, StoreError, UsageRecord};

#[async_trait]
pub trait MeteringStore: Send + Sync {
    /// Workloads, deleted ones included, whose row changed at or after `changed_since`, and
    /// every workload in a metered state; with no `changed_since`, every workload. By ID.
    async fn workloads_to_meter(
        &self,
        changed_since: Option<OffsetDateTime>,
    ) -> Result<Vec<Workload>, StoreError>;

    /// The timelines of these workloads, each oldest first; a workload without one is absent.
    async fn timelines(
        &self,
        ids: &[WorkloadId],
    ) -> Result<BTreeMap<WorkloadId, Vec<Event>>, StoreError>;

    /// The usage records of these workloads, whatever their tenant, each oldest first.
    async fn usage_of_workloads(
        &self,
        ids: &[WorkloadId],
    ) -> Result<BTreeMap<WorkloadId, Vec<UsageRecord>>, StoreError>;

    /// Applies one workload's change in one transaction: writes `upsert` (an hour's existing
    /// record keeps its ID) and removes the workload's records of `remove_hours`.
    async fn apply_usage(&self, change: &UsageChange) -> Result<(), StoreError>;
}

/// How one workload's usage records differ from what its timeline says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageChange {
    pub workload_id: WorkloadId,
    /// Records of this workload, at most one per hour.
    pub upsert: Vec<UsageRecord>,
    /// Hours (on the hour) whose records the timeline no longer supports.
    pub remove_hours: Vec<OffsetDateTime>,
}

impl UsageChange {
    pub fn is_empty(&self) -> bool {
        self.upsert.is_empty() && self.remove_hours.is_empty()
    }
}
