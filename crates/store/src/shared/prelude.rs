// Imports for the shared implementation (included by sqlite.rs and postgres.rs).

use std::collections::BTreeMap;
use std::time::Duration;

use einsora_core::attempt::Attempt;
use einsora_core::ids::{MachineId, TenantId, WorkloadId};
use einsora_core::lifecycle::{self, State};
use einsora_core::machine::GpuNote;
use einsora_core::reasons::Reason;
use einsora_core::region::Region;
use einsora_core::workload::Workload;
use sqlx::Row;
use uuid::Uuid;

use crate::Backend;
use crate::migrations::{self, MigrationReport};
use crate::time_ms::{duration_ms, from_ms, now_ms};
use crate::{
    ChangeSignal, Event, Lease, NewTenant, NewWorkload, QuotaClass, StoreError, Transition,
    WorkloadFilter,
};

include!("rows.rs");
include!("tx.rs");
include!("store.rs");
include!("batch.rs");
include!("controller.rs");
include!("accounts.rs");
include!("inference_keys.rs");
include!("enrolment.rs");
include!("inventory.rs");
include!("inventory_rows.rs");
include!("agents.rs");
include!("metering.rs");
include!("output.rs");
include!("activity.rs");
include!("users.rs");
include!("teams.rs");
include!("idempotency.rs");
include!("usage_report.rs");
include!("token_usage.rs");
