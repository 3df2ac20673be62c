use einsora_core::ids::{MachineId, WorkloadId};
use einsora_core::lifecycle::State;
use einsora_core::machine::ModelFile;
use einsora_core::reasons::Reason;
use einsora_store::{Admission, StoreError, Transition, UsageCursor, UsagePage, WorkloadPage};
use time::Duration;
use time::macros::datetime;

use einsora_testkit::fixtures::{registration, usage};

use crate::harness::{TestDb, create, local, step, tenant, workload_in};

pub async fn workload_reads_are_scoped_by_tenant(db: TestDb) {
    let store = &*db.store;
    let (t, other) = (tenant(store, None).await, tenant(store, None).await);
    let first = create(store, t, "first").await;
    let gone = workload_in(store, t, State::Deleted).await;
    let last = create(store, t, "last").await;
    create(store, other, "theirs").await;

    assert_eq!(
        store.workload_of(t, first.id).await.unwrap(),
        Some(first.clone())
    );
    assert_eq!(store.workload_of(other, first.id).await.unwrap(), None);
    assert_eq!(store.workload_of(t, WorkloadId::new()).await.unwrap(), None);

    let page = |include_deleted, before, limit| WorkloadPage {
        owner: None,
        include_deleted,
        before,
        limit,
    };
    let ids = |ws: Vec<einsora_core::workload::Workload>| ws.into_iter().map(|w| w.id).collect();
    let live: Vec<_> = ids(store.workloads_of(t, &page(false, None, 10)).await.unwrap());
    assert_eq!(live, [last.id, first.id], "newest first, deleted hidden");
    let all: Vec<_> = ids(store.workloads_of(t, &page(true, None, 10)).await.unwrap());
    assert_eq!(all, [last.id, gone.id, first.id]);
    let head: Vec<_> = ids(store.workloads_of(t, &page(true, None, 2)).await.unwrap());
    assert_eq!(head, [last.id, gone.id]);
    let tail: Vec<_> = ids(store
        .workloads_of(t, &page(true, Some(gone.id), 2))
        .await
        .unwrap());
    assert_eq!(tail, [first.id], "the page after the cursor");
}

