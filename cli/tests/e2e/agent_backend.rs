//! Solo on the agent backend: a machine joins, its agent (with the sim driver) syncs, and
//! workloads live on it — admitted on that machine with that driver, running once the agent
//! says so; and a machine that goes away is noted, forgiven if it returns in time, and its
//! workloads failed if not.

use std::time::{Duration, Instant};

use einsora_testkit::{eventually, eventually_or, setting};
use serde_json::json;

use crate::harness::agents::*;
use crate::harness::cli::Cli;
use crate::harness::controllers::lease_holder;
use crate::harness::solo::{CONTROLLER_INTERVAL, Solo};
use crate::harness::support::stderr;
use crate::harness::workloads::{Owner, act, create, state, timeline, wait_for};
use crate::harness::world::call;

#[test]
fn a_notebook_lives_its_whole_life_on_a_joined_machine() {
    let (solo, lan, agents) = solo(&[]);
    let owner = Owner::of(&solo);
    let who = &owner.session;
    let machine = join(&solo, &owner, &lan, &agents, "box");
    let agent = run_agent(&solo, &machine);
    let name = online(&solo, &owner, &machine.id, &agent)["name"]
        .as_str()
        .unwrap()
        .to_owned();

    let (status, made) = create(&solo, who, "on-the-box", "cpu-1c-2g");
    assert_eq!(status, 202, "{made}");
    let id = made["id"].as_str().unwrap().to_owned();
    wait_for(&solo, who, &id, "running");
    let placed = call(&solo, who, "GET", &format!("/v1/workloads/{id}"), None).json();
    assert_eq!(placed["machine_id"], machine.id.as_str(), "{placed}");
    assert_eq!(placed["driver"], "sim", "{placed}");
    assert_eq!(act(&solo, who, &id, "stop").0, 202);
    wait_for(&solo, who, &id, "stopped");
    assert_eq!(act(&solo, who, &id, "start").0, 202);
    wait_for(&solo, who, &id, "running");
    assert_eq!(act(&solo, who, &id, "delete").0, 202);
    wait_for(&solo, who, &id, "deleted");
    let steps = steps(&solo, &owner, &id);
    let admitted = format!("provisioning: admitted: 1 × cpu-1c-2g on {name} with sim");
    assert_eq!(steps[1], admitted, "{steps:?}");
    assert_eq!(steps[2], "running: ready");
    assert_eq!(
        steps[6], admitted,
        "a notebook that ran before returns to its machine and driver"
    );
    assert_eq!(
        steps.last().unwrap(),
        "deleted: deleted, with everything it stored"
    );
}

/// Solo as a user meets it: `einsora up` enrols the machine it runs on and supervises its
/// agent; a workload runs there; `up` restarted, the same machine comes back and the workload
/// is adopted, still running, its timeline untouched.
#[test]
fn up_enrols_this_machine_and_its_workloads_outlive_a_restart() {
    let mut solo = Solo::start(&[
        ("EINSORA_CLUSTER_BACKEND", "agent"),
        ("EINSORA_AGENT_SIM", "true"),
        ("EINSORA_AGENT_DOCKER", "false"),
        ("EINSORA_AGENT_NATIVE", "off"),
    ]);
    assert!(solo.child("agent").is_some(), "{:?}", solo.children());
    let owner = Owner::of(&solo);
    let this_machine = |solo: &Solo| {
        let cli = Cli::with_token(solo, &owner.token);
        eventually_or(
            "this machine online",
            PATIENCE,
            || {
                let listed = cli.json(&["machines"]);
                let machines = listed["machines"].as_array().unwrap().clone();
                assert!(machines.len() <= 1, "one machine: {listed}");
                machines.into_iter().find(|m| m["status"] == "online")
            },
            || format!("{}\n{}", cli.json(&["machines"]), solo.logs()),
        )
    };
    // The agent's streams, as `up` shows its lines.
    let streams = |solo: &Solo| {
        solo.terminal()
            .lines()
            .filter(|l| l.starts_with("agent ") && l.contains("syncing"))
            .count()
    };
    let machine = this_machine(&solo);
    assert!(machine["cpus"].as_u64().unwrap() >= 1, "{machine}");
    let memory: u64 = machine["memory_bytes"].as_str().unwrap().parse().unwrap();
    assert!(memory > 0, "{machine}");
    assert_eq!(machine["drivers"], json!(["sim"]), "{machine}");
    let table = Cli::with_token(&solo, &owner.token).ok(&["machines"]);
    assert!(table.contains(machine["name"].as_str().unwrap()), "{table}");
    // Memory in GiB, as people read it, not a byte count.
    let gib = format!("{:.1}", memory as f64 / f64::from(1u32 << 30));
    assert!(
        table.contains("MEMORY GIB") && table.contains(&gib),
        "{gib} GiB: {table}"
    );
    assert!(
        !table.contains(&memory.to_string()),
        "no byte count: {table}"
    );

    let who = &owner.session;
    let (status, made) = create(&solo, who, "at-home", "cpu-1c-2g");
    assert_eq!(status, 202, "{made}");
    let id = made["id"].as_str().unwrap().to_owned();
    wait_for(&solo, who, &id, "running");
    let before = steps(&solo, &owner, &id);
    let streams_before = streams(&solo);
    assert!(streams_before >= 1, "{}", solo.terminal());

    solo.restart();
    let again = this_machine(&solo);
    assert_eq!(
        again["id"], machine["id"],
        "the same machine, not a second one"
    );
    // The restarted agent synced with the restarted controller, which leads; a few passes
    // after both, nothing was started again.
    eventually_or(
        "the agent syncing with the restarted controller",
        PATIENCE,
        || (streams(&solo) > streams_before).then_some(()),
        || solo.logs(),
    );
    let controller = solo.child("controller").expect("up runs a controller");
    eventually("the restarted controller leading", PATIENCE, || {
        (lease_holder(&solo.database) == Some(controller)).then_some(())
    });
    std::thread::sleep(PASSES);
    assert_eq!(state(&solo, who, &id), "running");
    assert_eq!(steps(&solo, &owner, &id), before);
    // And the restarted agent obeys (it syncs with the restarted controller).
    assert_eq!(act(&solo, who, &id, "stop").0, 202);
    wait_for(&solo, who, &id, "stopped");
}

