use super::*;
use einsora_core::machine::VmAccel;

fn inventory() -> InventoryReport {
    InventoryReport {
        machine: Inventory {
            hostname: "box".into(),
            os: "linux".into(),
            arch: "x86_64".into(),
            cpus: 8,
            memory_bytes: 16 << 30,
            devices: vec![Device {
                vendor: AcceleratorKind::Nvidia,
                model: "NVIDIA L40S".into(),
                uuid: "GPU-0b1e".into(),
                memory_bytes: 48 << 30,
            }],
            cores: Some(CpuCores {
                performance: 6,
                efficiency: 2,
            }),
        },
        drivers: vec!["docker".into(), "libvirt".into()],
        agent_version: "0.1.0".into(),
        models: vec![ModelFile {
            path: "team/tiny.gguf".into(),
            size_bytes: 10,
        }],
        gpu_note: Some(GpuNote::NvidiaUnusable),
        vm: Some(VmHost {
            accel: VmAccel::Tcg,
            limit: Some(2),
        }),
    }
}

fn status() -> WorkloadStatus {
    WorkloadStatus {
        workload_id: WorkloadId::new(),
        attempt: 2,
        mode: Mode::Run,
        code: StatusCode::Ready,
        driver: "docker".into(),
        access_target: Some(AccessTarget {
            socket_path: "/var/lib/einsora/run/w/jupyter.sock".into(),
            token: "tok".into(),
        }),
    }
}

#[test]
fn reports_round_trip() {
    let ours = inventory();
    let sent = pb::Inventory::from(ours.clone());
    assert_eq!(InventoryReport::try_from(sent), Ok(ours));
    let mut nameless = inventory();
    nameless.machine.hostname.clear();
    nameless.machine.devices.clear();
    nameless.models.clear();
    nameless.gpu_note = None;
    nameless.machine.cores = None;
    nameless.vm = Some(VmHost {
        accel: VmAccel::Kvm,
        limit: None,
    });
    let sent = pb::Inventory::from(nameless.clone());
    assert_eq!(InventoryReport::try_from(sent), Ok(nameless));

    let ours = WorkloadStatuses {
        workloads: vec![
            status(),
            WorkloadStatus {
                access_target: None,
                driver: String::new(),
                code: StatusCode::DriverMissing,
                ..status()
            },
        ],
        driver_restarts: 1,
    };
    let (read, problems) = WorkloadStatuses::received(ours.clone().into());
    assert_eq!((read, problems), (ours, vec![]));
}

#[test]
fn what_isnt_an_inventory_is_refused_naming_the_field() {
    let good = || pb::Inventory::from(inventory());
    let field = |i: pb::Inventory| InventoryReport::try_from(i).unwrap_err().field;
    type Spoil = Box<dyn Fn(&mut pb::Inventory)>;
    let cases: Vec<(&str, Spoil)> = vec![
        ("cpus", Box::new(|i| i.cpus = 0)),
        ("cpus", Box::new(|i| i.cpus = MAX_CPUS + 1)),
        ("memory_bytes", Box::new(|i| i.memory_bytes = 1)),
        ("os", Box::new(|i| i.os.clear())),
        ("arch", Box::new(|i| i.arch = "x86\n64".into())),
        (
            "hostname",
            Box::new(|i| i.hostname = "h".repeat(MAX_TEXT + 1)),
        ),
        ("devices[0].vendor", Box::new(|i| i.devices[0].vendor = 0)),
        ("devices[0].vendor", Box::new(|i| i.devices[0].vendor = 77)),
        ("devices[0].uuid", Box::new(|i| i.devices[0].uuid.clear())),
        (
            "devices[1].uuid",
            Box::new(|i| i.devices.push(i.devices[0].clone())),
        ),
        (
            "devices",
            Box::new(|i| i.devices = vec![i.devices[0].clone(); MAX_DEVICES + 1]),
        ),
        ("drivers[0]", Box::new(|i| i.drivers[0] = "chroot".into())),
        ("gpu_note", Box::new(|i| i.gpu_note = "gpus_on_fire".into())),
        (
            "vm.accel",
            Box::new(|i| i.vm.as_mut().unwrap().accel = "hvf".into()),
        ),
        (
            "vm.limit",
            Box::new(|i| i.vm.as_mut().unwrap().limit = VmHost::MAX_LIMIT + 1),
        ),
        // A VM host only from a machine with a driver that runs VMs.
        ("vm", Box::new(|i| i.drivers = vec!["docker".into()])),
        (
            "cores",
            Box::new(|i| {
                i.cores = Some(common_pb::CpuCores {
                    performance: 8,
                    efficiency: 4,
                })
            }),
        ),
        (
            "cores",
            Box::new(|i| {
                i.cores = Some(common_pb::CpuCores {
                    performance: 0,
                    efficiency: 4,
                })
            }),
        ),
        (
            "models[0].path",
            Box::new(|i| i.models[0].path = "/etc/passwd".into()),
        ),
        (
            "models[0].path",
            Box::new(|i| i.models[0].path = "../outside.gguf".into()),
        ),
        (
            "models[1].path",
            Box::new(|i| i.models.push(i.models[0].clone())),
        ),
    ];
    for (want, spoil) in cases {
        let mut i = good();
        spoil(&mut i);
        assert_eq!(field(i), want);
    }
}

