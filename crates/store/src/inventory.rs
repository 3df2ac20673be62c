//! Inventory: machines and the hourly usage records read by the API, and the tenant-scoped
//! workload reads. Every read takes the tenant, so another tenant's object is simply absent.

use async_trait::async_trait;
use einsora_core::ids::{MachineId, TenantId, UsageRecordId, WorkloadId};
use einsora_core::machine::{GpuNote, Machine, ModelFile, VmHost};
use einsora_core::region::Region;
use einsora_core::workload::Workload;
use time::OffsetDateTime;

use crate::StoreError;

#[async_trait]
pub trait InventoryStore: Send + Sync {
    /// The tenant's workload, or `None` if it is unknown or another tenant's.
    async fn workload_of(
        &self,
        tenant: TenantId,
        id: WorkloadId,
    ) -> Result<Option<Workload>, StoreError>;

    /// One page of the tenant's workloads, newest first.
    async fn workloads_of(
        &self,
        tenant: TenantId,
        page: &WorkloadPage,
    ) -> Result<Vec<Workload>, StoreError>;

    /// Registers a machine, or updates what its agent reports. Its owner and region are kept
    /// from the first registration: an agent never changes them.
    async fn put_machine(&self, machine: &MachineRegistration) -> Result<(), StoreError>;

    /// The tenant's own machines, oldest first.
    async fn machines_of(&self, tenant: TenantId) -> Result<Vec<MachineRecord>, StoreError>;

    /// The tenant's machine, or `None` if it is unknown or another tenant's.
    async fn machine_of(
        &self,
        tenant: TenantId,
        id: MachineId,
    ) -> Result<Option<MachineRecord>, StoreError>;

    /// How busy the machine's GPUs were at its agent's last sample, and when (none, `None`:
    /// never sampled, or no such machine). For a workload's own GPUs: the caller picks those.
    async fn gpu_use_on(
        &self,
        machine: MachineId,
    ) -> Result<
        (
            Vec<einsora_core::machine::GpuSample>,
            Option<OffsetDateTime>,
        ),
        StoreError,
    >;

    /// Revokes the tenant's machine and its certificates (again: no change); `None` if the
    /// tenant has no such machine.
    async fn revoke_machine(
        &self,
        tenant: TenantId,
        id: MachineId,
    ) -> Result<Option<MachineRecord>, StoreError>;

    /// Replaces the users of the tenant `by` (the machine's owning user) trusts with the
    /// tenant's machine; `None` if the tenant has no such machine or `by` doesn't own it.
    async fn set_trusted_users(
        &self,
        tenant: TenantId,
        id: MachineId,
        by: einsora_core::ids::UserId,
        users: &[einsora_core::ids::UserId],
    ) -> Result<Option<MachineRecord>, StoreError>;

    /// Records (or replaces) a workload's usage of one hour.
    async fn record_usage(&self, record: &UsageRecord) -> Result<(), StoreError>;

    /// One page of the tenant's usage records whose hour starts in `[from, to)`, oldest first.
    async fn usage_of(
        &self,
        tenant: TenantId,
        period: &UsagePage,
    ) -> Result<Vec<UsageRecord>, StoreError>;

    /// The usage records of the tenant's workload, oldest first.
    async fn workload_usage(
        &self,
        tenant: TenantId,
        id: WorkloadId,
    ) -> Result<Vec<UsageRecord>, StoreError>;
}

/// Which workloads `workloads_of` answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadPage {
    pub include_deleted: bool,
    /// Only this user's (a member's view).
    pub owner: Option<einsora_core::ids::UserId>,
    /// Only workloads older than this one (the last of the previous page).
    pub before: Option<WorkloadId>,
    pub limit: u32,
}

/// A machine as its registration and its agent's latest report describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineRegistration {
    pub machine: Machine,
    /// Drivers its agent has, by name.
    pub drivers: Vec<String>,
    /// The model files its agent validated in its models directory.
    pub models: Vec<ModelFile>,
    /// Why its GPUs aren't offered, if its agent said.
    pub gpu_note: Option<GpuNote>,
    /// How it runs VMs, if its agent has a driver that does.
    pub vm: Option<VmHost>,
    pub last_seen_at: Option<OffsetDateTime>,
}

/// A machine as a tenant's read sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineRecord {
    pub machine: Machine,
    pub drivers: Vec<String>,
    /// As its agent last reported them.
    pub models: Vec<ModelFile>,
    /// Why its GPUs aren't offered, as its agent last said.
    pub gpu_note: Option<GpuNote>,
    /// How it runs VMs, as its agent last said.
    pub vm: Option<VmHost>,
    /// How busy its GPUs were at its agent's last sample (`gpu_usage_at`), if it sent one.
    pub gpu_usage: Vec<einsora_core::machine::GpuSample>,
    pub gpu_usage_at: Option<OffsetDateTime>,
    pub last_seen_at: Option<OffsetDateTime>,
    pub revoked_at: Option<OffsetDateTime>,
    pub created_at: OffsetDateTime,
    /// How many of the reading tenant's workloads hold capacity on it.
    pub workload_count: u32,
    /// Why the controller flagged it, if it ever did (`AgentStore::flag_machine`).
    pub flag: Option<crate::MachineFlag>,
}

/// One workload's use of one placed class during one hour.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageRecord {
    pub id: UsageRecordId,
    pub tenant_id: TenantId,
    pub workload_id: WorkloadId,
    pub region: Region,
    pub machine_id: Option<MachineId>,
    pub placed_class: String,
    pub units: u32,
    /// On the hour, UTC.
    pub hour_start: OffsetDateTime,
    /// Seconds of that hour it was running (0 to 3600).
    pub seconds: u32,
}

/// Which usage records `usage_of` answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsagePage {
    pub from: OffsetDateTime,
    pub to: OffsetDateTime,
    /// Only the records of this user's workloads (a member's view).
    pub owner: Option<einsora_core::ids::UserId>,
    /// Only records after this one (the last of the previous page), in the page's order.
    pub after: Option<UsageCursor>,
    pub limit: u32,
}

/// Where a page of usage records ends: records are ordered by hour, then ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UsageCursor {
    pub hour_start: OffsetDateTime,
    pub id: UsageRecordId,
}

impl From<&UsageRecord> for UsageCursor {
    fn from(r: &UsageRecord) -> Self {
        UsageCursor {
            hour_start: r.hour_start,
            id: r.id,
        }
    }
}
