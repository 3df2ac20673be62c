use einsora_core::attempt::Attempt;
use einsora_core::lifecycle::{self, State, TransitionError};
use einsora_core::reasons::Reason;
use einsora_store::{StoreError, Transition};

use crate::harness::{TestDb, admission, create, shape_of, step, tenant, try_step, workload_in};

pub async fn every_legal_step_is_recorded(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    let mut checked = 0;
    for &from in State::ALL {
        for &to in State::ALL {
            if lifecycle::transition(from, to, true).is_err() {
                continue;
            }
            let w = workload_in(store, t, from).await;
            let before = store.events(w.id).await.unwrap().len();
            let after = step(store, &w, to).await;
            let reason = if to == State::Pending {
                "created by you@example.com (browser session)"
            } else {
                "ready"
            };
            assert_eq!(
                (after.state, after.version),
                (to, w.version + 1),
                "{from} -> {to}"
            );
            let stored = store.workload(w.id).await.unwrap().unwrap();
            assert_eq!(
                stored, after,
                "{from} -> {to}: returned row differs from the stored one"
            );
            let events = store.events(w.id).await.unwrap();
            assert_eq!(events.len(), before + 1, "{from} -> {to}");
            let last = events.last().unwrap();
            assert_eq!((last.from, last.to), (Some(from), to));
            assert_eq!(last.reason, reason);
            checked += 1;
        }
    }
    assert_eq!(checked, 21, "the diagram has 21 edges");
}

pub async fn every_illegal_step_is_refused_and_changes_nothing(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    let mut checked = 0;
    for &from in State::ALL {
        let w = workload_in(store, t, from).await;
        let events = store.events(w.id).await.unwrap();
        for &to in State::ALL {
            if lifecycle::transition(from, to, true).is_ok() {
                continue;
            }
            let err = try_step(store, &w, to).await.unwrap_err();
            assert!(
                matches!(
                    err,
                    StoreError::InvalidTransition(TransitionError::NotInDiagram { .. })
                ),
                "{from} -> {to}: {err}"
            );
            checked += 1;
        }
        assert_eq!(
            store.workload(w.id).await.unwrap().unwrap(),
            w,
            "{from} changed"
        );
        assert_eq!(
            store.events(w.id).await.unwrap(),
            events,
            "{from} got events"
        );
    }
    assert_eq!(checked, 9 * 9 - 21);
}

/// Admission and start are the only doors into provisioning and back to pending: the first
/// records a placement and a new attempt, the second re-checks quota.
pub async fn provisioning_needs_admission_and_pending_needs_start(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    let w = create(store, t, "unplaced").await;
    let unplaced = Transition {
        workload: &w,
        to: State::Provisioning,
        reason: &Reason::Ready,
        admission: None,
        fence: None,
    };
    let err = store.transition(&unplaced).await.unwrap_err();
    assert!(matches!(err, StoreError::InvalidInput(_)), "{err}");
    let failed = workload_in(store, t, State::Failed).await;
    let restart = Transition {
        workload: &failed,
        to: State::Pending,
        ..unplaced
    };
    let err = store.transition(&restart).await.unwrap_err();
    assert!(matches!(err, StoreError::InvalidInput(_)), "{err}");
    assert_eq!(store.workload(w.id).await.unwrap().unwrap(), w);
    assert_eq!(store.workload(failed.id).await.unwrap().unwrap(), failed);
}