/// An error names the field and never echoes what the agent sent: it may be anything.
#[test]
fn errors_never_echo_the_value() {
    let mut i = pb::Inventory::from(inventory());
    i.models[0].path = "/tsk_secret.gguf".into();
    let err = InventoryReport::try_from(i).unwrap_err().to_string();
    assert!(err.starts_with("models[0].path "), "{err}");
    assert!(!err.contains("tsk_secret"), "{err}");
}

#[test]
fn malformed_statuses_are_dropped_and_the_others_kept() {
    let good = pb::WorkloadStatus::from(status());
    let spoiled = |spoil: &dyn Fn(&mut pb::WorkloadStatus)| {
        let mut s = good.clone();
        spoil(&mut s);
        s
    };
    let raw = pb::WorkloadStatuses {
        workloads: vec![
            spoiled(&|s| s.workload_id = "../etc".into()),
            good.clone(),
            spoiled(&|s| s.mode = 0),
            spoiled(&|s| s.code = 999),
            spoiled(&|s| s.access_target.as_mut().unwrap().socket_path = "run/x.sock".into()),
            spoiled(&|s| s.access_target.as_mut().unwrap().token.clear()),
            spoiled(&|s| s.driver = "d\u{7}".into()),
        ],
        driver_restarts: 0,
    };
    let (read, problems) = WorkloadStatuses::received(raw);
    let untargeted = WorkloadStatus {
        access_target: None,
        ..status_from(&good)
    };
    assert_eq!(
        read.workloads,
        vec![status_from(&good), untargeted.clone(), untargeted],
        "a bad target costs its entry the target only"
    );
    let fields: Vec<_> = problems.iter().map(|p| p.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "workloads[0].workload_id",
            "workloads[2].mode",
            "workloads[3].code",
            "workloads[4].access_target.socket_path",
            "workloads[5].access_target.token",
            "workloads[6].driver",
        ]
    );
}

fn status_from(raw: &pb::WorkloadStatus) -> WorkloadStatus {
    WorkloadStatus::try_from(raw.clone()).unwrap()
}

#[test]
fn an_access_targets_token_stays_out_of_debug() {
    let shown = format!("{:?}", status());
    assert!(
        shown.contains("jupyter.sock") && !shown.contains("tok\""),
        "{shown}"
    );
}

