//! Reads of the caller's tenant's objects. The tenant is part of every query, so another
//! tenant's object and an unknown ID both come back absent and get the same NOT_FOUND.

use std::str::FromStr;

use einsora_core::ids::{InvalidId, TenantId, WorkloadId};
use einsora_core::lifecycle::State;
use einsora_core::workload::Workload;
use einsora_proto::convert::parse_id;
use einsora_store::Store;
use tonic::Status;

use crate::status;

/// Parses the request's `id` field.
pub fn id<T: FromStr<Err = InvalidId>>(raw: &str) -> Result<T, Status> {
    parse_id("id", raw).map_err(status::invalid)
}

/// The tenant's workload; a deleted one only if `include_deleted`.
pub async fn workload(
    store: &dyn Store,
    tenant: TenantId,
    id: WorkloadId,
    include_deleted: bool,
) -> Result<Workload, Status> {
    match store.workload_of(tenant, id).await.map_err(status::store)? {
        Some(w) if include_deleted || w.state != State::Deleted => Ok(w),
        _ => Err(status::not_found()),
    }
}

/// Applies `write` to the tenant's live workload. If another writer changed it meanwhile (the
/// compare-and-swap lost), reads it again and tries once more: the second read may show that
/// the write no longer makes sense, and `write` refuses it then.
pub async fn write_workload<T, F, Fut>(
    store: &dyn Store,
    tenant: TenantId,
    id: WorkloadId,
    write: F,
) -> Result<T, Status>
where
    F: Fn(Workload) -> Fut,
    Fut: Future<Output = Result<T, Status>>,
{
    let w = workload(store, tenant, id, false).await?;
    match write(w).await {
        Err(s) if is_conflict(&s) => write(workload(store, tenant, id, false).await?).await,
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

    use einsora_core::kind::WorkloadKind;
    use einsora_core::reasons::{Actor, Credential, Reason};
    use einsora_core::region::Region;
    use einsora_store::{DatabaseUrl, NewTenant, NewWorkload, QuotaClass, Transition};

    use super::*;

    /// A workload in a fresh store, as its tenant created it.
    async fn setup(dir: &tempfile::TempDir) -> (std::sync::Arc<dyn Store>, Workload) {
        let url = format!("sqlite:{}/einsora.db", dir.path().display());
        let (store, _) = einsora_store::migrate(&DatabaseUrl::parse(&url).unwrap())
            .await
            .unwrap();
        let tenant = TenantId::new();
        let new = NewTenant {
            id: tenant,
            slug: "acme".into(),
            name: "Acme".into(),
            trusted: true,
        };
        store.create_tenant(&new).await.unwrap();
        store
            .set_quota(tenant, &QuotaClass::Default, None)
            .await
            .unwrap();
        let new = NewWorkload {
            id: WorkloadId::new(),
            tenant_id: tenant,
            kind: WorkloadKind::Notebook,
            name: "nb".into(),
            gpu_class: "cpu-1c-2g".into(),
            units: 1,
            image: "jupyterlab".into(),
            region: Region::new("local").unwrap(),
            fallback: vec![],
            fallback_after_s: None,
            params: "{}".into(),
        };
        let by = Actor {
            subject: "you@example.com".into(),
            credential: Credential::Dev,
        };
        let w = store
            .create_workload(&new, &Reason::Created { by })
            .await
            .unwrap();
        (store, w)
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
        let dir = tempfile::tempdir().unwrap();
        let (store, w) = setup(&dir).await;
        let (store, calls) = (&*store, &AtomicUsize::new(0));
        let result = write_workload(store, w.tenant_id, w.id, |w| async move {
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
