use super::*;

fn you(credential: Credential) -> Actor {
    Actor {
        subject: "you@example.com".into(),
        credential,
    }
}

#[test]
fn reasons_read_as_in_the_seeds() {
    let token = you(Credential::ApiToken {
        name: "laptop".into(),
        prefix: "tsk_Ab3x".into(),
    });
    let cases = [
        (
            Reason::Created { by: token },
            r#"created by you@example.com (API token "laptop" (tsk_Ab3x…))"#,
        ),
        (
            Reason::Created {
                by: Actor {
                    subject: "dev@acme".into(),
                    credential: Credential::Dev,
                },
            },
            "created by dev@acme",
        ),
        (
            Reason::Requested {
                action: UserAction::Stop,
                by: you(Credential::BrowserSession),
            },
            "stop requested by you@example.com (browser session)",
        ),
        (
            Reason::Created {
                by: you(Credential::CliSession),
            },
            "created by you@example.com (CLI session)",
        ),
        (
            Reason::WaitingForCapacity {
                class: "l40s-48gb".into(),
                unit: CapacityUnit::Gpus,
                requested: 2,
                free: Some(0),
            },
            "waiting for l40s-48gb capacity: requested 2 GPU(s), 0 free",
        ),
        (
            Reason::DeletedWithoutItsMachine(MachineGone::Away {
                after: Duration::from_secs(600),
            }),
            "deleted while its machine was away (offline for over 10m0s); the machine removes \
             it if it returns",
        ),
        (
            Reason::DeletedWithoutItsMachine(MachineGone::Revoked),
            "deleted; its machine was revoked and will never sync again",
        ),
        (
            Reason::WaitingForCapacity {
                class: "cpu-4c-16g".into(),
                unit: CapacityUnit::Cpus,
                requested: 4,
                free: Some(2),
            },
            "waiting for cpu-4c-16g capacity: requested 4 CPU(s), 2 free",
        ),
        (
            Reason::WaitingForCapacity {
                class: "l40s-48gb".into(),
                unit: CapacityUnit::Gpus,
                requested: 2,
                free: None,
            },
            "waiting for l40s-48gb capacity: requested 2 GPU(s), not enough free right now",
        ),
        (
            Reason::Admitted {
                units: 2,
                class: "l40s-48gb".into(),
                served_by: None,
                on: None,
                fallback: None,
            },
            "admitted: 2 × l40s-48gb",
        ),
        (
            Reason::Admitted {
                units: 1,
                class: "l40s-48gb".into(),
                served_by: Some("vllm".into()),
                on: None,
                fallback: None,
            },
            "admitted: 1 × l40s-48gb, served by vllm",
        ),
        (
            Reason::Admitted {
                units: 1,
                class: "apple-silicon-32gb".into(),
                served_by: None,
                on: Some(Placement {
                    machine: "studio".into(),
                    driver: "macos-native".into(),
                    reserves_apple_gpu: false,
                }),
                fallback: None,
            },
            "admitted: 1 × apple-silicon-32gb on studio with macos-native",
        ),
        (
            Reason::WaitingForMachineForClass {
                class: "apple-silicon-32gb".into(),
            },
            "waiting for a machine that can run apple-silicon-32gb to come online",
        ),
        (
            Reason::WaitingForDriver {
                kind: WorkloadKind::Notebook,
                class: "cpu-4c-16g".into(),
            },
            "waiting for a machine with a driver that runs notebooks on cpu-4c-16g: none here has one yet",
        ),
        (
            Reason::WaitingForIsolation {
                kind: WorkloadKind::Notebook,
                class: "cpu-4c-16g".into(),
            },
            "waiting for a machine that can isolate it: the drivers here that run notebooks on cpu-4c-16g run only the workloads of the user who owns the machine",
        ),
        (
            Reason::WaitingForItsMachine,
            "waiting for its machine to come online: its disk is there",
        ),
        (
            Reason::WaitingForAppleGpu {
                class: "cpu-4c-16g".into(),
            },
            "waiting for cpu-4c-16g on a Mac whose Apple GPU is in use: native code can use Metal, so it needs the GPU free too",
        ),
        (
            Reason::WaitingForDriverRoom {
                kind: WorkloadKind::Vm,
                class: "cpu-1c-2g".into(),
            },
            "waiting for room: each machine here that runs vms on cpu-1c-2g already runs as many at once as it may",
        ),
        (
            Reason::Admitted {
                units: 1,
                class: "cpu-4c-16g".into(),
                served_by: None,
                on: Some(Placement {
                    machine: "studio".into(),
                    driver: "macos-native".into(),
                    reserves_apple_gpu: true,
                }),
                fallback: None,
            },
            "admitted: 1 × cpu-4c-16g on studio with macos-native; its Apple GPU is reserved too, since native code can use Metal",
        ),
        (
            Reason::Admitted {
                units: 1,
                class: "cpu-16c-64g".into(),
                served_by: Some("llama.cpp".into()),
                on: Some(Placement {
                    machine: "box".into(),
                    driver: "docker".into(),
                    reserves_apple_gpu: false,
                }),
                fallback: Some(Box::new(Fallback {
                    requested: "l40s-48gb".into(),
                    after: Duration::from_secs(300),
                })),
            },
            "admitted: 1 × cpu-16c-64g, served by llama.cpp on box with docker; a fallback: l40s-48gb had no room for 5m0s",
        ),
        (
            Reason::Admitted {
                units: 1,
                class: "a100-80gb".into(),
                served_by: None,
                on: None,
                fallback: Some(Box::new(Fallback {
                    requested: "l40s-48gb".into(),
                    after: Duration::ZERO,
                })),
            },
            "admitted: 1 × a100-80gb; a fallback: l40s-48gb had no room",
        ),
        (
            Reason::WaitingWithFallbacks {
                wait: Box::new(Reason::WaitingForCapacity {
                    class: "l40s-48gb".into(),
                    unit: CapacityUnit::Gpus,
                    requested: 1,
                    free: None,
                }),
                fallbacks: vec!["cpu".into()],
                tried: FallbackTry::After(Duration::from_secs(300)),
            },
            "waiting for l40s-48gb capacity: requested 1 GPU(s), not enough free right now; its fallback is tried after 5m0s: cpu",
        ),
        (
            Reason::WaitingWithFallbacks {
                wait: Box::new(Reason::WaitingForMachineForClass {
                    class: "l40s-48gb".into(),
                }),
                fallbacks: vec!["a100-80gb".into(), "cpu".into()],
                tried: FallbackTry::NoRoom,
            },
            "waiting for a machine that can run l40s-48gb to come online; its fallbacks have no room either: a100-80gb, cpu",
        ),
        (
            Reason::WaitingWithFallbacks {
                wait: Box::new(Reason::WaitingForItsMachine),
                fallbacks: vec!["cpu".into()],
                tried: FallbackTry::NoRoom,
            },
            "waiting for its machine to come online: its disk is there; its fallback has no room either: cpu",
        ),
        (
            Reason::HoldingBackSmaller {
                class: "l40s-48gb".into(),
                after: Duration::from_secs(600),
            },
            "holding back smaller l40s-48gb requests for it: it has waited over 10m0s",
        ),
        (
            Reason::WaitingBehindOlder {
                class: "l40s-48gb".into(),
                after: Duration::from_secs(600),
            },
            "waiting behind a larger l40s-48gb request that has waited over 10m0s",
        ),
        (
            Reason::MachineOffline,
            "its machine is offline; waiting for it to reconnect",
        ),
        (
            Reason::MachineOfflineTooLong {
                after: Duration::from_secs(600),
            },
            "its machine has been offline for over 10m0s",
        ),
        (
            Reason::Reported(StatusCode::GpuBusy),
            "waiting for its machine's GPU to be free",
        ),
        (
            Reason::Reported(StatusCode::Other),
            "its machine reported a problem",
        ),
        (Reason::Reported(StatusCode::Exited), "it stopped by itself"),
        (
            Reason::RetryingRun,
            "couldn't start it on the runtime; retrying. The operator's log has the details under this workload's ID.",
        ),
        (
            Reason::BackendFailure("model server not ready (RevisionFailed)"),
            "model server not ready (RevisionFailed)",
        ),
        (
            Reason::NoLongerOffered {
                entry: CatalogEntry::GpuClass,
                name: "x".into(),
            },
            r#"can't start: GPU class "x" is no longer offered by this installation"#,
        ),
        (
            Reason::ParkedWhenIdle {
                after: Duration::from_secs(600),
            },
            "parked after 10 min without requests",
        ),
        (
            Reason::ParkedWhenIdle {
                after: Duration::from_secs(5400),
            },
            "parked after 1 h 30 min without requests",
        ),
        (
            Reason::ParkedWhenIdle {
                after: Duration::from_secs(90),
            },
            "parked after 90 s without requests",
        ),
        (
            Reason::WokenByRequest {
                by: Waker {
                    subject: "you@example.com".into(),
                    key: Some(KeyName {
                        name: "ci".into(),
                        prefix: "isk_Ab3x".into(),
                    }),
                },
            },
            r#"woken by a request from you@example.com (inference key "ci" (isk_Ab3x…))"#,
        ),
        (
            Reason::WokenByRequest {
                by: Waker {
                    subject: "you@example.com".into(),
                    key: None,
                },
            },
            "woken by a request from you@example.com",
        ),
    ];
    for (reason, text) in cases {
        assert_eq!(reason.text(), text);
    }
}

#[test]
fn clean_reason_cuts_secrets_to_their_prefix() {
    let dirty = "token tsk_Ab3xSECRETSECRETSECRET and ticket=tkt_ZZZZyyyyxxxx, ok";
    let clean = clean_reason(dirty);
    assert_eq!(clean, "token tsk_Ab3x… and ticket=tkt_ZZZZ…, ok");
    assert!(!clean.contains("SECRET"));
    assert_eq!(
        clean_reason("tsk_Ab3x…"),
        "tsk_Ab3x…",
        "a shown prefix stays as it is"
    );
}

#[test]
fn clean_reason_removes_control_characters_and_bounds_length() {
    assert_eq!(clean_reason("a\n\tb\u{1b}[31mc  \r\n"), "a b [31mc");
    let long = "x ".repeat(1000);
    let clean = clean_reason(&long);
    assert_eq!(clean.chars().count(), MAX_REASON_CHARS);
    assert!(clean.ends_with('…'));
}
