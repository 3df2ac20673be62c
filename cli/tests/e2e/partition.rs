//! Partitions: a machine cut off by nftables in its own network namespace (its process runs on,
//! its stream stays open, nothing reaches either side). Timers scaled down by configuration;
//! bounds are generous for a loaded 2-core machine, and the measured delay is printed for
//! docs/benchmarks.md.

use std::time::{Duration, Instant};

use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::agent_backend::{Machine, online, run_agent, solo, steps};
use crate::lifecycle::{Owner, act, create, state, wait_for};
use crate::solo::Solo;
use crate::world::call;

const OFFLINE_NOTE: &str = "its machine is offline; waiting for it to reconnect";
/// What the agents' heartbeat is under test (see `run_agent`): how much earlier than the
/// threshold after the cut its last word may have been.
const HEARTBEAT: Duration = Duration::from_millis(500);
/// Solo's controller interval under test: one sweep.
const SWEEP: Duration = Duration::from_millis(200);

/// The workload's events as the API gives them.
fn events(solo: &Solo, owner: &Owner, id: &str) -> Vec<Value> {
    let path = format!("/v1/workloads/{id}/events");
    let answer = call(solo, &owner.session, "GET", &path, None);
    assert_eq!(answer.status, 200, "{}", answer.body);
    answer.json()["events"].as_array().unwrap().clone()
}

/// When the workload's timeline first noted its machine offline.
fn noted_offline(solo: &Solo, owner: &Owner, id: &str) -> Option<OffsetDateTime> {
    events(solo, owner, id)
        .iter()
        .find(|e| e["note"] == true && e["reason"] == OFFLINE_NOTE)
        .map(|e| OffsetDateTime::parse(e["at"].as_str().unwrap(), &Rfc3339).unwrap())
}

/// `count` running notebooks, and the machine each landed on.
fn running(solo: &Solo, owner: &Owner, count: usize) -> Vec<(String, String)> {
    let ids: Vec<String> = (0..count)
        .map(|i| {
            let (status, made) = create(solo, &owner.session, &format!("p-{i}"), "cpu-1c-2g");
            assert_eq!(status, 202, "{made}");
            made["id"].as_str().unwrap().to_owned()
        })
        .collect();
    ids.into_iter()
        .map(|id| {
            wait_for(solo, &owner.session, &id, "running");
            let w = call(
                solo,
                &owner.session,
                "GET",
                &format!("/v1/workloads/{id}"),
                None,
            );
            let machine = w.json()["machine_id"].as_str().unwrap().to_owned();
            (id, machine)
        })
        .collect()
}

