use std::collections::BTreeMap;

use einsora_core::kind::WorkloadKind;
use einsora_proto::convert::{PlacedSpec, Resources};

use super::*;
use crate::drivers::libvirt::config::AccelSetting;

/// A worker on `accel`, its VMs' directory and state in `dir`, with a base of hash `b0b0` for
/// the runtime `tiny-busybox`.
fn worker(dir: &Path, accel: Accel) -> Worker {
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
/// it now: under another acceleration (or another shape) it was started under other settings.
/// Where its base is gone, that can't be told, and it is left running.
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
    assert!(!kvm.runs_as_it_would_start(&w, &record, &as_started));
    assert!(!tcg.runs_as_it_would_start(&wanted(2), &record, &as_started));

    let gone = Record {
        fingerprint: Some("c1c1".into()),
        ..record
    };
    assert!(kvm.runs_as_it_would_start(&w, &gone, &as_started));
}