pub async fn machines_are_read_by_their_owner_only(db: TestDb) {
    let store = &*db.store;
    let (t, other) = (tenant(store, None).await, tenant(store, None).await);
    let seen = datetime!(2025-03-01 12:00:00.123 UTC);
    let a = registration(t, "studio", Some(seen));
    let b = registration(t, "laptop", None);
    let theirs = registration(other, "theirs", None);
    for m in [&a, &b, &theirs] {
        store.put_machine(m).await.unwrap();
    }

    let mine = store.machines_of(t).await.unwrap();
    let names: Vec<_> = mine.iter().map(|m| m.machine.name.as_str()).collect();
    assert_eq!(
        names,
        ["studio", "laptop"],
        "oldest first, only the owner's"
    );
    assert_eq!(mine[0].machine, a.machine);
    assert_eq!(mine[0].drivers, a.drivers);
    assert_eq!(mine[0].models, a.models);
    assert_eq!(mine[0].last_seen_at, Some(seen));
    assert_eq!(mine[1].models, a.models);

    // Its agent's next inventory replaces the model files it offers.
    let mut reported = a.clone();
    reported.models = vec![
        ModelFile {
            path: "chat.gguf".into(),
            size_bytes: 9,
        },
        ModelFile {
            path: "team/tiny.gguf".into(),
            size_bytes: 4096,
        },
    ];
    assert!(store.record_inventory(&reported).await.unwrap());
    let read = store.machine_of(t, a.machine.id).await.unwrap().unwrap();
    assert_eq!(read.models, reported.models);
    reported.models.clear();
    assert!(store.record_inventory(&reported).await.unwrap());
    let read = store.machine_of(t, a.machine.id).await.unwrap().unwrap();
    assert!(read.models.is_empty(), "none offered any more");
    assert_eq!(read.gpu_note, None);

    // Its agent says its GPUs can't be used: kept until a report says they can.
    reported.gpu_note = Some(einsora_core::machine::GpuNote::NvidiaUnusable);
    assert!(store.record_inventory(&reported).await.unwrap());
    let read = store.machine_of(t, a.machine.id).await.unwrap().unwrap();
    assert_eq!(read.gpu_note, reported.gpu_note);
    assert_eq!(
        read.machine.devices, a.machine.devices,
        "still listed, for its page"
    );
    reported.gpu_note = None;
    assert!(store.record_inventory(&reported).await.unwrap());
    let read = store.machine_of(t, a.machine.id).await.unwrap().unwrap();
    assert_eq!(read.gpu_note, None);

    // How it runs VMs, with or without its owner's limit, as its agent last said.
    assert_eq!(read.vm, None);
    for vm in [
        Some(einsora_core::machine::VmHost {
            accel: einsora_core::machine::VmAccel::Tcg,
            limit: Some(3),
        }),
        Some(einsora_core::machine::VmHost {
            accel: einsora_core::machine::VmAccel::Kvm,
            limit: None,
        }),
        None,
    ] {
        reported.vm = vm;
        assert!(store.record_inventory(&reported).await.unwrap());
        let read = store.machine_of(t, a.machine.id).await.unwrap().unwrap();
        assert_eq!(read.vm, vm);
        let mut put = reported.clone();
        put.vm = vm;
        store.put_machine(&put).await.unwrap();
        let read = store.machine_of(t, a.machine.id).await.unwrap().unwrap();
        assert_eq!(read.vm, vm);
    }

    // A Mac's agent reports its cores by kind; a machine that doesn't has none.
    assert_eq!(read.machine.cores, None);
    reported.machine.cores = Some(einsora_core::machine::CpuCores {
        performance: 12,
        efficiency: 4,
    });
    assert!(store.record_inventory(&reported).await.unwrap());
    let read = store.machine_of(t, a.machine.id).await.unwrap().unwrap();
    assert_eq!(read.machine.cores, reported.machine.cores);
    let mut put = reported.clone();
    put.machine.cores = None;
    store.put_machine(&put).await.unwrap();
    let read = store.machine_of(t, a.machine.id).await.unwrap().unwrap();
    assert_eq!(read.machine.cores, None);
    reported.machine.cores = None;
    assert_eq!((mine[1].last_seen_at, mine[1].revoked_at), (None, None));
    assert_eq!(store.machine_of(other, a.machine.id).await.unwrap(), None);
    assert_eq!(store.machine_of(t, MachineId::new()).await.unwrap(), None);

    // An agent's report updates what it reports; a report without a time keeps the last one.
    let mut renamed = a.clone();
    renamed.machine.name = "studio-2".into();
    renamed.last_seen_at = None;
    store.put_machine(&renamed).await.unwrap();
    let read = store.machine_of(t, a.machine.id).await.unwrap().unwrap();
    assert_eq!(
        (read.machine.name.as_str(), read.last_seen_at),
        ("studio-2", Some(seen))
    );

    let mut moved = a.clone();
    moved.machine.owner = other;
    let err = store.put_machine(&moved).await.unwrap_err();
    assert!(matches!(err, StoreError::InvalidInput(_)), "{err}");
    let mut elsewhere = a.clone();
    elsewhere.machine.region = einsora_core::region::Region::new("other").unwrap();
    assert!(store.put_machine(&elsewhere).await.is_err());
    let kept = store.machine_of(t, a.machine.id).await.unwrap().unwrap();
    assert_eq!((kept.machine.owner, kept.machine.region), (t, local()));

    assert_eq!(
        store.revoke_machine(other, a.machine.id).await.unwrap(),
        None
    );
    let revoked = store
        .revoke_machine(t, a.machine.id)
        .await
        .unwrap()
        .unwrap();
    let at = revoked.revoked_at.expect("revoked");
    let again = store
        .revoke_machine(t, a.machine.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.revoked_at, Some(at), "revoking again changes nothing");
    let other_machine = store.machine_of(t, b.machine.id).await.unwrap().unwrap();
    assert_eq!(other_machine.revoked_at, None);
}

