//! Two controllers of one region on the agent backend, sharing Postgres, each with its own
//! agents' port; a machine's agent is given both. Only the one leading serves machines: the
//! agent, refused by the standby, syncs with the leader. The leader killed, the standby (which
//! stood by longer than the offline thresholds) leads within the lease, the agent reconnects to
//! it, nothing is restarted or failed, and the timelines replay clean.

use std::time::{Duration, Instant};

use einsora_testkit::{eventually, setting};

use crate::harness::agents::{join, online, run_agent_with, steps};
use crate::harness::controllers::{Controller, lease_holder, stack};
use crate::harness::lan::Lan;
use crate::harness::notebooks::token;
use crate::harness::replay;
use crate::harness::solo::Engine;
use crate::harness::workloads::{Owner, create, state, wait_for};
use crate::harness::world::tenant;

const LEASE: Duration = Duration::from_secs(2);
/// A machine silent this long is offline, and its workloads fail: longer than the agent can take
/// to reach a new leader (rounds after 0.5, 1, 2 and 4 s of jittered backoff once the leader is
/// gone, the lease's 2 s among them), so that a failover fails nothing, as in production.
const OFFLINE: Duration = Duration::from_secs(8);
/// Room for a loaded two-core machine on top of the lease and a retry.
const SLACK: Duration = Duration::from_secs(10);

#[test]
fn a_killed_leaders_machines_move_to_its_standby_and_nothing_restarts() {
    let lan = Lan::new();
    let (mut solo, catalog) = stack(Engine::Postgres, None, &[]);
    // The killed leader's stream ends without a word: the agent says it lost it.
    solo.expect_log("lost the controller; reconnecting");
    let db = solo.database.clone();
    let acme = tenant(&solo, "dev@acme");
    let owner = Owner {
        token: token(&acme).to_owned(),
        session: acme.session.clone(),
    };
    let (lease, offline) = (setting(LEASE), setting(OFFLINE));
    let ports = [lan.port(), lan.port()];
    let addrs: Vec<String> = ports.iter().map(ToString::to_string).collect();
    let start = |agents: &str| {
        let env = [
            ("EINSORA_CLUSTER_BACKEND", "agent"),
            ("EINSORA_AGENT_ADDR", agents),
            ("EINSORA_CONTROLLER_INTERVAL", "100ms"),
            ("EINSORA_CONTROLLER_LEASE", lease.as_str()),
            ("EINSORA_AGENT_OFFLINE_AFTER", offline.as_str()),
            ("EINSORA_AGENT_OFFLINE_FAIL", offline.as_str()),
        ];
        Controller::start(&solo, &catalog, &env)
    };
    let leader = start(&addrs[0]);
    eventually("the first controller leads", SLACK, || {
        (lease_holder(&db) == Some(leader.pid())).then_some(())
    });
    let standby = start(&addrs[1]);
    let stood_by = Instant::now();
    eventually("the second stands by", SLACK, || {
        standby.logs().contains("standing by").then_some(())
    });
    for port in ports {
        solo.hold(port);
    }

    let machine = join(&solo, &owner, &lan, &addrs[0], "box");
    // The standby first: it refuses, and the agent tries the next.
    let both = format!("{},{}", addrs[1], addrs[0]);
    let agent = run_agent_with(&solo, &machine, &[("EINSORA_AGENT_CONTROLLER", &both)]);
    online(&solo, &owner, &machine.id, &agent);
    assert!(
        agent
            .logs()
            .contains("the controller stands by; trying the region's next"),
        "{}",
        agent.logs()
    );
    let id = |made: (u16, serde_json::Value)| made.1["id"].as_str().unwrap().to_owned();
    let who = &owner.session;
    let ids = [
        id(create(&solo, who, "one", "cpu-1c-2g")),
        id(create(&solo, who, "two", "cpu-1c-2g")),
    ];
    for w in &ids {
        wait_for(&solo, who, w, "running");
    }
    let before: Vec<Vec<String>> = ids.iter().map(|w| steps(&solo, &owner, w)).collect();
    agent.synced(1);
    let streams = agent.streams();
    // Longer than a machine may be silent, and than its workloads may be offline: none of it
    // counts once the standby leads.
    std::thread::sleep((OFFLINE + Duration::from_secs(1)).saturating_sub(stood_by.elapsed()));

    leader.kill();
    let killed = Instant::now();
    eventually("the standby leads", LEASE + SLACK, || {
        (lease_holder(&db) == Some(standby.pid())).then_some(())
    });
    let leading = Instant::now();
    eprintln!("the standby leads {:?} after the kill", killed.elapsed());
    agent.synced(streams + 1);
    eprintln!(
        "the agent syncs with it {:?} after the kill",
        killed.elapsed()
    );
    // A few passes of the new leader, past the offline thresholds from its start.
    std::thread::sleep((OFFLINE + Duration::from_secs(2)).saturating_sub(leading.elapsed()));
    for (w, before) in ids.iter().zip(&before) {
        assert_eq!(state(&solo, who, w), "running");
        assert_eq!(
            &steps(&solo, &owner, w),
            before,
            "nothing restarted or failed"
        );
    }
    assert_eq!(
        online(&solo, &owner, &machine.id, &agent)["status"],
        "online"
    );

    let rt = tokio::runtime::Runtime::new().unwrap();
    let findings = rt.block_on(replay::check(&db, &[]));
    assert!(findings.clean(), "{findings:#?}");
}