#[test]
fn without_a_machine_a_workload_waits_with_the_seeds_reason() {
    let (solo, _lan, _) = solo(&[]);
    let owner = Owner::of(&solo);
    let (status, made) = create(&solo, &owner.session, "nowhere", "cpu-1c-2g");
    assert_eq!(status, 202, "{made}");
    let id = made["id"].as_str().unwrap().to_owned();
    wait_for(&solo, &owner.session, &id, "queued");
    assert_eq!(
        timeline(&solo, &owner.session, &id)[1],
        "queued: waiting for a machine that can run cpu-1c-2g to come online"
    );
}

/// Its agent gone, a machine's workloads read unknown (noted once in their timelines) and
/// nothing else happens; back in time, nothing changes; away too long, they fail.
#[test]
fn a_machine_away_is_noted_then_forgiven_or_failed_after_the_threshold() {
    const OFFLINE_AFTER: Duration = Duration::from_secs(2);
    // Room for an agent to start and reconnect after the note (milliseconds on an idle
    // machine), on a loaded one.
    const OFFLINE_FAIL: Duration = Duration::from_secs(9);
    let (solo, lan, agents) = solo_with_thresholds(OFFLINE_AFTER, OFFLINE_FAIL);
    let owner = Owner::of(&solo);
    let who = &owner.session;
    let machine = join(&solo, &owner, &lan, &agents, "box");
    let agent = run_agent(&solo, &machine);
    online(&solo, &owner, &machine.id, &agent);
    let (_, made) = create(&solo, who, "away", "cpu-1c-2g");
    let id = made["id"].as_str().unwrap().to_owned();
    wait_for(&solo, who, &id, "running");
    let offline_note = "note: its machine is offline; waiting for it to reconnect";
    let noted = |solo: &Solo| {
        timeline(solo, who, &id)
            .iter()
            .filter(|e| e.as_str() == offline_note)
            .count()
    };

    drop(agent);
    // It has exited: it was last heard before now.
    let gone = Instant::now();
    eventually_or(
        "the workload noting its machine offline",
        PATIENCE,
        || (noted(&solo) > 0).then_some(()),
        || format!("{:?}", timeline(&solo, who, &id)),
    );
    let back = run_agent(&solo, &machine);
    back.synced(1);
    let returned = gone.elapsed();
    assert!(
        returned < OFFLINE_FAIL,
        "the agent took {returned:?} to come back: too late to be forgiven"
    );
    // Until it would have failed had its absence not ended (a pass after the threshold, and a
    // margin), nothing happens.
    let would_have_failed = gone + OFFLINE_FAIL + CONTROLLER_INTERVAL + Duration::from_secs(1);
    std::thread::sleep(would_have_failed.saturating_duration_since(Instant::now()));
    assert_eq!(
        steps(&solo, &owner, &id).len(),
        3,
        "back in time: nothing stopped or restarted"
    );
    assert_eq!(noted(&solo), 1, "one note for the episode");
    eprintln!("away: back {} ms after it left", returned.as_millis());

    drop(back);
    wait_for(&solo, who, &id, "failed");
    assert_eq!(
        steps(&solo, &owner, &id).last().unwrap(),
        &format!(
            "failed: its machine has been offline for over {}s",
            OFFLINE_FAIL.as_secs()
        )
    );
    assert_eq!(
        noted(&solo),
        1,
        "noted once: nothing happened since the first, and a timeline never repeats its latest note"
    );
}

