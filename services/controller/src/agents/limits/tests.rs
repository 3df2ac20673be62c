use super::*;
use pb::agent_report::Report;

const SECOND: Duration = Duration::from_secs(1);

fn status(id: &str) -> pb::WorkloadStatus {
    pb::WorkloadStatus {
        workload_id: id.into(),
        driver: "process".into(),
        ..Default::default()
    }
}

/// A statuses report of `n` entries (one workload, again and again).
pub(crate) fn statuses(n: usize) -> Report {
    Report::Statuses(pb::WorkloadStatuses {
        workloads: (0..n)
            .map(|_| status("0190c0de-0000-7000-8000-000000000000"))
            .collect(),
        ..Default::default()
    })
}

#[test]
fn reports_within_their_bounds_pass_and_one_over_any_bound_is_oversized() {
    assert_eq!(bounded(&statuses(MAX_WORKLOADS)), Ok(()));
    assert_eq!(
        bounded(&statuses(MAX_WORKLOADS + 1)),
        Err(Excess::Oversized)
    );
    let long = "x".repeat(MAX_NAME + 1);
    let one = |s: pb::WorkloadStatus| {
        Report::Statuses(pb::WorkloadStatuses {
            workloads: vec![s],
            ..Default::default()
        })
    };
    let target = |path: usize, token: usize| pb::WorkloadStatus {
        access_target: Some(pb::AccessTarget {
            socket_path: "/".repeat(path),
            token: "t".repeat(token),
        }),
        ..status("w")
    };
    assert_eq!(bounded(&one(target(MAX_SOCKET_PATH, MAX_SECRET))), Ok(()));
    for (what, s) in [
        ("a workload ID", status(&long)),
        (
            "a driver",
            pb::WorkloadStatus {
                driver: long.clone(),
                ..status("w")
            },
        ),
        ("a socket path", target(MAX_SOCKET_PATH + 1, 1)),
        ("a token", target(1, MAX_SECRET + 1)),
    ] {
        assert_eq!(bounded(&one(s)), Err(Excess::Oversized), "{what}");
    }

    let inventory = pb::Inventory {
        hostname: "h".repeat(MAX_TEXT),
        drivers: vec!["process".into(); MAX_DRIVERS],
        devices: vec![pb::Device::default(); MAX_DEVICES],
        models: vec![model(einsora_core::machine::MAX_MODEL_PATH); MAX_MODELS],
        ..Default::default()
    };
    assert_eq!(bounded(&Report::Inventory(inventory.clone())), Ok(()));
    let over = [
        pb::Inventory {
            agent_version: "v".repeat(MAX_TEXT + 1),
            ..inventory.clone()
        },
        pb::Inventory {
            drivers: vec!["process".into(); MAX_DRIVERS + 1],
            ..inventory.clone()
        },
        pb::Inventory {
            devices: vec![pb::Device::default(); MAX_DEVICES + 1],
            ..inventory.clone()
        },
        pb::Inventory {
            models: vec![model(1); MAX_MODELS + 1],
            ..inventory.clone()
        },
        pb::Inventory {
            models: vec![model(einsora_core::machine::MAX_MODEL_PATH + 1)],
            ..inventory.clone()
        },
    ];
    for i in over {
        assert_eq!(bounded(&Report::Inventory(i)), Err(Excess::Oversized));
    }
    let csr = |n| {
        Report::RenewCertificate(pb::CertificateRenewal {
            csr_pem: "c".repeat(n),
        })
    };
    assert_eq!(bounded(&csr(MAX_CSR)), Ok(()));
    assert_eq!(bounded(&csr(MAX_CSR + 1)), Err(Excess::Oversized));

    let longest = einsora_core::output::MAX_LINE_BYTES;
    let output = |lines: usize, text: usize| {
        Report::Output(pb::WorkloadOutput {
            workload_id: "w".repeat(MAX_NAME),
            lines: vec![
                pb::OutputLine {
                    text: "x".repeat(text),
                    ..Default::default()
                };
                lines
            ],
            ..Default::default()
        })
    };
    assert_eq!(bounded(&output(MAX_OUTPUT_LINES, 8)), Ok(()));
    assert_eq!(bounded(&output(1, longest)), Ok(()));
    assert_eq!(
        bounded(&output(MAX_OUTPUT_LINES + 1, 8)),
        Err(Excess::Oversized)
    );
    assert_eq!(bounded(&output(1, longest + 1)), Err(Excess::Oversized));
}

