//! Passes over a real SQLite store and the fake backend: each step's transitions and the exact
//! timeline reasons.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use einsora_core::catalog::Catalog;
use einsora_core::ids::TenantId;
use einsora_core::kind::WorkloadKind;
use einsora_core::lifecycle::State;
use einsora_core::reasons::{Actor, Credential, Reason, UserAction};
use einsora_core::workload::Workload;
use einsora_store::{NewWorkload, QuotaClass, Store, StoreError, Transition};
use einsora_testkit::db::TestDb;
use einsora_testkit::fixtures::{local, new_workload, shape_of, tenant_as};

use super::Reconciler;
use crate::config::Timers;
use crate::fake::{FakeBackend, FakeConfig, Fault};
use crate::writer::Fenced;

struct World {
    store: Arc<dyn Store>,
    reconciler: Reconciler,
    tenant: TenantId,
    _db: TestDb,
    _dir: tempfile::TempDir,
}

fn user() -> Actor {
    Actor {
        subject: "you@example.com".into(),
        credential: Credential::BrowserSession,
    }
}

async fn world(capacity: &[(&str, u64)], faults: &[(Fault, &str)], timers: Timers) -> World {
    world_of(false, capacity, faults, timers).await
}

/// A world whose tenant is `trusted` (it sees free capacity in its waits).
async fn world_of(
    trusted: bool,
    capacity: &[(&str, u64)],
    faults: &[(Fault, &str)],
    timers: Timers,
) -> World {
    let dir = tempfile::tempdir().unwrap();
    let state_file = Some(dir.path().join("fake-runtime.jsonl"));
    let db = TestDb::sqlite().await;
    let store = Arc::clone(&db.store);
    let tenant = tenant_as(&*store, trusted, QuotaClass::Default, None).await;
    let lease = store
        .take_lease("controller:local", "test", timers.lease)
        .await
        .unwrap()
        .unwrap();
    let fake = FakeConfig {
        capacity: capacity
            .iter()
            .map(|(c, u)| ((*c).to_owned(), *u))
            .collect::<BTreeMap<_, _>>(),
        ready_delay: Duration::ZERO,
        faults: faults.iter().map(|(f, p)| (*f, (*p).to_owned())).collect(),
        state_file,
    };
    let reconciler = Reconciler {
        store: Arc::clone(&store),
        backend: FakeBackend::start(fake),
        catalog: Arc::new(Catalog::builtin()),
        region: local(),
        timers,
        writer: Fenced::new(Arc::clone(&store), lease),
        agents: None,
    };
    World {
        store,
        reconciler,
        tenant,
        _db: db,
        _dir: dir,
    }
}

fn timers() -> Timers {
    Timers {
        interval: Duration::from_millis(100),
        lease: Duration::from_secs(30),
        provisioning_timeout: Duration::from_secs(600),
        aging_after: Duration::from_secs(600),
        offline_after: Duration::from_secs(45),
        offline_fail: Duration::from_secs(600),
        cert_lifetime: Duration::from_secs(3600),
        stream: crate::agents::StreamTimers::default(),
    }
}

impl World {
    async fn create(&self, name: &str, class: &str, units: u32) -> Workload {
        let kind = if class.starts_with("cpu") {
            WorkloadKind::Notebook
        } else {
            WorkloadKind::Endpoint
        };
        let image = if kind == WorkloadKind::Notebook {
            "jupyterlab"
        } else {
            "openai-endpoint"
        };
        let new = NewWorkload {
            kind,
            gpu_class: class.into(),
            units,
            shape: shape_of(class),
            image: image.into(),
            ..new_workload(self.tenant, name)
        };
        let by = user();
        let created = Reason::Created { by };
        self.store.create_workload(&new, &created).await.unwrap()
    }

    async fn pass(&mut self) {
        self.reconciler.pass().await.unwrap();
    }

    async fn get(&self, w: &Workload) -> Workload {
        self.store.workload(w.id).await.unwrap().unwrap()
    }

    async fn state(&self, w: &Workload) -> State {
        self.get(w).await.state
    }

