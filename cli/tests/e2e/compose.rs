//! A Lab from compose/ with the real images: a Solo install (an owner, a token, a workload and
//! its timeline) backed up and restored into the Lab's fresh Postgres before its first `up`;
//! `up --wait` brings every service up healthy; the Solo's token and password work there and
//! the API answers as the Solo did. A machine joins from the LAN with both controllers' ports,
//! its notebook opens through the relay (a kernel cell over its WebSocket); the leader is
//! killed, the standby leads, the agent and the proxy find it, and nothing restarts; `down`
//! then `up` keeps everything. Needs a Docker engine, EINSORA_COMPOSE, bubblewrap and
//! EINSORA_TEST_WHEELS.

use std::time::{Duration, Instant};

use einsora_testkit::{eventually_or, setting};
use serde_json::{Value, json};

use crate::harness::agents::{PATIENCE, join, online_with, run_agent_apart, steps};
use crate::harness::lab::Lab;
use crate::harness::lan::Lan;
use crate::harness::notebooks::{catalog_with_small_disks, open, run_cell, wheelhouse};
use crate::harness::solo::{OWNER_EMAIL, OWNER_PASSWORD, Solo};
use crate::harness::support::{Einsora, stderr};
use crate::harness::workloads::{Owner, act, create, wait_for, wait_for_within};
use crate::harness::world::{Credential, call, login};

/// The notebook's environment is built on first use on its machine.
const FIRST_START: Duration = Duration::from_secs(600);
const LEASE: Duration = Duration::from_secs(3);

