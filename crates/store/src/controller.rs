//! What only the controller asks of the store beside transitions: the admission queue, the
//! region's workloads counted by state (its metrics), and when endpoints last served a request
//! (scale-to-zero, migration 0021).

use std::collections::BTreeMap;

use async_trait::async_trait;
use einsora_core::ids::WorkloadId;
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

    /// Records that these workloads served a request at `at` (or had one in flight): each one's
    /// last request moves forward to `at`, never back. Unknown IDs are skipped; no change
    /// signal (nothing is decided at once on it).
    async fn touch_endpoints(
        &self,
        ids: &[WorkloadId],
        at: OffsetDateTime,
    ) -> Result<(), StoreError>;

    /// The region's running endpoints, each with when it last served a request and when it
    /// last stepped into running (what its idle time is counted from).
    async fn running_endpoints(&self, region: &Region) -> Result<Vec<InUse>, StoreError>;
}

/// A running endpoint, and the times its idleness is counted from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InUse {
    pub workload: Workload,
    /// When the access proxy last reported a request to it; `None`: none yet.
    pub last_request: Option<OffsetDateTime>,
    /// When it last went to running (its update time if that step is missing).
    pub running_since: OffsetDateTime,
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
