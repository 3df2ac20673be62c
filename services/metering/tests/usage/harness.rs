//! A real store per case (SQLite in a temp dir, or a fresh database on the shared throwaway
//! Postgres), and workloads taken through their lifecycle by the Store API.

use std::sync::Arc;

use einsora_core::ids::{TenantId, WorkloadId};
use einsora_core::kind::WorkloadKind;
use einsora_core::lifecycle::State;
use einsora_core::reasons::{Actor, Credential, Reason};
use einsora_core::region::Region;
use einsora_core::workload::Workload;
use einsora_store::{
    Admission, DatabaseUrl, NewTenant, NewWorkload, QuotaClass, Store, Transition, UsageRecord,
};
use einsora_testkit::TempPostgres;
use time::OffsetDateTime;

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
    /// The same database opened again, as a restarted metering process would.
    pub async fn reopen(&self) -> Arc<dyn Store> {
        einsora_store::open(&self.url).await.unwrap()
    }

    /// Moves a workload's timeline to these times, one per event, oldest first: the store
    /// stamps events with its own clock, and the test needs them on either side of an hour.
    pub async fn set_event_times(&self, id: WorkloadId, times: &[OffsetDateTime]) {
        let events = self.store.events(id).await.unwrap();
        assert_eq!(events.len(), times.len(), "one time per event");
        let sql: String = events
            .iter()
            .zip(times)
            .map(|(e, at)| {
                let ms = at.unix_timestamp_nanos() / 1_000_000;
                format!(
                    "UPDATE workload_events SET at = {ms} WHERE seq = {};",
                    e.seq
                )
            })
            .collect();
        self.execute(&sql);
    }

    /// Runs SQL behind the store's back, with the engine's own client.
    fn execute(&self, sql: &str) {
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

    /// `(hour, seconds)` of the workload's usage records.
    pub async fn usage(&self, w: &Workload) -> Vec<(OffsetDateTime, u32)> {
        self.records(w)
            .await
            .iter()
            .map(|r| (r.hour_start, r.seconds))
            .collect()
    }

    pub async fn records(&self, w: &Workload) -> Vec<UsageRecord> {
        self.store.workload_usage(w.tenant_id, w.id).await.unwrap()
    }
}

pub async fn tenant(store: &dyn Store) -> TenantId {
    let id = TenantId::new();
    let tenant = NewTenant {
        id,
        slug: format!("t-{id}"),
        name: "Test".into(),
        trusted: true,
    };
    store.create_tenant(&tenant).await.unwrap();
    store
        .set_quota(id, &QuotaClass::Default, None)
        .await
        .unwrap();
    id
}

pub const REQUESTED_CLASS: &str = "gpu-h100";
pub const PLACED_CLASS: &str = "gpu-a100";
pub const UNITS: u32 = 2;

pub async fn create(store: &dyn Store, tenant: TenantId, name: &str) -> Workload {
    let new = NewWorkload {
        id: WorkloadId::new(),
        tenant_id: tenant,
        kind: WorkloadKind::Notebook,
        name: name.into(),
        gpu_class: REQUESTED_CLASS.into(),
        units: UNITS,
        image: "jupyterlab".into(),
        region: Region::new("local").unwrap(),
        fallback: vec![PLACED_CLASS.into()],
        fallback_after_s: None,
        params: "{}".into(),
    };
    store.create_workload(&new, &created()).await.unwrap()
}

fn created() -> Reason {
    Reason::Created {
        by: Actor {
            subject: "you@example.com".into(),
            credential: Credential::BrowserSession,
        },
    }
}

/// One step of the lifecycle; admission places it on `PLACED_CLASS`.
pub async fn step(store: &dyn Store, w: &Workload, to: State) -> Workload {
    if to == State::Pending {
        return store.start(w, &created()).await.unwrap();
    }
    let admission = Admission {
        placed_class: PLACED_CLASS.into(),
        machine_id: None,
        driver: Some("sim".into()),
    };
    let change = Transition {
        workload: w,
        to,
        reason: &Reason::Ready,
        admission: (to == State::Provisioning).then_some(&admission),
        fence: None,
    };
    store.transition(&change).await.unwrap()
}

/// A new workload taken through `steps`.
pub async fn workload(store: &dyn Store, tenant: TenantId, steps: &[State]) -> Workload {
    let mut w = create(store, tenant, &format!("w-{}", WorkloadId::new())).await;
    for &to in steps {
        w = step(store, &w, to).await;
    }
    w
}