/// Deleting a workload whose machine can't answer completes: at once when the machine is
/// revoked, after the failure threshold when it is away; its name is free again; and the
/// machine that was away removes it when it returns (the sim driver forgets it).
#[test]
fn a_workload_deleted_without_its_machine_is_deleted_and_removed_on_return() {
    const OFFLINE_FAIL: Duration = Duration::from_secs(4);
    let (solo, lan, agents) = solo_with_thresholds(Duration::from_secs(2), OFFLINE_FAIL);
    let owner = Owner::of(&solo);
    let who = &owner.session;
    let (away, revoked) = (
        join(&solo, &owner, &lan, &agents, "away"),
        join(&solo, &owner, &lan, &agents, "revoked"),
    );
    let launch = |name: &str, machine: &Machine| {
        let agent = run_agent(&solo, machine);
        online(&solo, &owner, &machine.id, &agent);
        let (_, made) = create(&solo, who, name, "cpu-1c-2g");
        let id = made["id"].as_str().unwrap().to_owned();
        wait_for(&solo, who, &id, "running");
        (agent, id)
    };
    // One at a time, so each lands on the machine whose agent runs: the second once the
    // controller counts the first machine offline.
    let (agent, on_away) = launch("on-away", &away);
    drop(agent);
    let offline = "note: its machine is offline; waiting for it to reconnect";
    eventually_or(
        "the first machine counted offline",
        PATIENCE,
        || {
            timeline(&solo, who, &on_away)
                .iter()
                .any(|e| e == offline)
                .then_some(())
        },
        || format!("{:?}", timeline(&solo, who, &on_away)),
    );
    let (agent, on_revoked) = launch("on-revoked", &revoked);

    let path = format!("/v1/machines/{}/revoke", revoked.id);
    let answer = call(&solo, who, "POST", &path, Some(json!({})));
    assert_eq!(answer.status, 200, "{}", answer.body);
    drop(agent);
    assert_eq!(act(&solo, who, &on_revoked, "delete").0, 202);
    wait_for(&solo, who, &on_revoked, "deleted");
    assert_eq!(
        steps(&solo, &owner, &on_revoked).last().unwrap(),
        "deleted: deleted; its machine was revoked and will never sync again"
    );

    assert_eq!(act(&solo, who, &on_away, "delete").0, 202);
    wait_for(&solo, who, &on_away, "deleted");
    assert_eq!(
        steps(&solo, &owner, &on_away).last().unwrap(),
        &format!(
            "deleted: deleted while its machine was away (offline for over {}s); the machine \
             removes it if it returns",
            OFFLINE_FAIL.as_secs()
        )
    );
    let (status, again) = create(&solo, who, "on-away", "cpu-1c-2g");
    assert_eq!(status, 202, "its name is free: {again}");

    let sim = away.state.join("sim.json");
    let kept = || std::fs::read_to_string(&sim).unwrap_or_default();
    assert!(kept().contains(&on_away), "the sim driver still has it");
    let back = run_agent(&solo, &away);
    eventually_or(
        "the returned machine removing it",
        PATIENCE,
        || (!kept().contains(&on_away)).then_some(()),
        || format!("{}\n{}", kept(), back.logs()),
    );
}

