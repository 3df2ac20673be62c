//! Reads of the caller's tenant's objects. The tenant is part of every query, so another
//! tenant's object and an unknown ID both come back absent and get the same NOT_FOUND; so does
//! another member's workload, for a member (docs/api.md "Roles").

use einsora_core::ids::{ObjectId, TenantId, UserId, WorkloadId};
use einsora_core::lifecycle::State;
use einsora_core::workload::Workload;
use einsora_proto::convert::parse_id;
use einsora_store::Store;
use tonic::Status;

use crate::status;

/// Parses the request's `id` field: the object its activity entry names.
pub fn id<T: ObjectId>(raw: &str) -> Result<T, Status> {
    let id: T = parse_id("id", raw).map_err(status::invalid)?;
    crate::context::object(id);
    Ok(id)
}

/// Whose workloads a caller sees (`Caller::scope`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scope {
    pub tenant: TenantId,
    /// A member's: only their own. `None`: every workload of the tenant.
    pub owner: Option<UserId>,
}

impl Scope {
    pub fn sees(&self, w: &Workload) -> bool {
        self.owner.is_none_or(|owner| w.owner == Some(owner))
    }
}

/// The workload, if the scope sees it; a deleted one only if `include_deleted`.
pub async fn workload(
    store: &dyn Store,
    scope: &Scope,
    id: WorkloadId,
    include_deleted: bool,
) -> Result<Workload, Status> {
    match store
        .workload_of(scope.tenant, id)
        .await
        .map_err(status::store)?
    {
        Some(w) if scope.sees(&w) && (include_deleted || w.state != State::Deleted) => Ok(w),
        _ => Err(status::not_found()),
    }
}

/// Applies `write` to the tenant's live workload. If another writer changed it meanwhile (the
/// compare-and-swap lost), reads it again and tries once more: the second read may show that
/// the write no longer makes sense, and `write` refuses it then.
pub async fn write_workload<T, F, Fut>(
    store: &dyn Store,
    scope: &Scope,
    id: WorkloadId,
    write: F,
) -> Result<T, Status>
where
    F: Fn(Workload) -> Fut,
    Fut: Future<Output = Result<T, Status>>,
{
    let w = workload(store, scope, id, false).await?;
    match write(w).await {
        Err(s) if is_conflict(&s) => write(workload(store, scope, id, false).await?).await,
        other => other,
    }
}

fn is_conflict(s: &Status) -> bool {
    s.code() == tonic::Code::FailedPrecondition
        && s.metadata()
            .get(status::ERROR_KEY)
            .and_then(|v| v.to_str().ok())
            == Some(status::Precondition::Conflict.as_str())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use einsora_core::reasons::Reason;
    use einsora_store::{QuotaClass, Transition};
    use einsora_testkit::db::TestDb;
    use einsora_testkit::fixtures::{created, new_workload, tenant};

    use super::*;

    /// A workload in a fresh store, as its tenant created it.
    async fn setup() -> (TestDb, Workload) {
        let db = TestDb::sqlite().await;
        let tenant = tenant(&*db.store, QuotaClass::Default, None).await;
        let w = db
            .store
            .create_workload(&new_workload(tenant, "nb"), &created())
            .await
            .unwrap();
        (db, w)
    }

    async fn step(store: &dyn Store, w: &Workload, to: State) -> Result<Workload, Status> {
        let change = Transition {
            workload: w,
            to,
            reason: &Reason::Ready,
            admission: None,
            fence: None,
        };
        store.transition(&change).await.map_err(status::store)
    }

    /// The controller moves the workload (to queued) just before every write the api tries
    /// while fewer than `races` have happened.
    async fn delete_racing(races: usize) -> (Result<Workload, Status>, usize) {
        let (db, w) = setup().await;
        let (store, calls) = (&*db.store, &AtomicUsize::new(0));
        let scope = Scope {
            tenant: w.tenant_id,
            owner: None,
        };
        let result = write_workload(store, &scope, w.id, |w| async move {
            if calls.fetch_add(1, Ordering::SeqCst) < races {
                let ahead = store.workload(w.id).await.unwrap().unwrap();
                let to = if ahead.state == State::Pending {
                    State::Queued
                } else {
                    State::Deleting
                };
                step(store, &ahead, to).await.unwrap();
            }
            step(store, &w, State::Deleting).await
        })
        .await;
        (result, calls.load(Ordering::SeqCst))
    }

    #[tokio::test]
    async fn a_member_sees_only_their_own_workloads_and_others_as_unknown() {
        let (db, w) = setup().await;
        let store = &*db.store;
        let mine = Scope {
            tenant: w.tenant_id,
            owner: w.owner,
        };
        let teammate = Scope {
            owner: Some(UserId::new()),
            ..mine
        };
        let admin = Scope {
            owner: None,
            ..mine
        };
        assert_eq!(workload(store, &mine, w.id, false).await.unwrap().id, w.id);
        assert_eq!(workload(store, &admin, w.id, false).await.unwrap().id, w.id);
        let theirs = workload(store, &teammate, w.id, false).await.unwrap_err();
        let unknown = workload(store, &teammate, WorkloadId::new(), false)
            .await
            .unwrap_err();
        assert_eq!(theirs.code(), tonic::Code::NotFound);
        assert_eq!(theirs.message(), unknown.message());
        let write = write_workload(store, &teammate, w.id, |_| async { Ok(()) }).await;
        assert_eq!(write.unwrap_err().code(), tonic::Code::NotFound);
    }

    #[tokio::test]
    async fn a_lost_race_is_retried_once_on_a_fresh_read() {
        let (result, calls) = delete_racing(1).await;
        assert_eq!(calls, 2);
        assert_eq!(result.unwrap().state, State::Deleting);

        let (result, calls) = delete_racing(2).await;
        assert_eq!(calls, 2, "only once");
        let status = result.unwrap_err();
        assert!(is_conflict(&status), "{status:?}");
    }
}