    /// What the API does for a user's stop or delete.
    async fn request(&self, w: &Workload, to: State, action: UserAction) {
        let w = self.get(w).await;
        self.store
            .transition(&Transition {
                workload: &w,
                to,
                reason: &Reason::Requested { action, by: user() },
                admission: None,
                fence: None,
            })
            .await
            .unwrap();
    }

    async fn timeline(&self, w: &Workload) -> Vec<String> {
        let events = self.store.events(w.id).await.unwrap();
        events
            .iter()
            .map(|e| match e.from {
                Some(from) if from == e.to => format!("note: {}", e.reason),
                _ => format!("{}: {}", e.to, e.reason),
            })
            .collect()
    }
}

#[tokio::test]
async fn a_workload_goes_through_its_whole_life_with_the_seeds_reasons() {
    let mut w = world(&[("cpu-1c-2g", 1)], &[], timers()).await;
    let nb = w.create("nb", "cpu-1c-2g", 1).await;
    w.pass().await;
    assert_eq!(
        w.state(&nb).await,
        State::Running,
        "admitted, run and ready in one pass"
    );
    w.request(&nb, State::Stopping, UserAction::Stop).await;
    w.pass().await;
    assert_eq!(w.state(&nb).await, State::Stopped);
    let stopped = w.get(&nb).await;
    w.store
        .start(
            &stopped,
            shape_of(&stopped.gpu_class),
            &Reason::Requested {
                action: UserAction::Start,
                by: user(),
            },
        )
        .await
        .unwrap();
    w.pass().await;
    assert_eq!(w.state(&nb).await, State::Running);
    w.request(&nb, State::Deleting, UserAction::Delete).await;
    w.pass().await;
    assert_eq!(w.state(&nb).await, State::Deleted);
    assert_eq!(
        w.timeline(&nb).await,
        [
            "pending: created by you@example.com (browser session)",
            "provisioning: admitted: 1 × cpu-1c-2g",
            "running: ready",
            "stopping: stop requested by you@example.com (browser session)",
            "stopped: resources released",
            "pending: start requested by you@example.com (browser session)",
            "provisioning: admitted: 1 × cpu-1c-2g",
            "running: ready",
            "deleting: delete requested by you@example.com (browser session)",
            "deleted: deleted, with everything it stored",
        ]
    );
    assert_eq!(
        w.get(&nb).await.attempt.get(),
        2,
        "each admission is a new attempt"
    );
}

#[tokio::test]
async fn full_capacity_queues_then_admits_first_come_first_with_backfill() {
    let mut w = world(&[("l40s-48gb", 3)], &[], timers()).await;
    let holder = w.create("holder", "l40s-48gb", 2).await;
    w.pass().await;
    assert_eq!(w.state(&holder).await, State::Running);
    let big = w.create("big", "l40s-48gb", 2).await;
    let second = w.create("second", "l40s-48gb", 2).await;
    let small = w.create("small", "l40s-48gb", 1).await;
    w.pass().await;
    assert_eq!(w.state(&big).await, State::Queued);
    assert_eq!(w.state(&second).await, State::Queued);
    assert_eq!(
        w.state(&small).await,
        State::Running,
        "backfill: the small one fits"
    );
    assert_eq!(
        w.timeline(&big).await[1],
        "queued: waiting for l40s-48gb capacity: requested 2 GPU(s), not enough free right now"
    );
    w.request(&holder, State::Deleting, UserAction::Delete)
        .await;
    w.pass().await;
    w.pass().await;
    assert_eq!(
        w.state(&big).await,
        State::Running,
        "the first in line goes first"
    );
    assert_eq!(w.state(&second).await, State::Queued);
}

