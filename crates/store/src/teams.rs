//! Teams within a tenant (a user is in at most one), and the quotas of the tenant, its teams
//! and its users, as their admins manage them. The quota check itself is the store's
//! `check_quota` (shared/tx.rs), run by every create and start.

use async_trait::async_trait;
use einsora_core::ids::{TeamId, TenantId, UserId};
use time::OffsetDateTime;

use crate::{QuotaClass, StoreError};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeamRecord {
    pub id: TeamId,
    pub name: String,
    pub created_at: OffsetDateTime,
    /// How many of the tenant's users are in it.
    pub members: u32,
}

/// Whose quota a row is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuotaSubject {
    Tenant,
    Team(TeamId),
    User(UserId),
}

/// The limits a quota row states, each `None` when it has none of that kind; a create or start
/// must fit every one it states.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QuotaLimits {
    /// In the class's units: GPUs for a GPU class, workloads for a CPU class.
    pub units: Option<u32>,
    /// CPUs its workloads of the class may hold (CPU classes: the API refuses it on others).
    pub cpus: Option<u32>,
    /// GiB of memory its workloads of the class may hold, likewise.
    pub memory_gib: Option<u32>,
}

impl QuotaLimits {
    /// A limit in the class's units alone (`None`: no limit).
    pub fn units(units: Option<u32>) -> QuotaLimits {
        QuotaLimits {
            units,
            ..QuotaLimits::default()
        }
    }

    /// Whether it states no limit at all.
    pub fn is_empty(&self) -> bool {
        *self == QuotaLimits::default()
    }
}

/// A quota row: limits per class (`Default`: the tenant's for classes without a row of their
/// own; only the tenant has one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaRecord {
    pub subject: QuotaSubject,
    /// The team's name or the user's email; empty for the tenant.
    pub label: String,
    pub class: QuotaClass,
    /// None at all: unlimited (the tenant's only; a team or user without a row has no limit).
    pub limits: QuotaLimits,
    /// The units its workloads of that class hold now (the default row: none counted); what
    /// they hold in CPUs and memory is that many times the class's shape.
    pub held: u64,
}

#[async_trait]
pub trait TeamStore: Send + Sync {
    /// `Taken(TeamName)` if the tenant has a team of that name.
    async fn create_team(
        &self,
        tenant: TenantId,
        id: TeamId,
        name: &str,
    ) -> Result<TeamRecord, StoreError>;

    /// The tenant's teams, by name.
    async fn teams(&self, tenant: TenantId) -> Result<Vec<TeamRecord>, StoreError>;

    /// Deletes the tenant's team, its members left in no team and its quotas gone; false if
    /// there is no such team.
    async fn delete_team(&self, tenant: TenantId, id: TeamId) -> Result<bool, StoreError>;

    /// Puts the tenant's user in the tenant's team (`None`: in none); `NotFound` if either
    /// isn't the tenant's.
    async fn set_user_team(
        &self,
        tenant: TenantId,
        user: UserId,
        team: Option<TeamId>,
    ) -> Result<(), StoreError>;

    /// Every quota row of the tenant, its teams and its users, with what each holds.
    async fn quotas_of(&self, tenant: TenantId) -> Result<Vec<QuotaRecord>, StoreError>;

    /// Sets a quota row, every limit of it: the tenant's (none: unlimited), a team's or a
    /// user's (none: no row, no limit of theirs). `NotFound` for a team or user not the
    /// tenant's; `InvalidInput` for a team's or user's default row.
    async fn set_quota_of(
        &self,
        tenant: TenantId,
        subject: QuotaSubject,
        class: &QuotaClass,
        limits: QuotaLimits,
    ) -> Result<(), StoreError>;
}
