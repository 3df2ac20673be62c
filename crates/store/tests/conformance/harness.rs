//! Opening a fresh store per case, and fixtures.

use std::sync::Arc;

use einsora_core::ids::{TenantId, WorkloadId};
use einsora_core::kind::WorkloadKind;
use einsora_core::lifecycle::State;
use einsora_core::reasons::{Actor, Credential, Reason};
use einsora_core::region::Region;
use einsora_core::workload::Workload;
use einsora_store::{
    Admission, DatabaseUrl, NewTenant, NewWorkload, QuotaClass, Store, Transition,
};
use einsora_testkit::TempPostgres;

/// A migrated store on a database of its own; `url` opens a second connection to it.
pub struct TestDb {
    pub store: Arc<dyn Store>,
    pub url: DatabaseUrl,
    _dir: Option<tempfile::TempDir>,
}

pub async fn sqlite() -> TestDb {
    let dir = tempfile::tempdir().unwrap();
    let url = DatabaseUrl::parse(&format!("sqlite:{}/einsora.db", dir.path().display())).unwrap();
    open(url, Some(dir)).await
}

pub async fn postgres() -> TestDb {
    let url = TempPostgres::shared().fresh_database().unwrap();
    open(DatabaseUrl::parse(&url).unwrap(), None).await
}

async fn open(url: DatabaseUrl, dir: Option<tempfile::TempDir>) -> TestDb {
    let (store, _) = einsora_store::migrate(&url).await.unwrap();
    TestDb {
        store,
        url,
        _dir: dir,
    }
}

impl TestDb {
    /// A second store on the same database, as another process (the api beside the controller)
    /// would open it.
    pub async fn another(&self) -> Arc<dyn Store> {
        einsora_store::open(&self.url).await.unwrap()
    }

    /// Runs SQL behind the store's back (with the engine's own client), to set up states that
    /// no store method makes yet or that only another einsora would.
    pub fn execute(&self, sql: &str) {
        let status = match &self.url {
            DatabaseUrl::Sqlite { path } => std::process::Command::new("sqlite3")
                .arg(path)
                .arg(sql)
                .status(),
            DatabaseUrl::Postgres { url, .. } => std::process::Command::new("psql")
                .args([url.as_str(), "-q", "-v", "ON_ERROR_STOP=1", "-c", sql])
                .status(),
        };
        assert!(status.unwrap().success(), "{sql}");
    }
}

pub fn local() -> Region {
    Region::new("local").unwrap()
}

pub fn reason() -> Reason {
    Reason::Created {
        by: Actor {
            subject: "you@example.com".into(),
            credential: Credential::BrowserSession,
        },
    }
}

/// A tenant whose quota for `cpu-1c-2g` is `limit` (None: unlimited).
pub async fn tenant(store: &dyn Store, limit: Option<u32>) -> TenantId {
    let id = TenantId::new();
    store
        .create_tenant(&NewTenant {
            id,
            slug: format!("t-{id}"),
            name: "Test".into(),
            trusted: true,
        })
        .await
        .unwrap();
    store
        .set_quota(id, &QuotaClass::Class("cpu-1c-2g".into()), limit)
        .await
        .unwrap();
    id
}

pub fn new_workload(tenant: TenantId, name: &str) -> NewWorkload {
    NewWorkload {
        id: WorkloadId::new(),
        tenant_id: tenant,
        kind: WorkloadKind::Notebook,
        name: name.into(),
        gpu_class: "cpu-1c-2g".into(),
        units: 1,
        image: "jupyterlab".into(),
        region: local(),
        fallback: vec![],
        fallback_after_s: None,
        params: "{}".into(),
    }
}

pub async fn create(store: &dyn Store, tenant: TenantId, name: &str) -> Workload {
    store
        .create_workload(&new_workload(tenant, name), &reason())
        .await
        .unwrap()
}

pub fn admission() -> Admission {
    Admission {
        placed_class: "cpu-1c-2g".into(),
        machine_id: None,
        driver: Some("sim".into()),
    }
}

/// One step without a lease; admission is recorded on the way to provisioning, and the way
/// back to pending is `start`.
pub async fn step(store: &dyn Store, w: &Workload, to: State) -> Workload {
    try_step(store, w, to)
        .await
        .unwrap_or_else(|e| panic!("{} -> {to}: {e}", w.state))
}

pub async fn try_step(
    store: &dyn Store,
    w: &Workload,
    to: State,
) -> Result<Workload, einsora_store::StoreError> {
    if to == State::Pending {
        return store.start(w, &reason()).await;
    }
    let admission = admission();
    let change = Transition {
        workload: w,
        to,
        reason: &Reason::Ready,
        admission: (to == State::Provisioning).then_some(&admission),
        fence: None,
    };
    store.transition(&change).await
}

/// A workload brought to `state` along the diagram.
pub async fn workload_in(store: &dyn Store, tenant: TenantId, state: State) -> Workload {
    use State::*;
    let path: &[State] = match state {
        Pending => &[],
        Queued => &[Queued],
        Provisioning => &[Provisioning],
        Running => &[Provisioning, Running],
        Stopping => &[Provisioning, Running, Stopping],
        Stopped => &[Provisioning, Running, Stopping, Stopped],
        Failed => &[Provisioning, Failed],
        Deleting => &[Deleting],
        Deleted => &[Deleting, Deleted],
    };
    let mut w = create(store, tenant, &format!("w-{}", WorkloadId::new())).await;
    for &to in path {
        w = step(store, &w, to).await;
    }
    assert_eq!(w.state, state);
    w
}
