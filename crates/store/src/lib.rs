//! The store: Einsora's business state (tenants, accounts, quotas, machines, enrolment tokens,
//! workload intent, timelines, usage, leases). One `Store` trait, implemented on SQLite (Solo)
//! and Postgres (Lab, Datacenter) by the same queries, written once in `shared/` and compiled
//! per engine.

mod accounts;
mod activity;
mod agents;
pub mod backup;
mod changes;
mod controller;
mod database_url;
mod devices;
mod enrolment;
mod error;
mod held_connection;
mod idempotency;
mod inference_keys;
mod inventory;
mod metering;
mod metrics;
mod migrations;
mod model;
mod model_files;
mod output;
mod postgres;
mod sqlite;
mod state_sql;
mod teams;
mod time_ms;
mod token_usage;
mod usage_report;
mod users;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use einsora_core::ids::{TenantId, WorkloadId};
use einsora_core::reasons::Reason;
use einsora_core::region::Region;
use einsora_core::workload::Workload;

pub use accounts::{
    AccountStore, ApiTokenRecord, Grant, NewApiToken, NewSession, NewTicket, NewUser,
    PasswordLogin, RedeemedTicket, SecretHash, SessionRecord, User, secret_hash,
};
pub use activity::{
    Activity, ActivityObject, ActivityPage, ActivityQuery, ActivityStore, MAX_ACTIVITY_PAGE,
    Recording, recording,
};
pub use agents::{AgentStore, MachineFlag};
pub use changes::ChangeSignal;
pub use controller::{ControllerStore, InUse, Waiting};
pub use database_url::{DatabaseUrl, SETTING as DATABASE_URL_SETTING};
pub use enrolment::{
    EnrolledMachine, EnrolmentStore, EnrolmentTokenRecord, MachineCertificate, NewEnrolmentToken,
    Redemption,
};
pub use error::{QuotaHolder, QuotaMeasure, StoreError, Taken};
pub use idempotency::{Claimed, IdempotencyClaim, IdempotencyStore, IdempotencyTimes};
pub use inference_keys::{
    InferenceKeyRecord, InferenceKeyStore, InferenceLimits, KeyScope, NewInferenceKey,
};
pub use inventory::{
    InventoryStore, MachineRecord, MachineRegistration, UsageCursor, UsagePage, UsageRecord,
    WorkloadPage,
};
pub use metering::{MeteringStore, UsageChange};
pub use migrations::MigrationReport;
pub use model::{
    Admission, Event, Lease, NewTenant, NewWorkload, QuotaClass, Transition, UnitShape,
    WorkloadFilter,
};
pub use output::{
    MAX_PAGE_LINES, OutputBatch, OutputCaps, OutputHead, OutputLine, OutputPage, OutputQuery,
    OutputStore,
};
pub use postgres::PostgresStore;
pub use sqlite::SqliteStore;
pub use teams::{QuotaLimits, QuotaRecord, QuotaSubject, TeamRecord, TeamStore};
pub use token_usage::{
    BATCH_MEMORY as TOKEN_BATCH_MEMORY, TokenCount, TokenUsage, TokenUsagePage, TokenUsageStore,
    TokensOf, TokensUsed,
};
pub use usage_report::{UsageGrouping, UsageReportQuery, UsageReportRow, UsageReportStore};
pub use users::{
    AccountLinkRecord, Invitee, LinkKind, NewAccountLink, UserChange, UserRecord, UserRefusal,
    UserStore,
};