#[test]
fn a_lab_from_compose_takes_in_a_solo_relays_fails_over_and_keeps_everything() {
    // The Solo moving up: an owner, a token, a workload with its timeline, and a catalog of its
    // own (small disks, for the machine of this test).
    let catalog_dir = tempfile::tempdir().unwrap();
    let catalog = catalog_with_small_disks(catalog_dir.path());
    let solo = Solo::start(&[("EINSORA_CATALOG", catalog.as_str())]);
    let solo_owner = Owner::of(&solo);
    let token = Credential::Token(solo_owner.token.clone());
    let (status, made) = create(&solo, &solo_owner.session, "from-solo", "cpu-1c-2g");
    assert_eq!(status, 202, "{made}");
    let old = made["id"].as_str().unwrap().to_owned();
    wait_for(&solo, &solo_owner.session, &old, "running");
    act(&solo, &solo_owner.session, &old, "stop");
    wait_for(&solo, &solo_owner.session, &old, "stopped");
    let listed = |s: &Solo| call(s, &token, "GET", "/v1/workloads", None).json();
    let before = listed(&solo);
    let archive = solo.e.dir().join("solo.backup");
    // With the installation's settings, as its operator runs it.
    let settings = [("EINSORA_CATALOG", catalog.as_str())];
    let out = solo
        .e
        .run(&["backup", "--to", archive.to_str().unwrap()], &settings);
    assert!(out.status.success(), "backup: {}", stderr(&out));
    // Readable by the image's einsora user (uid 990), as docs/operations.md says.
    std::os::unix::fs::chown(&archive, Some(990), None).unwrap();

    let lan = Lan::new();
    let interval = setting(Duration::from_millis(200));
    let lease = setting(LEASE);
    let e = Einsora::new();
    let mut lab = Lab::new(
        &e,
        &[
            ("EINSORA_CONTROLLER_INTERVAL", interval.as_str()),
            ("EINSORA_CONTROLLER_LEASE", lease.as_str()),
            // Where `restore` put the Solo's catalog.
            ("EINSORA_CATALOG", "/var/lib/einsora/catalog.yaml"),
        ],
    );
    lab.ok(&["up", "--detach", "--wait", "postgres"]);
    let inside = "/backup/solo.backup";
    let restored = lab.einsora(&["restore", "--from", inside], Some((&archive, inside)), "");
    assert!(restored.status.success(), "restore: {}", stderr(&restored));
    lab.up();
    let stack = Solo::attached(
        e,
        // The Host the gateway answers to: EINSORA_PUBLIC_URL's.
        format!("localhost:{}", lab.http),
        format!("127.0.0.1:{}", lab.access),
        lab.lines(),
    );
    // A standby's first tries and a killed leader's agents say so.
    stack.expect_log("lost the controller; reconnecting");
    assert_eq!(
        listed(&stack),
        before,
        "the Solo's workloads, as it answered"
    );
    let owner = Owner {
        session: login(&stack, OWNER_EMAIL, OWNER_PASSWORD),
        token: solo_owner.token.clone(),
    };
    drop(solo);

    // A machine joins from the LAN, given both controllers' ports.
    let agents = lab.agents.map(|port| format!("{}:{port}", lan.address()));
    let machine = join(&stack, &owner, &lan, &agents[0], "box");
    // Declared before its agent: its notebook ends after the agent stops.
    let _leftovers = crate::harness::notebooks::Leftovers::of_agent(&machine.state);
    let wheels = wheelhouse(&["notebook"]);
    let both = agents.join(",");
    let agent = run_agent_apart(
        &stack,
        &machine,
        &[
            ("EINSORA_AGENT_SIM", "false"),
            ("EINSORA_AGENT_NATIVE", "on"),
            ("EINSORA_NATIVE_WHEELS", wheels.path().to_str().unwrap()),
            ("EINSORA_AGENT_CONTROLLER", both.as_str()),
        ],
    );
    online_with(&stack, &owner, &machine.id, &agent, "linux-native");
    let nb = made_notebook(&stack, &owner.session);
    wait_for_within(&stack, &owner.session, &nb, "running", FIRST_START);
    let (host, cookie) = open(&stack, &owner.session, &nb);
    assert_eq!(run_cell(&stack, &host, &cookie, "print(6 * 7)"), "42\n");
    let timeline = steps(&stack, &owner, &nb);

    // The leader killed: the standby leads within the lease, the agent and the proxy find it.
    let leader = ["controller-a", "controller-b"]
        .into_iter()
        .find(|c| lab.logs_of(c).contains("leading lease"))
        .expect("a controller leads");
    let standby = if leader == "controller-a" {
        "controller-b"
    } else {
        "controller-a"
    };
    let streams = agent.streams();
    lab.ok(&["kill", leader]);
    let killed = Instant::now();
    eventually_or(
        "the standby leads",
        PATIENCE,
        || lab.logs_of(standby).contains("leading lease").then_some(()),
        || lab.logs_of(standby),
    );
    eprintln!("{standby} leads {:?} after the kill", killed.elapsed());
    agent.synced(streams + 1);
    let (host, cookie) = open(&stack, &owner.session, &nb);
    assert_eq!(run_cell(&stack, &host, &cookie, "print(7 * 6)"), "42\n");
    assert_eq!(
        steps(&stack, &owner, &nb),
        timeline,
        "nothing restarted or failed"
    );

    // Down and up again: everything kept, the notebook adopted where it ran.
    lab.ok(&["down", "--timeout", "5"]);
    lab.up();
    let owner = Owner {
        session: login(&stack, OWNER_EMAIL, OWNER_PASSWORD),
        ..owner
    };
    wait_for(&stack, &owner.session, &nb, "running");
    let (host, cookie) = open(&stack, &owner.session, &nb);
    assert_eq!(run_cell(&stack, &host, &cookie, "print(42)"), "42\n");
    assert_eq!(steps(&stack, &owner, &nb), timeline, "nothing restarted");
    let all = listed(&stack);
    let names: Vec<&str> = all["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "{all}");
    assert!(
        names.contains(&"from-solo") && names.contains(&"nb"),
        "{all}"
    );
}

fn made_notebook(stack: &Solo, who: &Credential) -> String {
    let body = json!({ "kind": "notebook", "name": "nb", "gpu_class": "cpu-1c-2g",
                       "image": "jupyterlab" });
    let made = call(stack, who, "POST", "/v1/workloads", Some(body));
    assert_eq!(made.status, 202, "{}", made.body);
    let made: Value = made.json();
    made["id"].as_str().unwrap().to_owned()
}
