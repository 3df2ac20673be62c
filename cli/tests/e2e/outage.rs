//! Postgres stopped under a running Solo for 5 s and for 20 s: the API answers 503 with
//! Retry-After once its wait for a connection is over (within 3 s), the controller makes no
//! transition, nothing acknowledged is lost; and once the database is back the API answers
//! within 10 s, and the controller runs new work within a lease and a margin of that.

use std::time::{Duration, Instant};

use einsora_testkit::{TempPostgres, eventually, setting};
use serde_json::json;

use crate::harness::replay::{self, Acknowledged};
use crate::harness::solo::{CONTROLLER_INTERVAL, Engine, Solo};
use crate::harness::support::Einsora;
use crate::harness::workloads::{create, timeline, wait_for};
use crate::harness::world::{call, tenant};

/// How long the store waits for a connection (`einsora_store`'s ACQUIRE_TIMEOUT): what an
/// answer during the outage takes (measured: 1.0-1.1 s).
const STORE_WAIT: Duration = Duration::from_secs(1);
/// That wait and a margin for a loaded machine: still short of the 5 s a connection attempt
/// may take, or a hang.
const ANSWER_WITHIN: Duration = STORE_WAIT.saturating_add(Duration::from_secs(2));
/// The API's pool reconnects on its next request: a bound only a hang reaches.
const HEALTHY_WITHIN: Duration = Duration::from_secs(10);
const LEASE: Duration = Duration::from_secs(3);
/// A lease held before the outage has expired by its end: the controller takes it again at its
/// next try (every interval), then passes.
const RUNS_NEW_WORK_WITHIN: Duration = Duration::from_secs(10);

#[test]
fn a_five_second_store_outage_loses_nothing() {
    outage(Duration::from_secs(5));
}

#[test]
fn a_twenty_second_store_outage_loses_nothing() {
    outage(Duration::from_secs(20));
}

fn outage(down: Duration) {
    let pg = TempPostgres::own().unwrap();
    let url = pg.fresh_database().unwrap();
    let lease = setting(LEASE);
    let env = [
        ("EINSORA_AUTH_MODE", "dev"),
        ("EINSORA_DATABASE_URL", url.as_str()),
        ("EINSORA_CONTROLLER_LEASE", lease.as_str()),
        ("EINSORA_FAKE_READY_DELAY", "0s"),
    ];
    let mut solo = Solo::launch(Einsora::new(), Engine::Postgres, &env);
    solo.expect_log("lost the Postgres change listener");
    solo.expect_log("usage accounting failed");
    solo.expect_log("stopped unexpectedly; restarting");
    solo.expect_log("error occurred while testing the connection");
    solo.expect_log("lost the lease");
    solo.expect_log("the database is unavailable");
    solo.expect_log("the store is unavailable");
    solo.expect_log("couldn't");
    solo.database = url.clone();
    let owner = tenant(&solo, "dev@acme");
    let who = &owner.token;
    let (status, before) = create(&solo, who, "before", "cpu-1c-2g");
    assert_eq!(status, 202, "{before}");
    let before = before["id"].as_str().unwrap().to_owned();
    wait_for(&solo, who, &before, "running");
    let mut acknowledged = vec![Acknowledged {
        workload: before.clone(),
        state: einsora_core::lifecycle::State::Pending,
        reason: "created by",
    }];

    pg.stop().unwrap();
    let stopped = Instant::now();
    let mut answered = 0;
    let mut slowest = Duration::ZERO;
    while stopped.elapsed() < down {
        for (method, path, body) in [
            ("GET", "/v1/workloads".to_owned(), None),
            ("GET", format!("/v1/workloads/{before}"), None),
            (
                "POST",
                "/v1/workloads".to_owned(),
                Some(json!({
                    "kind": "notebook", "name": format!("during-{answered}"),
                    "gpu_class": "cpu-1c-2g", "image": "jupyterlab",
                })),
            ),
        ] {
            let sent = Instant::now();
            let answer = call(&solo, who, method, &path, body);
            let took = sent.elapsed();
            assert_eq!(answer.status, 503, "{method} {path}: {}", answer.body);
            assert_eq!(answer.json()["error"]["code"], "unavailable");
            assert!(
                answer.header("retry-after").is_some(),
                "{:?}",
                answer.headers
            );
            assert!(
                took < ANSWER_WITHIN,
                "{method} {path} answered after {took:?}"
            );
            slowest = slowest.max(took);
            answered += 1;
        }
        std::thread::sleep(Duration::from_millis(300));
    }

    // Its port held all along, the server starts on it again.
    pg.start_again().unwrap();
    let back = Instant::now();
    eventually("the API answering again", HEALTHY_WITHIN, || {
        (call(&solo, who, "GET", "/v1/workloads", None).status == 200).then_some(())
    });
    let answering = back.elapsed();
    let (status, after) = create(&solo, who, "after", "cpu-1c-2g");
    assert_eq!(status, 202, "{after}");
    let after = after["id"].as_str().unwrap().to_owned();
    acknowledged.push(Acknowledged {
        workload: after.clone(),
        state: einsora_core::lifecycle::State::Pending,
        reason: "created by",
    });
    let created = Instant::now();
    eventually(
        "the controller running new work",
        LEASE + CONTROLLER_INTERVAL + RUNS_NEW_WORK_WITHIN,
        || {
            let w = call(&solo, who, "GET", &format!("/v1/workloads/{after}"), None).json();
            (w["state"] == "running").then_some(())
        },
    );
    eprintln!(
        "{answered} answers during a {down:?} outage (the slowest {slowest:?}); the API answered \
         {answering:?} after its end, new work ran {:?} after that",
        created.elapsed()
    );

    assert_eq!(
        timeline(&solo, who, &before).len(),
        3,
        "the running workload was left alone"
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let findings = rt.block_on(replay::check(&url, &acknowledged));
    assert!(findings.clean(), "{findings:#?}");
    drop(solo);
    drop(pg);
}