pub async fn admission_records_placement_and_a_new_attempt(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    let w = create(store, t, "admitted").await;
    assert_eq!(
        (w.attempt, w.placed_class.as_deref()),
        (Attempt::NONE, None)
    );
    let first = step(store, &w, State::Provisioning).await;
    assert_eq!(first.placed_class, Some(admission().placed_class));
    assert_eq!(first.driver.as_deref(), Some("sim"));
    assert_eq!(first.attempt, Attempt::new(1));
    let failed = step(store, &first, State::Failed).await;
    let again = store
        .start(
            &failed,
            shape_of(&failed.gpu_class),
            &crate::harness::reason(),
        )
        .await
        .unwrap();
    // Admitted again, it is given devices: recorded with the placement, read back as given.
    let given = einsora_store::Admission {
        devices: vec!["GPU-7f3a".into(), "GPU-0b1e".into()],
        ..admission()
    };
    let second = store
        .transition(&Transition {
            workload: &again,
            to: State::Provisioning,
            reason: &Reason::Ready,
            admission: Some(&given),
            fence: None,
        })
        .await
        .unwrap();
    assert_eq!(second.attempt, Attempt::new(2));
    assert_eq!(second.devices, given.devices);
    assert_eq!(store.workload(w.id).await.unwrap().unwrap(), second);
    assert!(first.devices.is_empty(), "a CPU admission is given none");
    let events = store.events(w.id).await.unwrap();
    assert_eq!(events.last().unwrap().attempt, Attempt::new(2));
    let err = store
        .transition(&Transition {
            workload: &second,
            to: State::Running,
            reason: &Reason::Ready,
            admission: Some(&admission()),
            fence: None,
        })
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::InvalidInput(_)), "{err}");
}

pub async fn notes_change_no_state(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    let w = workload_in(store, t, State::Running).await;
    store.note(&w, &Reason::MachineOffline, None).await.unwrap();
    let after = store.workload(w.id).await.unwrap().unwrap();
    assert_eq!(after, w, "a note changes neither state nor version");
    let events = store.events(w.id).await.unwrap();
    let note = events.last().unwrap();
    assert!(note.is_note());
    assert_eq!(
        note.reason,
        "its machine is offline; waiting for it to reconnect"
    );
    store.note(&w, &Reason::MachineOffline, None).await.unwrap();
    assert_eq!(
        store.events(w.id).await.unwrap(),
        events,
        "the same note again adds nothing"
    );
    store
        .note(&w, &Reason::StatusUnreadable, None)
        .await
        .unwrap();
    store.note(&w, &Reason::MachineOffline, None).await.unwrap();
    let events = store.events(w.id).await.unwrap();
    assert_eq!(
        events.len(),
        4 + 2,
        "a different note in between: both are kept"
    );
    let moved = step(store, &w, State::Stopping).await;
    let err = store
        .note(&w, &Reason::MachineOffline, None)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Conflict {
                current: State::Stopping
            }
        ),
        "{err}"
    );
    assert_eq!(store.events(w.id).await.unwrap().len(), events.len() + 1);
    assert_eq!(moved.state, State::Stopping);
    let gone = workload_in(store, t, State::Deleted).await;
    let err = store
        .note(&gone, &Reason::MachineOffline, None)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::InvalidInput(_)), "{err}");
}