pub async fn machines_count_the_tenants_workloads_holding_them(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    let m = registration(t, "studio", None);
    store.put_machine(&m).await.unwrap();
    let on_machine = Admission {
        placed_class: "cpu-1c-2g".into(),
        machine_id: Some(m.machine.id),
        driver: Some("sim".into()),
        devices: Vec::new(),
    };
    let mut placed = Vec::new();
    for name in ["a", "b", "c"] {
        let w = create(store, t, name).await;
        let w = store
            .transition(&Transition {
                workload: &w,
                to: State::Provisioning,
                reason: &Reason::Ready,
                admission: Some(&on_machine),
                fence: None,
            })
            .await
            .unwrap();
        placed.push(w);
    }
    let running = step(store, &placed[0], State::Running).await;
    let stopping = step(store, &running, State::Stopping).await;
    step(store, &stopping, State::Stopped).await;
    create(store, t, "unplaced").await;

    let read = store.machine_of(t, m.machine.id).await.unwrap().unwrap();
    assert_eq!(
        read.workload_count, 2,
        "stopped and unplaced ones hold nothing"
    );
    assert_eq!(store.machines_of(t).await.unwrap()[0].workload_count, 2);
}

pub async fn usage_is_read_by_tenant_and_period(db: TestDb) {
    let store = &*db.store;
    let (t, other) = (tenant(store, None).await, tenant(store, None).await);
    let w = create(store, t, "w").await;
    // `v` is a teammate's: a member's view leaves it out.
    let teammate = einsora_core::ids::UserId::new();
    let v = einsora_store::NewWorkload {
        owner: Some(teammate),
        ..crate::harness::new_workload(t, "v")
    };
    let v = store
        .create_workload(&v, &crate::harness::reason())
        .await
        .unwrap();
    let theirs = create(store, other, "theirs").await;
    let h0 = datetime!(2025-03-01 10:00 UTC);
    let hour = |n: i64| h0 + Duration::hours(n);
    for r in [
        usage(t, w.id, hour(0), 3600),
        usage(t, w.id, hour(1), 1800),
        usage(t, v.id, hour(1), 60),
        usage(t, w.id, hour(2), 10),
        usage(other, theirs.id, hour(1), 3600),
    ] {
        store.record_usage(&r).await.unwrap();
    }
    // A later report of the same hour replaces it.
    store
        .record_usage(&usage(t, w.id, hour(1), 2400))
        .await
        .unwrap();

    let period = |after, limit| UsagePage {
        from: hour(1),
        to: hour(2),
        owner: None,
        after,
        limit,
    };
    let all = store.usage_of(t, &period(None, 10)).await.unwrap();
    let got: Vec<_> = all.iter().map(|r| (r.workload_id, r.seconds)).collect();
    // Same hour: by ID, and a replaced record keeps its first ID.
    assert_eq!(
        got,
        [(w.id, 2400), (v.id, 60)],
        "[from, to), this tenant's only"
    );

    let only_theirs = UsagePage {
        owner: Some(teammate),
        ..period(None, 10)
    };
    let got: Vec<_> = store.usage_of(t, &only_theirs).await.unwrap();
    assert_eq!(
        got,
        [all[1].clone()],
        "a member's view: their own workloads' only"
    );

    let first = store.usage_of(t, &period(None, 1)).await.unwrap();
    assert_eq!(first, all[..1]);
    let after = Some(UsageCursor::from(&first[0]));
    assert_eq!(
        store.usage_of(t, &period(after, 5)).await.unwrap(),
        all[1..]
    );

    let of_w: Vec<_> = store.workload_usage(t, w.id).await.unwrap();
    let hours: Vec<_> = of_w.iter().map(|r| (r.hour_start, r.seconds)).collect();
    assert_eq!(hours, [(hour(0), 3600), (hour(1), 2400), (hour(2), 10)]);
    assert_eq!(store.workload_usage(other, w.id).await.unwrap(), []);

    let off_hour = usage(t, w.id, h0 + Duration::minutes(5), 1);
    assert!(matches!(
        store.record_usage(&off_hour).await,
        Err(StoreError::InvalidInput(_))
    ));
}

