//! Solo on the agent backend: a machine joins, its agent (with the sim driver) syncs, and a
//! notebook lives its whole life on it — admitted on that machine with that driver, running
//! once the agent says it is ready, stopped, started again, deleted.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::lifecycle::{Owner, act, create, timeline, wait_for};
use crate::solo::Solo;
use crate::support::{free_addr, stderr, terminate};
use crate::world::call;

/// An agent process, its output kept; stopped when dropped.
struct Agent {
    child: Option<Child>,
    logs: Arc<Mutex<String>>,
}

impl Drop for Agent {
    fn drop(&mut self) {
        if let Some(child) = self.child.take() {
            terminate(child);
        }
    }
}

fn join_and_run(solo: &Solo, owner: &Owner, agents: &str) -> (String, Agent) {
    let made = call(
        solo,
        &owner.session,
        "POST",
        "/v1/enrolment-tokens",
        Some(json!({ "name": "box" })),
    );
    assert_eq!(made.status, 200, "{}", made.body);
    let token = made.json()["token"].as_str().unwrap().to_owned();
    let state = solo.e.dir().join("agent");
    let env = [
        ("EINSORA_AGENT_STATE_DIR", state.to_str().unwrap()),
        ("EINSORA_AGENT_SIM", "true"),
    ];
    let controller = format!("https://{agents}");
    let out = solo.e.run(
        &[
            "agent",
            "join",
            "--token",
            &token,
            "--controller",
            &controller,
        ],
        &env,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let id = std::fs::read_to_string(state.join("machine-id")).unwrap();
    let mut child = solo
        .e
        .command(&["agent"], &env)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let logs = Arc::new(Mutex::new(String::new()));
    let into = Arc::clone(&logs);
    let err = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            into.lock().unwrap().push_str(&format!("{line}\n"));
        }
    });
    (
        id,
        Agent {
            child: Some(child),
            logs,
        },
    )
}

#[test]
fn a_notebook_lives_its_whole_life_on_a_joined_machine() {
    let agents = free_addr();
    let solo = Solo::start(&[
        ("EINSORA_AGENT_ADDR", agents.as_str()),
        ("EINSORA_CLUSTER_BACKEND", "agent"),
    ]);
    let owner = Owner::of(&solo);
    let who = &owner.session;
    let (machine_id, agent) = join_and_run(&solo, &owner, &agents);
    let path = format!("/v1/machines/{machine_id}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let machine = loop {
        let machine = call(&solo, who, "GET", &path, None).json();
        if machine["status"] == "online" && machine["drivers"] == json!(["sim"]) {
            break machine;
        }
        assert!(
            Instant::now() < deadline,
            "{machine}\n{}",
            agent.logs.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let name = machine["name"].as_str().unwrap().to_owned();

    let (status, made) = create(&solo, who, "on-the-box", "cpu-1c-2g");
    assert_eq!(status, 202, "{made}");
    let id = made["id"].as_str().unwrap().to_owned();
    wait_for(&solo, who, &id, "running");
    let placed = call(&solo, who, "GET", &format!("/v1/workloads/{id}"), None).json();
    assert_eq!(placed["machine_id"], machine_id.as_str(), "{placed}");
    assert_eq!(placed["driver"], "sim", "{placed}");
    assert_eq!(act(&solo, who, &id, "stop").0, 202);
    wait_for(&solo, who, &id, "stopped");
    assert_eq!(act(&solo, who, &id, "start").0, 202);
    wait_for(&solo, who, &id, "running");
    assert_eq!(act(&solo, who, &id, "delete").0, 202);
    wait_for(&solo, who, &id, "deleted");
    let steps: Vec<String> = timeline(&solo, who, &id)
        .into_iter()
        .filter(|e| !e.starts_with("note:"))
        .collect();
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

#[test]
fn without_a_machine_a_workload_waits_with_the_seeds_reason() {
    let agents = free_addr();
    let solo = Solo::start(&[
        ("EINSORA_AGENT_ADDR", agents.as_str()),
        ("EINSORA_CLUSTER_BACKEND", "agent"),
    ]);
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
