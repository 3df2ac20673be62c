//! Usage reports: a period's usage records summed in the database by user, team or class (and
//! by class within a user or team). Time and units, never money.

use async_trait::async_trait;
use einsora_core::ids::{TenantId, UserId};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::StoreError;

#[async_trait]
pub trait UsageReportStore: Send + Sync {
    /// The tenant's usage records whose hour starts in `[from, to)`, summed per group and
    /// placed class; in no particular order.
    async fn usage_report(
        &self,
        tenant: TenantId,
        query: &UsageReportQuery,
    ) -> Result<Vec<UsageReportRow>, StoreError>;
}

/// What a usage report sums by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageGrouping {
    /// The workload's owner (`workloads.owner_id`), then the placed class.
    User,
    /// The team the workload's owner is in now (`users.team_id`; migration 0017), then the
    /// placed class.
    Team,
    /// The placed class.
    Class,
}

/// Which records a report sums, and by what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageReportQuery {
    pub from: OffsetDateTime,
    pub to: OffsetDateTime,
    pub by: UsageGrouping,
    /// Only the records of this user's workloads (a member's view).
    pub owner: Option<UserId>,
}

/// One group's use of one placed class in the period.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageReportRow {
    /// The user's or team's ID; `None` by class, or for workloads with no owner (no team).
    pub group_id: Option<Uuid>,
    /// The user's email or the team's name (`None`: the user or team is gone, or there is
    /// none); by class, the class.
    pub label: Option<String>,
    pub placed_class: String,
    /// How many workloads have records in the group.
    pub workloads: u32,
    /// Seconds running, summed.
    pub seconds: u64,
    /// Units × seconds, summed (unit-hours × 3600).
    pub unit_seconds: u64,
}