/// A workload deleted while its machine was away stays in that machine's desired state until
/// the machine confirms its removal; other machines never see it; a revoked or unknown machine
/// is gone.
pub async fn a_removal_pends_until_the_machine_confirms_it(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    let (m, elsewhere) = (
        registration(t, "away", None),
        registration(t, "other", None),
    );
    store.put_machine(&m).await.unwrap();
    store.put_machine(&elsewhere).await.unwrap();
    let id = m.machine.id;
    let on_machine = Admission {
        placed_class: "cpu-1c-2g".into(),
        machine_id: Some(id),
        driver: Some("sim".into()),
        devices: Vec::new(),
    };
    let on_machine = &on_machine;
    let placed = |name: &'static str| async move {
        let w = create(store, t, name).await;
        store
            .transition(&Transition {
                workload: &w,
                to: State::Provisioning,
                reason: &Reason::Ready,
                admission: Some(on_machine),
                fence: None,
            })
            .await
            .unwrap()
    };
    let (pending, removed) = (placed("pending").await, placed("removed").await);
    placed("live").await;
    for w in [&pending, &removed] {
        let deleting = step(store, w, State::Deleting).await;
        if w.id == pending.id {
            store.pend_removal(w.id, id).await.unwrap();
            store.pend_removal(w.id, id).await.unwrap();
        }
        step(store, &deleting, State::Deleted).await;
    }
    let on = |machine| async move {
        let listed = store.workloads_on(machine).await.unwrap();
        listed.iter().map(|w| w.name.clone()).collect::<Vec<_>>()
    };
    let mut names = on(id).await;
    names.sort();
    assert_eq!(
        names,
        ["live", "pending"],
        "the removed one is gone for good"
    );
    assert!(on(elsewhere.machine.id).await.is_empty());

    store
        .confirm_removal(pending.id, elsewhere.machine.id)
        .await
        .unwrap();
    assert_eq!(on(id).await.len(), 2, "only its own machine confirms it");
    store.confirm_removal(pending.id, id).await.unwrap();
    assert_eq!(on(id).await, ["live"]);

    assert!(!store.machine_gone(id).await.unwrap());
    store.revoke_machine(t, id).await.unwrap();
    assert!(store.machine_gone(id).await.unwrap(), "revoked");
    assert!(
        store.machine_gone(MachineId::new()).await.unwrap(),
        "unknown"
    );
}

/// A GPU usage sample replaces the one before; before the first there is none.
pub async fn a_machines_gpu_use_is_its_last_sample(db: TestDb) {
    use einsora_core::machine::GpuSample;
    let store = &*db.store;
    let t = tenant(store, None).await;
    let m = registration(t, "gpubox", None);
    store.put_machine(&m).await.unwrap();
    let id = m.machine.id;
    assert_eq!(store.gpu_use_on(id).await.unwrap(), (vec![], None));
    let read = store.machine_of(t, id).await.unwrap().unwrap();
    assert_eq!((read.gpu_usage, read.gpu_usage_at), (vec![], None));

    let sample = |percent, mib: u64| GpuSample {
        uuid: "GPU-1".into(),
        utilization_percent: percent,
        memory_used_bytes: mib << 20,
    };
    let (first, then) = (
        datetime!(2025-03-01 12:00:00.123 UTC),
        datetime!(2025-03-01 12:00:15.456 UTC),
    );
    store
        .record_gpu_usage(id, &[sample(87, 20480)], first)
        .await
        .unwrap();
    store
        .record_gpu_usage(id, &[sample(3, 512)], then)
        .await
        .unwrap();
    assert_eq!(
        store.gpu_use_on(id).await.unwrap(),
        (vec![sample(3, 512)], Some(then))
    );
    let read = store.machine_of(t, id).await.unwrap().unwrap();
    assert_eq!(
        (read.gpu_usage, read.gpu_usage_at),
        (vec![sample(3, 512)], Some(then))
    );
    assert_eq!(
        store.gpu_use_on(MachineId::new()).await.unwrap(),
        (vec![], None)
    );
}
