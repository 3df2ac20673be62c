//! Postgres stopped under a running Solo for 5 s and for 20 s: the API answers 503 with
//! Retry-After within 2 s, the controller makes no transition, nothing acknowledged is lost, and
//! everything is healthy within 10 s of the database's return.

use std::time::{Duration, Instant};

use einsora_testkit::TempPostgres;
use serde_json::json;

use crate::controllers::eventually;
use crate::lifecycle::{create, timeline, wait_for};
use crate::replay::{self, Acknowledged};
use crate::solo::{Engine, Solo};
use crate::support::Einsora;
use crate::world::{call, tenant};

const ANSWER_WITHIN: Duration = Duration::from_secs(2);
const HEALTHY_WITHIN: Duration = Duration::from_secs(10);

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
    let env = [
        ("EINSORA_AUTH_MODE", "dev"),
        ("EINSORA_DATABASE_URL", url.as_str()),
        ("EINSORA_CONTROLLER_INTERVAL", "200ms"),
        ("EINSORA_CONTROLLER_LEASE", "3s"),
        ("EINSORA_FAKE_READY_DELAY", "0s"),
    ];
    let mut solo = Solo::launch(Einsora::new(), Engine::Postgres, &env);
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
            answered += 1;
        }
        std::thread::sleep(Duration::from_millis(300));
    }

    pg.start_again().unwrap();
    let back = Instant::now();
    eventually(HEALTHY_WITHIN, "the API answers again", || {
        call(&solo, who, "GET", "/v1/workloads", None).status == 200
    });
    let (status, after) = create(&solo, who, "after", "cpu-1c-2g");
    assert_eq!(status, 202, "{after}");
    let after = after["id"].as_str().unwrap().to_owned();
    acknowledged.push(Acknowledged {
        workload: after.clone(),
        state: einsora_core::lifecycle::State::Pending,
        reason: "created by",
    });
    eventually(
        HEALTHY_WITHIN.saturating_sub(back.elapsed()),
        "the controller runs new work",
        || {
            call(&solo, who, "GET", &format!("/v1/workloads/{after}"), None).json()["state"]
                == "running"
        },
    );
    eprintln!(
        "{answered} answers during a {down:?} outage; healthy {:?} after its end",
        back.elapsed()
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
