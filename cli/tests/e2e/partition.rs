//! Partitions: a machine cut off by nftables in its own network namespace (its process runs on,
//! its stream stays open, nothing reaches either side). Timers scaled down by configuration;
//! every bound is derived from them with margins generous for a loaded 2-core machine, and the
//! measured delay is printed for docs/benchmarks.md.

use std::time::Duration;

use einsora_testkit::{eventually, setting};
use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::harness::agents::{HEARTBEAT, Machine, PATIENCE, online, run_agent, solo, steps};
use crate::harness::solo::{CONTROLLER_INTERVAL, Solo};
use crate::harness::workloads::{Owner, act, create, state, wait_for};
use crate::harness::world::call;

const OFFLINE_NOTE: &str = "its machine is offline; waiting for it to reconnect";
/// How far a loaded machine may stretch a timer: an agent's heartbeat sent late, a pass run
/// late.
const SLACK: Duration = Duration::from_secs(1);

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
/// than the threshold after its last word and within the threshold, a pass and a margin of the
/// cut; the other machine's never are. Healed, the machine obeys again, and nothing was
/// stopped, deleted or restarted meanwhile.
#[test]
fn a_partitioned_machine_is_offline_after_the_threshold_and_heals_without_a_change() {
    // Eight heartbeats: a late one or two never reads as silence.
    const OFFLINE_AFTER: Duration = Duration::from_secs(4);
    let after = setting(OFFLINE_AFTER);
    let (solo, lan, agents) = solo(&[("EINSORA_AGENT_OFFLINE_AFTER", after.as_str())]);
    let owner = Owner::of(&solo);
    let machines: Vec<Machine> = ["a", "b"]
        .iter()
        .map(|name| crate::harness::agents::join(&solo, &owner, &lan, &agents, name))
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
    let noted = eventually(
        "the cut-off machine's workload noted offline",
        PATIENCE,
        || noted_offline(&solo, &owner, cut_off[0]),
    );
    let delay: Duration = (noted - cut_at).try_into().expect("noted after the cut");
    eprintln!(
        "partition: noted offline {} ms after the cut",
        delay.as_millis()
    );
    // Its last word came at most a heartbeat before the cut (a late one: the slack).
    let earliest = OFFLINE_AFTER - HEARTBEAT - SLACK;
    assert!(
        delay >= earliest,
        "too soon: {delay:?}, before {earliest:?}"
    );
    let latest = OFFLINE_AFTER + CONTROLLER_INTERVAL + SLACK * 5;
    assert!(delay <= latest, "too late: {delay:?}, after {latest:?}");
    for id in &cut_off {
        eventually(format_args!("{id} noted offline"), PATIENCE, || {
            noted_offline(&solo, &owner, id)
        });
    }

    cut.host.heal();
    // Heard again, the healed machine obeys: a stop goes down its stream and comes back done.
    assert_eq!(act(&solo, &owner.session, cut_off[0], "stop").0, 202);
    wait_for(&solo, &owner.session, cut_off[0], "stopped");
    // And the passes since the cut changed nothing else: nothing was stopped, deleted or
    // restarted, and the reachable machine's workloads were never noted offline.
    let after: Vec<_> = placed
        .iter()
        .map(|(id, _)| steps(&solo, &owner, id))
        .collect();
    for (((id, _), before), after) in placed.iter().zip(&before).zip(&after) {
        if id == cut_off[0] {
            assert_eq!(after[..before.len()], before[..], "{id}: {after:?}");
            assert!(
                after[before.len()..].iter().all(|s| s.starts_with("stopp")),
                "{id}: only the stop: {after:?}"
            );
        } else {
            assert_eq!(after, before, "{id}: nothing stopped, deleted or restarted");
            assert_eq!(state(&solo, &owner.session, id), "running");
        }
    }
    for id in &control {
        assert_eq!(noted_offline(&solo, &owner, id), None, "{id} was reachable");
    }
    drop(processes);
}

/// Cut off past the failure threshold: its running workload fails and its stopping one is
/// stopped, with the seeds' reason. Healed, neither comes back by itself; started again, the
/// failed one returns to its machine.
#[test]
fn a_machine_cut_off_past_the_failure_threshold_fails_its_workloads() {
    const OFFLINE_AFTER: Duration = Duration::from_secs(2);
    const OFFLINE_FAIL: Duration = Duration::from_secs(6);
    let (solo, lan, agents) =
        crate::harness::agents::solo_with_thresholds(OFFLINE_AFTER, OFFLINE_FAIL);
    let owner = Owner::of(&solo);
    let who = &owner.session;
    let machine = crate::harness::agents::join(&solo, &owner, &lan, &agents, "box");
    let agent = run_agent(&solo, &machine);
    online(&solo, &owner, &machine.id, &agent);
    let placed = running(&solo, &owner, 2);
    let (failing, stopping) = (&placed[0].0, &placed[1].0);

    machine.host.partition();
    assert_eq!(act(&solo, who, stopping, "stop").0, 202);
    wait_for(&solo, who, failing, "failed");
    wait_for(&solo, who, stopping, "stopped");
    let reason = format!(
        "its machine has been offline for over {}s",
        OFFLINE_FAIL.as_secs()
    );
    let failed = format!("failed: {reason}");
    assert_eq!(steps(&solo, &owner, failing).last().unwrap(), &failed);
    let stopped = steps(&solo, &owner, stopping);
    assert_eq!(stopped.last().unwrap(), &format!("stopped: {reason}"));

    // Healed and started again, the failed one returns to its machine: the machine was heard
    // again and obeys. Neither came back by itself meanwhile: the failed one's next step is the
    // start asked for, and the stopped one's timeline ends where it did.
    machine.host.heal();
    assert_eq!(state(&solo, who, failing), "failed");
    assert_eq!(act(&solo, who, failing, "start").0, 202);
    wait_for(&solo, who, failing, "running");
    let w = call(&solo, who, "GET", &format!("/v1/workloads/{failing}"), None).json();
    assert_eq!(w["machine_id"].as_str().unwrap().trim(), machine.id.trim());
    let restarted = steps(&solo, &owner, failing);
    let at = restarted.iter().rposition(|s| *s == failed).unwrap();
    assert!(
        restarted[at + 1].starts_with("pending: start requested by"),
        "nothing between the failure and the start asked for: {restarted:?}"
    );
    assert_eq!(state(&solo, who, stopping), "stopped");
    assert_eq!(
        steps(&solo, &owner, stopping),
        stopped,
        "the stopped one stays"
    );
    drop(agent);
}