/// A batch is one transaction whose steps succeed or fail each on its own: a lost race or an
/// illegal step refuses only that step; a lost lease refuses every fenced one.
pub async fn a_batch_applies_each_step_on_its_own(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    let good = create(store, t, "good").await;
    let raced = create(store, t, "raced").await;
    let illegal = create(store, t, "illegal").await;
    // Another writer moves `raced` first: the batch holds a stale copy.
    step(store, &raced, State::Queued).await;
    let also = create(store, t, "also").await;
    let (admission, other) = (
        einsora_store::Admission {
            devices: vec!["GPU-1".into()],
            ..admission()
        },
        einsora_store::Admission {
            devices: vec!["GPU-2".into(), "GPU-3".into()],
            ..admission()
        },
    );
    let steps = [
        Transition {
            workload: &good,
            to: State::Provisioning,
            reason: &Reason::Ready,
            admission: Some(&admission),
            fence: None,
        },
        Transition {
            workload: &also,
            to: State::Provisioning,
            reason: &Reason::Ready,
            admission: Some(&other),
            fence: None,
        },
        Transition {
            workload: &raced,
            to: State::Queued,
            reason: &Reason::Ready,
            admission: None,
            fence: None,
        },
        Transition {
            workload: &illegal,
            to: State::Running,
            reason: &Reason::Ready,
            admission: None,
            fence: None,
        },
    ];
    let results = store.transitions(&steps).await.unwrap();
    let admitted = results[0].as_ref().unwrap();
    assert_eq!(
        (admitted.state, admitted.attempt),
        (State::Provisioning, Attempt::new(1))
    );
    assert_eq!(store.workload(good.id).await.unwrap().unwrap(), *admitted);
    assert_eq!(admitted.devices, ["GPU-1"], "each row its own devices");
    let also = store.workload(also.id).await.unwrap().unwrap();
    assert_eq!(
        (&also, also.devices.as_slice()),
        (
            results[1].as_ref().unwrap(),
            &["GPU-2".to_owned(), "GPU-3".to_owned()][..]
        )
    );
    let results = &results[1..];
    assert!(
        matches!(
            results[1],
            Err(StoreError::Conflict {
                current: State::Queued
            })
        ),
        "{:?}",
        results[1]
    );
    assert!(
        matches!(results[2], Err(StoreError::InvalidTransition(_))),
        "{:?}",
        results[2]
    );
    assert_eq!(store.events(good.id).await.unwrap().len(), 2);
    assert_eq!(
        store.events(raced.id).await.unwrap().len(),
        2,
        "only the other writer's step"
    );
    assert_eq!(store.events(illegal.id).await.unwrap().len(), 1);
    assert!(store.transitions(&[]).await.unwrap().is_empty());

    let lease = store
        .take_lease(
            "controller:local",
            "a",
            std::time::Duration::from_millis(100),
        )
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let admitted = store.workload(good.id).await.unwrap().unwrap();
    let fenced = [Transition {
        workload: &admitted,
        to: State::Running,
        reason: &Reason::Ready,
        admission: None,
        fence: Some(&lease),
    }];
    let results = store.transitions(&fenced).await.unwrap();
    assert!(
        matches!(results[0], Err(StoreError::LeaseLost(_))),
        "{:?}",
        results[0]
    );
    assert_eq!(
        store.events(good.id).await.unwrap().len(),
        2,
        "nothing written"
    );
}

/// A step the database itself refuses (here an admission naming a machine it doesn't have)
/// fails alone: the batch's other steps are still written.
pub async fn a_step_the_database_refuses_fails_alone(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    let first = create(store, t, "first").await;
    let refused = create(store, t, "refused").await;
    let last = create(store, t, "last").await;
    let good = admission();
    let nowhere = einsora_store::Admission {
        machine_id: Some(einsora_core::ids::MachineId::new()),
        ..admission()
    };
    let admit = |w, a| Transition {
        workload: w,
        to: State::Provisioning,
        reason: &Reason::Ready,
        admission: Some(a),
        fence: None,
    };
    let steps = [
        admit(&first, &good),
        admit(&refused, &nowhere),
        admit(&last, &good),
    ];
    let results = store.transitions(&steps).await.unwrap();
    assert_eq!(results[0].as_ref().unwrap().state, State::Provisioning);
    assert!(
        matches!(results[1], Err(StoreError::InvalidInput(_))),
        "{:?}",
        results[1]
    );
    assert_eq!(results[2].as_ref().unwrap().state, State::Provisioning);
    assert_eq!(store.workload(refused.id).await.unwrap().unwrap(), refused);
    assert_eq!(store.events(refused.id).await.unwrap().len(), 1);
}

/// Postgres: the controller's steps write on a connection the store holds outside the pool.
/// When the server drops the store's connections, a step fails as unavailable (once per dead
/// connection it meets) and the steps after go on, on new ones: none stays broken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_steps_go_on_after_the_server_drops_the_stores_connections() {
    let db = TestDb::postgres().await;
    let store = &*db.store;
    let t = tenant(store, None).await;
    let w = workload_in(store, t, State::Running).await;
    let w = step(store, &w, State::Stopping).await;
    db.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = current_database() AND pid <> pg_backend_pid()",
    );
    let mut failed = 0;
    let stopped = loop {
        match try_step(store, &w, State::Stopped).await {
            Ok(stopped) => break stopped,
            Err(StoreError::Unavailable(_)) if failed < 40 => failed += 1,
            Err(e) => panic!("after {failed} unavailable steps: {e}"),
        }
    };
    assert_eq!(stopped.state, State::Stopped);
    let w = step(store, &stopped, State::Deleting).await;
    assert_eq!(w.state, State::Deleting, "a step after the first good one");
}