/// Everything the services ask of the database.
#[async_trait]
pub trait Store:
    AccountStore
    + ActivityStore
    + AgentStore
    + ControllerStore
    + EnrolmentStore
    + IdempotencyStore
    + InferenceKeyStore
    + InventoryStore
    + MeteringStore
    + OutputStore
    + UsageReportStore
    + UserStore
    + TeamStore
    + TokenUsageStore
    + Send
    + Sync
    + std::fmt::Debug
{
    /// Applies the embedded migrations; running it again changes nothing.
    async fn migrate(&self) -> Result<MigrationReport, StoreError>;

    /// Cheap round trip, for readiness.
    async fn ping(&self) -> Result<(), StoreError>;

    /// Fires after workloads or machines change, from this process or another.
    fn changes(&self) -> ChangeSignal;

    async fn create_tenant(&self, tenant: &NewTenant) -> Result<(), StoreError>;

    /// Sets a tenant's quota row for a class to a limit in the class's units alone (`None`:
    /// unlimited), as `set_quota_of` sets a whole row.
    async fn set_quota(
        &self,
        tenant: TenantId,
        class: &QuotaClass,
        limit: Option<u32>,
    ) -> Result<(), StoreError>;

    /// Records a new workload in `pending` under the tenant's locked quota row, if it fits the
    /// quotas of the tenant, the owner's team and the owner (units, and CPUs and memory by its
    /// `shape`).
    async fn create_workload(
        &self,
        workload: &NewWorkload,
        reason: &Reason,
    ) -> Result<Workload, StoreError>;

    async fn workload(&self, id: WorkloadId) -> Result<Option<Workload>, StoreError>;

    async fn workloads(&self, filter: &WorkloadFilter) -> Result<Vec<Workload>, StoreError>;

    /// Validates the step against the lifecycle, compare-and-swaps the row on the version it was
    /// read at, and appends the event, in one transaction.
    async fn transition(&self, change: &Transition<'_>) -> Result<Workload, StoreError>;

    /// Several steps in one transaction, each validated and compare-and-swapped on its own (one
    /// that lost a race doesn't stop the others): one lock and one commit for a whole pass.
    /// The outer error is the transaction's; the inner ones each step's, as `transition` says.
    async fn transitions(
        &self,
        changes: &[Transition<'_>],
    ) -> Result<Vec<Result<Workload, StoreError>>, StoreError>;

    /// Starts a stopped or failed workload again (to `pending`), re-checking quota under the
    /// tenant's locked quota row; `shape` is its class's, as the catalog says now.
    async fn start(
        &self,
        workload: &Workload,
        shape: UnitShape,
        reason: &Reason,
    ) -> Result<Workload, StoreError>;

    /// A timeline row that changes no state (from = to). Fails if the workload moved on; adds
    /// nothing when the timeline's latest row is the same note.
    async fn note(
        &self,
        workload: &Workload,
        reason: &Reason,
        fence: Option<&Lease>,
    ) -> Result<(), StoreError>;

    /// A workload's timeline, oldest first.
    async fn events(&self, id: WorkloadId) -> Result<Vec<Event>, StoreError>;

    /// Units held in a region per class: by placed class, or by requested class while no
    /// placement is recorded, so capacity is never under-counted.
    async fn capacity_held(&self, region: &Region) -> Result<BTreeMap<String, u64>, StoreError>;

    /// Takes the lease if it is free, expired, or already this holder's; a new epoch each time.
    async fn take_lease(
        &self,
        name: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>, StoreError>;

    /// Extends a lease still held; `LeaseLost` once another took it or it expired.
    async fn renew_lease(&self, lease: &Lease, ttl: Duration) -> Result<Lease, StoreError>;

    /// Lets the lease go at once, so a standby takes over without waiting for it to expire.
    async fn release_lease(&self, lease: &Lease) -> Result<(), StoreError>;

    /// Every lease, held or lapsed (who leads which region, for `GET /v1/status`).
    async fn leases(&self) -> Result<Vec<Lease>, StoreError>;
}

/// Opens an existing database whose migrations are exactly this binary's: one that is older
/// (or missing) asks for `einsora migrate`, one that is newer for a newer einsora. Writes
/// nothing.
pub async fn open(url: &DatabaseUrl) -> Result<Arc<dyn Store>, StoreError> {
    let store = connect(url, Purpose::Use).await?;
    let known = migrations::latest(store.migrator());
    match store.applied_version().await?.unwrap_or(0) {
        found if found > known => Err(StoreError::DatabaseNewer { found, known }),
        found if found < known => Err(StoreError::DatabaseOlder { found, known }),
        _ => Ok(store),
    }
}

/// Opens the database, creating a SQLite file if there is none, and applies the migrations
/// this binary has (`einsora migrate`, Solo start-up). Refuses a newer database untouched.
pub async fn migrate(url: &DatabaseUrl) -> Result<(Arc<dyn Store>, MigrationReport), StoreError> {
    let store = connect(url, Purpose::Migrate).await?;
    let report = store.migrate().await?;
    Ok((store, report))
}

/// Whether opening may create and change the schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Purpose {
    Use,
    Migrate,
}

async fn connect(url: &DatabaseUrl, purpose: Purpose) -> Result<Arc<dyn Backend>, StoreError> {
    Ok(match url {
        DatabaseUrl::Sqlite { .. } => Arc::new(SqliteStore::open(url, purpose).await?),
        DatabaseUrl::Postgres { .. } => Arc::new(PostgresStore::open(url).await?),
    })
}

/// What `open` needs of an engine beside `Store`.
#[async_trait]
trait Backend: Store {
    fn migrator(&self) -> &'static sqlx::migrate::Migrator;
    async fn applied_version(&self) -> Result<Option<i64>, StoreError>;
}
