//! What only the controller asks of the store beside transitions: the admission queue, and
//! the region's workloads counted by state (its metrics).

use std::collections::BTreeMap;

use async_trait::async_trait;
use einsora_core::lifecycle::State;
use einsora_core::region::Region;
use einsora_core::workload::Workload;
use time::OffsetDateTime;

use crate::StoreError;

#[async_trait]
pub trait ControllerStore: Send + Sync {
    /// The region's pending and queued workloads, first come first: ordered by when each last
    /// went to pending (created or started again), which its timeline records.
    async fn waiting(&self, region: &Region) -> Result<Vec<Waiting>, StoreError>;

    /// How many of the region's workloads are in each state, deleted ones left out: a state
    /// with none is absent.
    async fn census(&self, region: &Region) -> Result<BTreeMap<State, u64>, StoreError>;
}

/// A workload waiting for admission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    pub workload: Workload,
    /// Trusted tenants see how much capacity is free in their queue reasons.
    pub tenant_trusted: bool,
    /// The trace context of the request that created it, if spans were exported then.
    pub trace_context: Option<String>,
    /// When it last went to pending (created or started again): how long it has waited is
    /// counted from here (its fallbacks, aging).
    pub since: OffsetDateTime,
}