/// Why a queued workload waits is noted when it changes, and only then: the timeline always
/// says the current reason.
#[tokio::test]
async fn a_queued_workloads_reason_is_noted_when_it_changes() {
    let mut w = world_of(true, &[("l40s-48gb", 3)], &[], timers()).await;
    let holder = w.create("holder", "l40s-48gb", 2).await;
    w.pass().await;
    let big = w.create("big", "l40s-48gb", 2).await;
    let small = w.create("small", "l40s-48gb", 1).await;
    w.pass().await;
    assert_eq!(
        w.state(&small).await,
        State::Running,
        "backfill takes the last one"
    );
    w.pass().await;
    w.pass().await;
    assert_eq!(
        w.timeline(&big).await[1..],
        [
            "queued: waiting for l40s-48gb capacity: requested 2 GPU(s), 1 free",
            "note: waiting for l40s-48gb capacity: requested 2 GPU(s), 0 free",
        ]
    );
    w.request(&holder, State::Deleting, UserAction::Delete)
        .await;
    w.pass().await;
    w.pass().await;
    assert_eq!(w.state(&big).await, State::Running);
}

#[tokio::test]
async fn a_refused_run_is_noted_once_per_episode_and_times_out() {
    let mut w = world(&[("cpu-1c-2g", 2)], &[(Fault::Refuse, "bad-")], timers()).await;
    let bad = w.create("bad-1", "cpu-1c-2g", 1).await;
    for _ in 0..4 {
        w.pass().await;
    }
    assert_eq!(w.state(&bad).await, State::Provisioning);
    w.reconciler.timers.provisioning_timeout = Duration::from_millis(1);
    w.pass().await;
    assert_eq!(
        w.timeline(&bad).await[1..],
        [
            "provisioning: admitted: 1 × cpu-1c-2g".to_owned(),
            "note: couldn't start it on the runtime; retrying. The operator's log has the details under this workload's ID.".to_owned(),
            "failed: it didn't become ready within 1ms".to_owned(),
        ]
    );
}

#[tokio::test]
async fn runtime_failures_vanishing_and_unreadable_status() {
    let faults = [
        (Fault::Fail, "fail-"),
        (Fault::Vanish, "gone-"),
        (Fault::Unreadable, "blind-"),
    ];
    let mut w = world(&[("cpu-1c-2g", 3)], &faults, timers()).await;
    let failing = w.create("fail-1", "cpu-1c-2g", 1).await;
    let vanishing = w.create("gone-1", "cpu-1c-2g", 1).await;
    let blind = w.create("blind-1", "cpu-1c-2g", 1).await;
    for _ in 0..3 {
        w.pass().await;
    }
    assert_eq!(
        w.timeline(&failing).await.last().unwrap(),
        "failed: the fake runtime failed it (injected fault)"
    );
    assert_eq!(
        w.timeline(&vanishing).await[2..],
        ["running: ready", "failed: it vanished from the runtime"]
    );
    assert_eq!(
        w.state(&blind).await,
        State::Provisioning,
        "an unreadable status decides nothing"
    );
    let notes = w
        .timeline(&blind)
        .await
        .into_iter()
        .filter(|e| e.starts_with("note:"))
        .count();
    assert_eq!(notes, 1, "one note for the episode, not one per pass");
}

#[tokio::test]
async fn a_class_removed_from_the_catalog_fails_waiting_workloads() {
    let mut w = world(&[("cpu-1c-2g", 1)], &[], timers()).await;
    let retired = w.create("old", "cpu-1c-2g", 1).await;
    let yaml = include_str!("../../../../catalog/catalog.yaml")
        .replace("name: cpu-1c-2g", "name: cpu-1c-2g-new");
    w.reconciler.catalog = Arc::new(Catalog::from_yaml(&yaml).unwrap());
    w.pass().await;
    assert_eq!(
        w.timeline(&retired).await.last().unwrap(),
        r#"failed: can't start: GPU class "cpu-1c-2g" is no longer offered by this installation"#
    );
}

