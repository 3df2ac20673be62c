//! The activity log (ADR 0012): every API action of a tenant's users, and every call of theirs
//! the API refused, one row each. An action's entry is written in the same transaction as the
//! action: the api runs each call inside [`recording`], naming the caller once known, and the
//! store methods an action goes through (each says so) write the entry, with the object they
//! acted on, in the transaction they commit. A refusal's entry, or an action's that wrote
//! nothing, the api writes on its own ([`ActivityStore::record_activity`]).

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use einsora_core::ids::{ObjectId, TenantId, UserId};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::StoreError;

/// The most entries one page reads.
pub const MAX_ACTIVITY_PAGE: u32 = 500;

#[async_trait]
pub trait ActivityStore: Send + Sync {
    /// Records a refusal, or an action that wrote nothing else, in a transaction of its own.
    async fn record_activity(&self, activity: &Activity) -> Result<(), StoreError>;

    /// A page of the tenant's log, newest first.
    async fn activity(&self, query: &ActivityQuery) -> Result<ActivityPage, StoreError>;

    /// Drops every entry older than `before`; how many.
    async fn sweep_activity(&self, before: OffsetDateTime) -> Result<u64, StoreError>;
}

/// One entry: who did what to what, how it ended, and the request it came in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Activity {
    /// A UUIDv7: entries of one millisecond keep the order they were made in.
    pub id: Uuid,
    pub tenant_id: TenantId,
    /// The user acting; none for a sign-in that failed before a user was known.
    pub user_id: Option<UserId>,
    pub at: OffsetDateTime,
    /// The credential's description, as timelines show it ("a@b.c (API token \"ci\")").
    pub actor: String,
    /// The action, from the RPC's name: `create_workload`, `revoke_token`, `login`.
    pub action: String,
    pub object: Option<ActivityObject>,
    /// `ok`, or the error code the caller got (`not_found`, `quota_exceeded`, …).
    pub result: String,
    pub request_id: String,
    pub client_addr: Option<String>,
}

/// What an action was on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActivityObject {
    /// `workload`, `token`, `machine`, `enrolment_token`, `user`.
    pub kind: String,
    pub id: String,
}

/// Which entries to read: one tenant's, within the filters given, older than `before`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActivityQuery {
    pub tenant: TenantId,
    /// Entries at or after.
    pub from: Option<OffsetDateTime>,
    /// Entries before.
    pub to: Option<OffsetDateTime>,
    pub action: Option<String>,
    pub user: Option<UserId>,
    pub object_id: Option<String>,
    /// `Some(true)`: only `ok`; `Some(false)`: only refusals.
    pub ok: Option<bool>,
    /// The page after this entry (the last of the previous page).
    pub before: Option<Uuid>,
    pub limit: u32,
}

impl ActivityQuery {
    /// Every entry of `tenant`, the first 100.
    pub fn of(tenant: TenantId) -> Self {
        ActivityQuery {
            tenant,
            from: None,
            to: None,
            action: None,
            user: None,
            object_id: None,
            ok: None,
            before: None,
            limit: 100,
        }
    }
}

/// A page, and the cursor of the next one if there may be more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActivityPage {
    pub entries: Vec<Activity>,
    pub next: Option<Uuid>,
}

/// The call a task is serving, as far as its activity entry goes: the entry once the caller is
/// known (without its object, result and time), and whether an action's transaction wrote it.
#[derive(Debug, Default)]
pub struct Recording {
    entry: Mutex<Option<Activity>>,
    recorded: AtomicBool,
}

tokio::task_local! {
    static RECORDING: Arc<Recording>;
}

impl Recording {
    pub fn new() -> Arc<Recording> {
        Arc::default()
    }

    /// The caller is known: actions from here on are recorded as theirs.
    pub fn caller(&self, entry: Activity) {
        *self.entry.lock().unwrap_or_else(PoisonError::into_inner) = Some(entry);
    }

    /// The entry as it stands, if the caller is known.
    pub fn entry(&self) -> Option<Activity> {
        self.entry
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether an action's transaction wrote the entry.
    pub fn recorded(&self) -> bool {
        self.recorded.load(Ordering::Acquire)
    }
}

/// Runs `call` as recorded by `recording`.
pub async fn recording<F: Future>(recording: Arc<Recording>, call: F) -> F::Output {
    RECORDING.scope(recording, call).await
}

/// The entry of the call this task records, for an action (on `object`) that succeeds; none
/// outside a recorded call, before its caller is known, or once an entry was written.
pub(crate) fn action_entry(object: Option<ActivityObject>) -> Option<Activity> {
    RECORDING
        .try_with(|r| {
            if r.recorded() {
                return None;
            }
            let mut entry = r.entry()?;
            entry.id = Uuid::now_v7();
            entry.at = OffsetDateTime::now_utc();
            entry.object = object;
            entry.result = "ok".to_owned();
            Some(entry)
        })
        .ok()
        .flatten()
}

/// Whether an action now writes an entry ([`action_entry`] would give one): outside a
/// recorded call (the controller's work) an action needs no transaction for it.
pub(crate) fn records_actions() -> bool {
    RECORDING
        .try_with(|r| {
            !r.recorded()
                && r.entry
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .is_some()
        })
        .unwrap_or(false)
}

/// The action's transaction committed its entry.
pub(crate) fn entry_written() {
    let _outside = RECORDING.try_with(|r| r.recorded.store(true, Ordering::Release));
}

impl ActivityObject {
    pub fn of<T: ObjectId>(id: T) -> ActivityObject {
        ActivityObject {
            kind: T::KIND.to_owned(),
            id: id.to_string(),
        }
    }
}
