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

/// A quota row: a limit per class (`Default`: the tenant's for classes without a row of their
/// own; only the tenant has one), in the class's units (GPUs; a workload for CPU classes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaRecord {
    pub subject: QuotaSubject,
    /// The team's name or the user's email; empty for the tenant.
    pub label: String,
    pub class: QuotaClass,
    /// `None`: unlimited (the tenant's only; a team or user without a row has no limit).
    pub limit: Option<u32>,
    /// The units its workloads of that class hold now (the default row: none counted).
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

    /// Sets a quota row: the tenant's (`None`: unlimited), a team's or a user's (`None`: no
    /// row, no limit of theirs). `NotFound` for a team or user not the tenant's;
    /// `InvalidInput` for a team's or user's default row.
    async fn set_quota_of(
        &self,
        tenant: TenantId,
        subject: QuotaSubject,
        class: &QuotaClass,
        limit: Option<u32>,
    ) -> Result<(), StoreError>;
}
