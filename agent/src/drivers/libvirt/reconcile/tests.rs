use std::collections::BTreeMap;

use einsora_core::kind::WorkloadKind;
use einsora_proto::convert::{PlacedSpec, Resources};

use super::*;
use crate::drivers::libvirt::config::AccelSetting;
use crate::drivers::libvirt::vfio::Gpus;

/// A worker on `accel`, its VMs' directory and state in `dir`, with a base of hash `b0b0` for
/// the runtime `tiny-busybox`.
fn worker(dir: &Path, accel: Accel) -> Worker {
    worker_with(dir, accel, Gpus::default())
}

fn worker_with(dir: &Path, accel: Accel, gpus: Gpus) -> Worker {
    std::fs::create_dir_all(dir.join("vms/bases/b0b0")).unwrap();
    let config = LibvirtConfig {
        uri: "qemu:///system".into(),
        accel: AccelSetting::TcgAllowed,
        images: BTreeMap::from([("tiny-busybox".to_owned(), dir.join("images/vm-tiny"))]),
        state_dir: dir.join("state"),
        vm_dir: dir.join("vms"),
        machine: "m1".into(),
        limit: None,
    };
    let (outbox, _inbox) = crate::drivers::local::output::outbox();
    Worker::new(
        config,
        accel,
        Arc::new(gpus),
        Arc::default(),
        SeenMap::default(),
        Arc::default(),
        outbox,
    )
}

fn wanted(cpus: u32) -> Wanted {
    Wanted {
        workload: einsora_core::ids::WorkloadId::new().to_string(),
        gpus_missing: false,
        attempt: 3,
        mode: Mode::Run,
        spec: PlacedSpec {
            kind: WorkloadKind::Vm,
            compute_class: "cpu-1c-2g".into(),
            accelerator: None,
            image: "tiny".into(),
            runtime: "tiny-busybox".into(),
            driver: "libvirt".into(),
            resources: Some(Resources {
                cpus,
                memory_bytes: 2 << 30,
                ..Resources::default()
            }),
            requires_strong_isolation: false,
            egress: false,
            retired: false,
            params: None,
        },
        output: None,
        stream: 1,
    }
}

/// A guest found running as the agent starts is kept only if it runs as the agent would start
/// it now: with another shape it was started under other settings; under another acceleration
/// it is as good (the probe decides that at each start). Where its base is gone, or its record
/// names none, that can't be told, and it is left running.
#[test]
fn a_running_vm_found_under_other_settings_is_told_apart() {
    let dir = tempfile::tempdir().unwrap();
    let tcg = worker(dir.path(), Accel::Tcg);
    let w = wanted(1);
    let record = Record {
        started_attempt: 3,
        had_disk: true,
        token: None,
        fingerprint: Some("b0b0".into()),
    };
    let base = Base {
        dir: dir.path().join("vms/bases/b0b0"),
        hash: "b0b0".into(),
    };
    let found = |fingerprint: String| Metadata {
        workload: w.workload.clone(),
        attempt: 3,
        machine: "m1".into(),
        fingerprint,
    };
    let as_started = found(tcg.domain_for(&w, &base, Vec::new()).fingerprint());
    assert!(tcg.runs_as_it_would_start(&w, &record, &as_started));

    let kvm = worker(dir.path(), Accel::Kvm);
    assert!(kvm.runs_as_it_would_start(&w, &record, &as_started));
    assert!(!tcg.runs_as_it_would_start(&wanted(2), &record, &as_started));

    let gone = Record {
        fingerprint: Some("c1c1".into()),
        ..record.clone()
    };
    assert!(tcg.runs_as_it_would_start(&wanted(2), &gone, &as_started));
    let unnamed = Record {
        fingerprint: None,
        ..record
    };
    assert!(tcg.runs_as_it_would_start(&wanted(2), &unnamed, &as_started));
}

/// A VM given a GPU whose IOMMU group it would share with the host's NIC isn't started: it
/// fails with `gpu_passthrough_unavailable` before anything of it is made.
#[tokio::test]
async fn a_vm_whose_gpus_share_a_group_with_another_device_is_not_started() {
    let dir = tempfile::tempdir().unwrap();
    let sysfs = dir.path().join("sys");
    crate::drivers::libvirt::vfio::tests::sysfs_from(
        "device 0000:3b:00.0 class=0x030000 group=7\n\
         device 0000:3b:00.1 class=0x040300 group=7\n\
         device 0000:3c:00.0 class=0x020000 group=7\n",
        &sysfs,
    );
    let uuid = "GPU-5c1f2d8e-0b3a-4c6d-9e7f-1a2b3c4d5e6f";
    let bus_ids = BTreeMap::from([(uuid.to_owned(), "0000:3b:00.0".parse().unwrap())]);
    let mut worker = worker_with(dir.path(), Accel::Tcg, Gpus::at(bus_ids, &sysfs));
    let mut w = wanted(1);
    if let Some(r) = w.spec.resources.as_mut() {
        r.device_uuids = vec![uuid.to_owned()];
    }
    let code = worker.start(&w, Record::default()).await.unwrap();
    assert_eq!(code, StatusCode::GpuPassthroughUnavailable);
    assert!(
        !worker.vm_dir(&w.workload).exists(),
        "nothing of it was made"
    );
}