/// A GPU usage report is the machine's own GPUs' use: one it didn't list, one listed twice,
/// more than 100% or more memory than the GPU has refuses the report, naming the field.
#[test]
fn gpu_usage_is_only_of_the_machines_gpus_within_their_bounds() {
    let devices = inventory().machine.devices;
    let sample = |uuid: &str, utilization_percent, memory_used_bytes| pb::GpuSample {
        uuid: uuid.into(),
        utilization_percent,
        memory_used_bytes,
    };
    let report = |gpus| pb::GpuUsage { gpus };
    let good = gpu_usage(report(vec![sample("GPU-0b1e", 87, 20 << 30)]), &devices).unwrap();
    assert_eq!(
        good,
        [GpuSample {
            uuid: "GPU-0b1e".into(),
            utilization_percent: 87,
            memory_used_bytes: 20 << 30,
        }]
    );
    assert_eq!(gpu_usage(report(vec![]), &devices).unwrap(), []);
    let refused = |gpus, field: &str| {
        let err = gpu_usage(report(gpus), &devices).unwrap_err().to_string();
        assert!(err.contains(field), "{err}");
    };
    refused(vec![sample("GPU-else", 1, 1)], "gpus[0].uuid");
    refused(
        vec![sample("GPU-0b1e", 1, 1), sample("GPU-0b1e", 1, 1)],
        "gpus[1].uuid",
    );
    refused(
        vec![sample("GPU-0b1e", 101, 1)],
        "gpus[0].utilization_percent",
    );
    refused(
        vec![sample("GPU-0b1e", 1, 49 << 30)],
        "gpus[0].memory_used_bytes",
    );
}

#[test]
fn output_is_bounded_in_order_and_names_what_is_wrong() {
    use einsora_core::output::OutputStream;
    let id = einsora_core::ids::WorkloadId::new();
    let line = |text: &str, end| pb::OutputLine {
        stream: pb::OutputStream::Stdout as i32,
        printed_at: Some(prost_types::Timestamp {
            seconds: 1_700_000_000,
            nanos: 0,
        }),
        text: text.to_owned(),
        dropped_before: 0,
        gap_before: false,
        end_offset: end,
    };
    let report = |lines| pb::WorkloadOutput {
        workload_id: id.to_string(),
        attempt: 2,
        to_offset: 10,
        lines,
    };
    let after_a_gap = pb::OutputLine {
        dropped_before: 4,
        gap_before: true,
        ..line("there", 9)
    };
    let good = output(report(vec![line("hi", 3), after_a_gap.clone()])).unwrap();
    assert_eq!((good.workload_id, good.attempt, good.to), (id, 2, 10));
    assert_eq!(good.lines[1].text, "there");
    assert_eq!(good.lines[1].stream, OutputStream::Stdout);
    assert_eq!(
        (good.lines[1].dropped_before, good.lines[1].gap_before),
        (4, true)
    );
    assert_eq!(
        pb::WorkloadOutput::from(good.clone()),
        report(vec![line("hi", 3), after_a_gap]),
        "and back"
    );
    let long = "x".repeat(einsora_core::output::MAX_LINE_BYTES + 1);
    let bad: Vec<(Vec<pb::OutputLine>, &str)> = vec![
        (vec![line("b", 9), line("a", 3)], "lines[1].end_offset"),
        (vec![line("past", 11)], "lines[0].end_offset"),
        (vec![line(&long, 5)], "lines[0].text"),
        (
            vec![pb::OutputLine {
                stream: 0,
                ..line("x", 1)
            }],
            "lines[0].stream",
        ),
        (
            vec![pb::OutputLine {
                printed_at: None,
                ..line("x", 1)
            }],
            "lines[0].printed_at",
        ),
        (
            (0..=bounds::MAX_OUTPUT_LINES)
                .map(|_| line("x", 1))
                .collect(),
            "lines",
        ),
    ];
    for (lines, field) in bad {
        let err = output(report(lines)).unwrap_err();
        assert_eq!(err.field, field, "{err}");
    }
    let beyond = pb::WorkloadOutput {
        to_offset: u64::MAX,
        ..report(vec![])
    };
    assert_eq!(output(beyond).unwrap_err().field, "to_offset");
    let nameless = pb::WorkloadOutput {
        workload_id: "nope".into(),
        ..report(vec![])
    };
    assert_eq!(output(nameless).unwrap_err().field, "workload_id");
}