#[tokio::test]
async fn a_controller_that_lost_its_lease_commits_nothing() {
    let mut t = timers();
    t.lease = Duration::from_millis(200);
    let mut w = world(&[("cpu-1c-2g", 1)], &[], t).await;
    let nb = w.create("nb", "cpu-1c-2g", 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let other = w
        .store
        .take_lease("controller:local", "other", Duration::from_secs(30))
        .await
        .unwrap();
    assert!(other.is_some(), "the expired lease is free to take");
    let err = w.reconciler.pass().await.unwrap_err();
    assert!(matches!(err, StoreError::LeaseLost(_)), "{err}");
    assert_eq!(w.state(&nb).await, State::Pending);
    assert_eq!(w.timeline(&nb).await.len(), 1);
}

#[tokio::test]
async fn a_restarted_controller_finds_the_runtime_as_it_was() {
    let mut w = world(&[("cpu-1c-2g", 1)], &[], timers()).await;
    let nb = w.create("nb", "cpu-1c-2g", 1).await;
    w.pass().await;
    assert_eq!(w.state(&nb).await, State::Running);
    let fake = FakeConfig {
        capacity: BTreeMap::from([("cpu-1c-2g".to_owned(), 1)]),
        ready_delay: Duration::ZERO,
        faults: vec![],
        state_file: Some(w._dir.path().join("fake-runtime.jsonl")),
    };
    w.reconciler.backend = FakeBackend::start(fake);
    w.pass().await;
    assert_eq!(w.state(&nb).await, State::Running, "it didn't vanish");
}

mod fallback;

/// Scale-to-zero: an endpoint that parks when idle is parked once it has gone its time without
/// a request (counted from its start, or its last request as the proxy reported it), through
/// the normal stop; a recent request keeps it running, also for a controller started afresh
/// (the time is in the store); one that doesn't park runs on.
#[tokio::test]
async fn an_idle_endpoint_is_parked_after_its_time_and_a_used_one_is_not() {
    let mut w = world(&[("l40s-48gb", 2)], &[], timers()).await;
    let params = |park: &str| format!(r#"{{"model":"m.gguf"{park}}}"#);
    let make = |name: &'static str, params: String| {
        let new = NewWorkload {
            kind: WorkloadKind::Endpoint,
            gpu_class: "l40s-48gb".into(),
            units: 1,
            shape: shape_of("l40s-48gb"),
            image: "openai-endpoint".into(),
            params,
            ..new_workload(w.tenant, name)
        };
        let store = Arc::clone(&w.store);
        async move {
            let created = Reason::Created { by: user() };
            store.create_workload(&new, &created).await.unwrap()
        }
    };
    let parks = make("parks", params(r#","park_after_idle_s":60"#)).await;
    let stays = make("stays", params("")).await;
    w.pass().await;
    assert_eq!(w.state(&parks).await, State::Running);
    w.pass().await;
    assert_eq!(w.state(&parks).await, State::Running, "just started");

    // Two minutes on (every time moved back), with a request ten seconds ago: not idle.
    w._db
        .execute("UPDATE workload_events SET at = at - 120000; UPDATE workloads SET updated_at = updated_at - 120000");
    let recent = time::OffsetDateTime::now_utc() - time::Duration::seconds(10);
    w.store.touch_endpoints(&[parks.id], recent).await.unwrap();
    // An older report doesn't move it back.
    let older = recent - time::Duration::seconds(300);
    w.store.touch_endpoints(&[parks.id], older).await.unwrap();
    w.pass().await;
    assert_eq!(
        w.state(&parks).await,
        State::Running,
        "used ten seconds ago"
    );

    // A controller started afresh on the same database decides the same.
    let store = w._db.open_again().await;
    let lease = store
        .take_lease("controller:local", "test", timers().lease)
        .await
        .unwrap()
        .unwrap();
    w.reconciler.writer = Fenced::new(Arc::clone(&store), lease);
    w.reconciler.store = store;
    w.pass().await;
    assert_eq!(
        w.state(&parks).await,
        State::Running,
        "used ten seconds ago"
    );

    // Its last request two minutes ago now: parked, through the normal stop.
    w._db
        .execute("UPDATE workloads SET last_request_at = last_request_at - 120000");
    w.pass().await;
    w.pass().await;
    assert_eq!(w.state(&parks).await, State::Stopped);
    assert_eq!(w.state(&stays).await, State::Running, "it doesn't park");
    let timeline = w.timeline(&parks).await;
    assert_eq!(
        timeline[timeline.len() - 2..],
        [
            "stopping: parked after 1 min without requests",
            "stopped: resources released",
        ]
    );
}