/// Two machines full of workloads; one is cut off. Its workloads are noted offline no sooner
/// than the threshold after its last word and within the threshold, a sweep and a margin of
/// the cut; the other machine's are not. Healed, nothing was stopped, deleted or restarted, and
/// the machine obeys again.
#[test]
fn a_partitioned_machine_is_offline_after_the_threshold_and_heals_without_a_change() {
    let threshold = Duration::from_secs(3);
    let (solo, lan, agents) = solo(&[("EINSORA_AGENT_OFFLINE_AFTER", "3s")]);
    let owner = Owner::of(&solo);
    let machines: Vec<Machine> = ["a", "b"]
        .iter()
        .map(|name| crate::agent_backend::join(&solo, &owner, &lan, &agents, name))
        .collect();
    let processes: Vec<_> = machines.iter().map(|m| run_agent(&solo, m)).collect();
    for (machine, agent) in machines.iter().zip(&processes) {
        online(&solo, &owner, &machine.id, agent);
    }
    // Two CPUs a machine: two cpu-1c-2g each fill both.
    let placed = running(&solo, &owner, 4);
    let (cut, other) = (&machines[0], &machines[1]);
    let on = |m: &Machine| -> Vec<&str> {
        placed
            .iter()
            .filter(|(_, on)| on.trim() == m.id.trim())
            .map(|(id, _)| id.as_str())
            .collect()
    };
    let (cut_off, control) = (on(cut), on(other));
    assert!(!cut_off.is_empty() && !control.is_empty(), "{placed:?}");
    let before: Vec<_> = placed
        .iter()
        .map(|(id, _)| steps(&solo, &owner, id))
        .collect();

    let cut_at = OffsetDateTime::now_utc();
    cut.host.partition();
    let deadline = Instant::now() + threshold + Duration::from_secs(30);
    let noted = loop {
        if let Some(at) = noted_offline(&solo, &owner, cut_off[0]) {
            break at;
        }
        assert!(Instant::now() < deadline, "never noted offline");
        std::thread::sleep(Duration::from_millis(100));
    };
    let delay: Duration = (noted - cut_at).try_into().expect("noted after the cut");
    eprintln!(
        "partition: noted offline {} ms after the cut",
        delay.as_millis()
    );
    assert!(delay >= threshold - HEARTBEAT, "too soon: {delay:?}");
    assert!(
        delay <= threshold + SWEEP + Duration::from_secs(5),
        "too late: {delay:?}"
    );
    for id in &cut_off {
        let deadline = Instant::now() + Duration::from_secs(10);
        while noted_offline(&solo, &owner, id).is_none() {
            assert!(Instant::now() < deadline, "{id} never noted offline");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    std::thread::sleep(Duration::from_secs(2));
    for id in &control {
        assert_eq!(noted_offline(&solo, &owner, id), None, "{id} was reachable");
    }

    cut.host.heal();
    // Heard again (within a heartbeat or two), then a few sweeps.
    std::thread::sleep(Duration::from_secs(4));
    let after: Vec<_> = placed
        .iter()
        .map(|(id, _)| steps(&solo, &owner, id))
        .collect();
    assert_eq!(after, before, "nothing stopped, deleted or restarted");
    for (id, _) in &placed {
        assert_eq!(state(&solo, &owner.session, id), "running");
    }
    // The healed machine obeys again.
    assert_eq!(act(&solo, &owner.session, cut_off[0], "stop").0, 202);
    wait_for(&solo, &owner.session, cut_off[0], "stopped");
    drop(processes);
}

/// Cut off past the failure threshold: its running workload fails and its stopping one is
/// stopped, with the seeds' reason. Healed, neither comes back by itself; started again, the
/// failed one returns to its machine.
#[test]
fn a_machine_cut_off_past_the_failure_threshold_fails_its_workloads() {
    let (solo, lan, agents) = solo(&[
        ("EINSORA_AGENT_OFFLINE_AFTER", "2s"),
        ("EINSORA_AGENT_OFFLINE_FAIL", "6s"),
    ]);
    let owner = Owner::of(&solo);
    let who = &owner.session;
    let machine = crate::agent_backend::join(&solo, &owner, &lan, &agents, "box");
    let agent = run_agent(&solo, &machine);
    online(&solo, &owner, &machine.id, &agent);
    let placed = running(&solo, &owner, 2);
    let (failing, stopping) = (&placed[0].0, &placed[1].0);

    machine.host.partition();
    assert_eq!(act(&solo, who, stopping, "stop").0, 202);
    wait_for(&solo, who, failing, "failed");
    wait_for(&solo, who, stopping, "stopped");
    let reason = "its machine has been offline for over 6s";
    assert_eq!(
        steps(&solo, &owner, failing).last().unwrap(),
        &format!("failed: {reason}")
    );
    assert_eq!(
        steps(&solo, &owner, stopping).last().unwrap(),
        &format!("stopped: {reason}")
    );

    machine.host.heal();
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(state(&solo, who, failing), "failed");
    assert_eq!(state(&solo, who, stopping), "stopped");
    assert_eq!(act(&solo, who, failing, "start").0, 202);
    wait_for(&solo, who, failing, "running");
    let w = call(&solo, who, "GET", &format!("/v1/workloads/{failing}"), None).json();
    assert_eq!(w["machine_id"].as_str().unwrap().trim(), machine.id.trim());
    drop(agent);
}