/// The controller killed with SIGKILL under 20 connected machines: its restart settles until
/// they have all reconnected, marks none offline, and changes no workload.
#[test]
fn a_controller_restart_under_twenty_agents_settles_and_changes_nothing() {
    const MACHINES: usize = 20;
    const LEASE: Duration = Duration::from_secs(2);
    let lease = setting(LEASE);
    let (solo, lan, agents) = solo(&[("EINSORA_CONTROLLER_LEASE", lease.as_str())]);
    solo.expect_log("stopped unexpectedly; restarting child=\"controller\"");
    solo.expect_log("did not stop in time; killing it child=\"controller\"");
    let owner = Owner::of(&solo);
    let who = &owner.session;
    let mut machines = Vec::new();
    for i in 0..MACHINES {
        let machine = join(&solo, &owner, &lan, &agents, &format!("box-{i}"));
        let agent = run_agent(&solo, &machine);
        machines.push((agent, machine));
    }
    let synced = || {
        let listed = call(&solo, who, "GET", "/v1/machines", None).json();
        listed["machines"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["drivers"] == json!(["sim"]))
            .count()
    };
    eventually_or(
        format_args!("{MACHINES} machines synced"),
        PATIENCE,
        || (synced() == MACHINES).then_some(()),
        || format!("{} synced", synced()),
    );
    let mut ids = Vec::new();
    for i in 0..MACHINES {
        let (status, made) = create(&solo, who, &format!("w-{i}"), "cpu-1c-2g");
        assert_eq!(status, 202, "{made}");
        ids.push(made["id"].as_str().unwrap().to_owned());
    }
    for id in &ids {
        wait_for(&solo, who, id, "running");
    }
    let before: Vec<_> = ids.iter().map(|id| timeline(&solo, who, id)).collect();

    let streams: Vec<usize> = machines.iter().map(|(agent, _)| agent.streams()).collect();
    let controller = solo.child("controller").expect("up runs a controller");
    crate::harness::support::signal(controller, "KILL");
    let restarted = eventually("up restarting its controller", PATIENCE, || {
        solo.child("controller").filter(|&pid| pid != controller)
    });
    // Every agent reconnected, the restarted controller took the lease (the killed one's
    // expired), and a few passes later: no workload changed, none was noted.
    for (i, ((agent, _), before)) in machines.iter().zip(streams).enumerate() {
        eventually_or(
            format_args!("box-{i} reconnecting"),
            PATIENCE,
            || (agent.streams() > before).then_some(()),
            || agent.logs(),
        );
    }
    eventually("the restarted controller leading", LEASE + PATIENCE, || {
        (lease_holder(&solo.database) == Some(restarted)).then_some(())
    });
    std::thread::sleep(PASSES);
    let after: Vec<_> = ids.iter().map(|id| timeline(&solo, who, id)).collect();
    assert_eq!(after, before, "no workload changed, nothing was noted");
    let listed = call(&solo, who, "GET", "/v1/machines", None).json();
    let offline: Vec<_> = listed["machines"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["status"] != "online")
        .collect();
    assert!(offline.is_empty(), "{offline:?}");
    drop(machines);
}