#[test]
fn each_kind_comes_a_burst_then_at_its_rate_per_machine() {
    let rate = Rate {
        burst: 3,
        every: SECOND,
    };
    let budgets = Budgets::new(Rates {
        statuses: rate,
        inventory: rate,
        renewal: rate,
        gpu_usage: rate,
        output: rate,
        streams: rate,
    });
    let (machine, other) = (MachineId::new(), MachineId::new());
    let t0 = Instant::now();
    let report = statuses(1);
    for i in 0..3 {
        assert_eq!(budgets.take_at(machine, &report, t0), Ok(()), "burst {i}");
    }
    assert_eq!(
        budgets.take_at(machine, &report, t0),
        Err(Excess::TooFrequent)
    );
    let renewal = Report::RenewCertificate(pb::CertificateRenewal::default());
    assert_eq!(
        budgets.take_at(machine, &renewal, t0),
        Ok(()),
        "another kind"
    );
    assert_eq!(
        budgets.take_at(other, &report, t0),
        Ok(()),
        "another machine"
    );

    assert_eq!(
        budgets.take_at(machine, &report, t0 + SECOND),
        Ok(()),
        "one more a second later"
    );
    assert_eq!(
        budgets.take_at(machine, &report, t0 + SECOND),
        Err(Excess::TooFrequent)
    );
    // Quiet for a while, it has its whole burst again (and no more).
    let later = t0 + 10 * SECOND;
    for _ in 0..3 {
        assert_eq!(budgets.take_at(machine, &report, later), Ok(()));
    }
    assert_eq!(
        budgets.take_at(machine, &report, later),
        Err(Excess::TooFrequent)
    );
}

/// A machine reopening its stream as fast as it can: its burst, then one per interval; the
/// refusals are noted (logged and flagged) at most once a minute.
#[test]
fn stream_opens_come_a_burst_then_at_their_rate_and_floods_are_noted_once_a_minute() {
    let rate = Rate {
        burst: 2,
        every: SECOND,
    };
    let budgets = Budgets::new(Rates {
        streams: rate,
        ..Rates::default()
    });
    let (machine, other) = (MachineId::new(), MachineId::new());
    let t0 = Instant::now();
    assert_eq!(budgets.open_stream_at(machine, t0), Ok(()));
    assert_eq!(budgets.open_stream_at(machine, t0), Ok(()));
    let first = budgets.open_stream_at(machine, t0);
    assert_eq!(first, Err(StreamFlood { note: true }));
    for _ in 0..100 {
        assert_eq!(
            budgets.open_stream_at(machine, t0),
            Err(StreamFlood { note: false })
        );
    }
    assert_eq!(budgets.open_stream_at(other, t0), Ok(()), "another machine");
    assert_eq!(budgets.open_stream_at(machine, t0 + SECOND), Ok(()));
    let a_minute_on = t0 + 61 * SECOND;
    budgets.open_stream_at(machine, a_minute_on).unwrap();
    budgets.open_stream_at(machine, a_minute_on).unwrap();
    assert_eq!(
        budgets.open_stream_at(machine, a_minute_on),
        Err(StreamFlood { note: true }),
        "noted again a minute later"
    );
}

/// A model file whose path is `len` bytes long.
fn model(len: usize) -> einsora_proto::common::v1::ModelFile {
    einsora_proto::common::v1::ModelFile {
        path: "m".repeat(len),
        size_bytes: 1,
    }
}
