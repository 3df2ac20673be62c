//! Two controllers of one region on one Postgres: only the lease holder reconciles; a leader
//! paused past its lease (SIGSTOP) is replaced and, resumed (SIGCONT), commits nothing and stops;
//! a killed leader's standby leads within the lease and a retry. Which of the resumed leader's
//! defences stops it first (its renewer seeing the lost lease, or a write refused by the fence)
//! depends on timing; the fence itself is tested deterministically by the store's conformance
//! suite (`stale_epoch_is_refused_after_takeover`, `a_batch_applies_each_step_on_its_own`).

use std::time::{Duration, Instant};

use einsora_testkit::eventually;

use crate::harness::controllers::{Controller, lease_holder, stack};
use crate::harness::replay;
use crate::harness::solo::Engine;
use crate::harness::support::signal;
use crate::harness::workloads::{create, state, timeline, wait_for};
use crate::harness::world::tenant;

const LEASE: Duration = Duration::from_secs(2);
const RETRY: Duration = Duration::from_millis(100);
/// Room for a loaded two-core machine on top of the lease and the retry.
const SLACK: Duration = Duration::from_secs(10);

fn settings(capacity: &str) -> Vec<(&'static str, String)> {
    vec![
        ("EINSORA_CONTROLLER_INTERVAL", "100ms".into()),
        ("EINSORA_CONTROLLER_LEASE", "2s".into()),
        ("EINSORA_FAKE_READY_DELAY", "0s".into()),
        ("EINSORA_FAKE_CAPACITY", capacity.into()),
    ]
}

fn start(solo: &crate::harness::solo::Solo, catalog: &str, capacity: &str) -> Controller {
    let env = settings(capacity);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    Controller::start(solo, catalog, &env)
}

#[test]
fn only_the_lease_holder_reconciles_and_a_deposed_leader_commits_nothing() {
    let (solo, catalog) = stack(Engine::Postgres, None, &[]);
    let db = solo.database.clone();
    let owner = tenant(&solo, "dev@acme");
    let who = &owner.session;
    // Only the first and third controllers have GPUs: what the second queues, they would admit.
    let with_gpus = "cpu-1c-2g=10,l40s-48gb=4";
    let mut first = start(&solo, &catalog, with_gpus);
    eventually("the first controller leads", SLACK, || {
        (lease_holder(&db) == Some(first.pid())).then_some(())
    });
    let second = start(&solo, &catalog, "cpu-1c-2g=10,l40s-48gb=0");

    let id = |made: (u16, serde_json::Value)| made.1["id"].as_str().unwrap().to_owned();
    let early = id(create(&solo, who, "early", "cpu-1c-2g"));
    wait_for(&solo, who, &early, "running");
    assert_eq!(lease_holder(&db), Some(first.pid()));
    eventually("the second stands by", SLACK, || {
        second.logs().contains("standing by").then_some(())
    });
    assert!(!second.logs().contains("leading"), "{}", second.logs());

    // Woken, the deposed leader says it couldn't renew in time, and stops.
    solo.expect_log("couldn't renew the lease in time");
    // Stopping, it drops the pass in flight: a transaction whose end Postgres had seen gets
    // sqlx's rollback on its way back to the pool, which Postgres answers with a notice (seen
    // once in CI, 2026-12-05). Nothing is written either way.
    solo.expect_log("sqlx::postgres::notice: there is no transaction in progress");
    signal(first.pid(), "STOP");
    let paused = Instant::now();
    eventually("the standby takes over", LEASE + RETRY + SLACK, || {
        (lease_holder(&db) == Some(second.pid())).then_some(())
    });
    eprintln!("takeover after a pause: {:?}", paused.elapsed());
    let later = id(create(&solo, who, "later", "cpu-1c-2g"));
    wait_for(&solo, who, &later, "running");
    let gpu = id(create(&solo, who, "gpu", "l40s-48gb"));
    wait_for(&solo, who, &gpu, "queued");
    let queued = timeline(&solo, who, &gpu);

    signal(first.pid(), "CONT");
    let exit = first.exits_within(SLACK).expect("the deposed leader stops");
    assert!(
        !exit.success(),
        "it stops as a failure, for its supervisor to restart it"
    );
    assert!(first.logs().contains("lost the lease"), "{}", first.logs());
    assert_eq!(state(&solo, who, &gpu), "queued", "it admitted nothing");
    assert_eq!(timeline(&solo, who, &gpu), queued, "it wrote nothing");

    let third = start(&solo, &catalog, with_gpus);
    eventually("the third stands by", SLACK, || {
        third.logs().contains("standing by").then_some(())
    });
    second.kill();
    let killed = Instant::now();
    eventually(
        "the standby leads after a kill",
        LEASE + RETRY + SLACK,
        || (lease_holder(&db) == Some(third.pid())).then_some(()),
    );
    eprintln!("takeover after a kill: {:?}", killed.elapsed());
    wait_for(&solo, who, &gpu, "running");

    let rt = tokio::runtime::Runtime::new().unwrap();
    let findings = rt.block_on(replay::check(&db, &[]));
    assert!(findings.clean(), "{findings:#?}");
}