/// The agent killed with SIGKILL 50 times at random moments, mid-start and mid-stop included,
/// while its workloads are stopped and started: nothing is deleted, restarted or failed that
/// wasn't asked for, and every timeline replays cleanly.
#[test]
fn an_agent_killed_fifty_times_loses_and_restarts_nothing() {
    let (solo, lan, agents) = solo(&[]);
    solo.expect_log("dropped a report; the machine is flagged");
    solo.expect_log("opens streams faster than allowed");
    let owner = Owner::of(&solo);
    let who = &owner.session;
    let machine = join(&solo, &owner, &lan, &agents, "box");
    let mut agent = run_agent(&solo, &machine);
    online(&solo, &owner, &machine.id, &agent);
    // Two: a cpu-1c-2g each, and this machine may have only two CPUs.
    let ids: Vec<String> = (0..2)
        .map(|i| {
            let (_, made) = create(&solo, who, &format!("k-{i}"), "cpu-1c-2g");
            made["id"].as_str().unwrap().to_owned()
        })
        .collect();
    for id in &ids {
        wait_for(&solo, who, id, "running");
    }
    let mut acknowledged = Vec::new();
    let mut seed = u64::from(std::process::id()) | 1;
    let mut random = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    for round in 0..50 {
        let id = &ids[usize::try_from(random(2)).unwrap()];
        let state_now = crate::harness::workloads::state(&solo, who, id);
        let (action, to, reason) = match state_now.as_str() {
            "running" | "provisioning" => ("stop", "stopping", "stop requested by"),
            "stopped" => ("start", "pending", "start requested by"),
            _ => ("", "", ""),
        };
        if !action.is_empty() && act(&solo, who, id, action).0 == 202 {
            acknowledged.push(crate::harness::replay::Acknowledged {
                workload: id.clone(),
                state: to.parse().unwrap(),
                reason,
            });
        }
        std::thread::sleep(Duration::from_millis(random(300)));
        agent.kill();
        agent = run_agent(&solo, &machine);
        if round % 10 == 9 {
            online(&solo, &owner, &machine.id, &agent);
        }
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    eventually("everything settles", Duration::from_secs(60), || {
        (rt.block_on(crate::harness::replay::unsettled(&solo.database)) == 0).then_some(())
    });
    let findings = rt.block_on(crate::harness::replay::check(&solo.database, &acknowledged));
    assert!(findings.clean(), "{findings:#?}");
    for id in &ids {
        let steps = steps(&solo, &owner, id);
        assert!(
            !steps
                .iter()
                .any(|s| s.starts_with("failed:") || s.starts_with("deleted")),
            "{steps:?}"
        );
        let admissions = steps
            .iter()
            .filter(|s| s.starts_with("provisioning:"))
            .count();
        let starts = acknowledged
            .iter()
            .filter(|a| &a.workload == id && a.reason == "start requested by")
            .count();
        assert_eq!(admissions, starts + 1, "one attempt per start: {steps:?}");
    }
    drop(agent);
}

/// A machine certificate is renewed over the stream before it expires; the stream lives on
/// past the first certificate's end and still carries the machine's traffic both ways, and a
/// restarted agent connects with the renewed one after the first expired.
#[test]
fn a_machine_certificate_is_renewed_over_the_stream() {
    // The agent must connect with the first certificate before it ends (milliseconds after the
    // join on an idle machine): room for a slow start.
    const LIFETIME: Duration = Duration::from_secs(10);
    let lifetime = setting(LIFETIME);
    let (solo, lan, agents) = solo(&[("EINSORA_AGENT_CERT_LIFETIME", lifetime.as_str())]);
    solo.expect_log("dropped a report; the machine is flagged");
    let owner = Owner::of(&solo);
    let who = &owner.session;
    let machine = join(&solo, &owner, &lan, &agents, "box");
    // The first certificate was issued during the join: it ends by then.
    let first_ends = Instant::now() + LIFETIME;
    let first = std::fs::read_to_string(machine.state.join("agent.pem")).unwrap();
    let agent = run_agent(&solo, &machine);
    eventually_or(
        "the agent connecting with its first certificate, before it ends",
        LIFETIME,
        || (agent.streams() >= 1).then_some(()),
        || agent.logs(),
    );
    let left = first_ends.saturating_duration_since(Instant::now());
    eprintln!(
        "renewal: connected with {} ms of the first certificate left",
        left.as_millis()
    );
    online(&solo, &owner, &machine.id, &agent);
    eventually_or(
        "the certificate renewed",
        PATIENCE,
        || {
            (std::fs::read_to_string(machine.state.join("agent.pem")).unwrap() != first)
                .then_some(())
        },
        || agent.logs(),
    );
    // Past the first certificate's end (a second's margin for the clocks' granularity), a
    // workload launched now runs on the machine: its desired state went down the stream and its
    // status came back up.
    std::thread::sleep(
        (first_ends + Duration::from_secs(1)).saturating_duration_since(Instant::now()),
    );
    let (status, made) = create(&solo, who, "after-renewal", "cpu-1c-2g");
    assert_eq!(status, 202, "{made}");
    let id = made["id"].as_str().unwrap().to_owned();
    wait_for(&solo, who, &id, "running");
    let placed = call(&solo, who, "GET", &format!("/v1/workloads/{id}"), None).json();
    assert_eq!(placed["machine_id"], machine.id.as_str(), "{placed}");
    // And it was the first stream that carried it: the agent connected once and never lost it.
    let logs = agent.logs();
    assert_eq!(agent.streams(), 1, "one stream all along:\n{logs}");
    assert!(!logs.contains("lost the controller"), "{logs}");
    assert!(!logs.contains("was revoked"), "{logs}");
    drop(agent);
    let again = run_agent(&solo, &machine);
    eventually_or(
        "the restarted agent syncing with its renewed certificate",
        PATIENCE,
        || {
            let logs = again.logs();
            assert!(!logs.contains("was revoked"), "{logs}");
            logs.contains("syncing").then_some(())
        },
        || again.logs(),
    );
}

/// A second agent on the same machine (its state directory) refuses to run beside the first.
#[test]
fn one_agent_per_machine() {
    let (solo, lan, agents) = solo(&[]);
    let owner = Owner::of(&solo);
    let machine = join(&solo, &owner, &lan, &agents, "box");
    let first = run_agent(&solo, &machine);
    online(&solo, &owner, &machine.id, &first);
    let env = [("EINSORA_AGENT_STATE_DIR", machine.state.to_str().unwrap())];
    let second =
        crate::harness::support::finish(solo.e.spawn(&["agent"], &env), Duration::from_secs(30));
    assert!(!second.status.success());
    assert!(
        stderr(&second).contains("another agent already runs for this machine"),
        "{}",
        stderr(&second)
    );
    drop(first);
}
