//! Solo on the agent backend as tests run it: machines joined from namespaces of their own,
//! their agents (the sim driver) started, stopped and killed, their state read.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use einsora_testkit::spawn::{Spawned, Stop};
use einsora_testkit::{eventually_or, setting};
use serde_json::{Value, json};

use crate::harness::lan::{Host, Lan};
use crate::harness::solo::{CONTROLLER_INTERVAL, Solo};
use crate::harness::support::stderr;
use crate::harness::workloads::{Owner, timeline};
use crate::harness::world::call;

/// EINSORA_AGENT_HEARTBEAT of the test's agents: well within every offline threshold set here.
pub const HEARTBEAT: Duration = Duration::from_millis(500);
/// How long a machine, an agent or a controller may take to do what a test waits on (start,
/// connect, sync, take the lease) on a loaded 2-core machine: a bound only a hang reaches.
pub const PATIENCE: Duration = Duration::from_secs(60);
/// A few controller passes: for a check that nothing happens once something did.
pub const PASSES: Duration = CONTROLLER_INTERVAL.saturating_mul(5);

/// An agent process, its output kept; stopped when dropped (SIGTERM, then SIGKILL if it hasn't
/// stopped within [`AGENT_STOPS_WITHIN`]: a failing test never hangs on an agent that doesn't
/// stop, and a passing one fails for it).
pub struct Agent(Spawned);

/// How long an agent may take to stop on SIGTERM.
const AGENT_STOPS_WITHIN: Duration = Duration::from_secs(30);

impl Agent {
    pub fn logs(&self) -> String {
        self.0.logs()
    }

    /// How many streams it has opened to its controller (it logs `syncing` on each).
    pub fn streams(&self) -> usize {
        self.logs().matches("syncing").count()
    }

    /// Waits until it has opened its `n`th stream (see [`Agent::streams`]).
    pub fn synced(&self, n: usize) {
        eventually_or(
            format_args!("the agent's stream {n}"),
            PATIENCE,
            || (self.streams() >= n).then_some(()),
            || self.logs(),
        );
    }

    /// SIGKILL: no chance to tidy up.
    pub fn kill(self) {
        crate::harness::support::signal(self.0.pid(), "KILL");
    }
}

/// A joined machine: its ID, its state directory, and the namespace it lives in.
pub struct Machine {
    pub id: String,
    pub state: PathBuf,
    pub host: Host,
}

/// `einsora up` on the agent backend, listening for agents on the test's own network (`Lan`),
/// without a local agent (the test's machines join), with `extra` settings; and the agents'
/// port. Declared in this order, the machines' processes stop before their network goes.
pub fn solo(extra: &[(&str, &str)]) -> (Solo, Lan, String) {
    let lan = Lan::new();
    let port = lan.port();
    let agents = port.to_string();
    let mut env = vec![
        ("EINSORA_AGENT_ADDR", agents.as_str()),
        ("EINSORA_CLUSTER_BACKEND", "agent"),
        ("EINSORA_LOCAL_AGENT", "false"),
    ];
    env.extend_from_slice(extra);
    let mut solo = Solo::start(&env);
    solo.hold(port);
    (solo, lan, agents)
}

/// [`solo`] whose machines are offline after `after` of silence and their workloads failed
/// after `fail` offline.
pub fn solo_with_thresholds(after: Duration, fail: Duration) -> (Solo, Lan, String) {
    let (after, fail) = (setting(after), setting(fail));
    solo(&[
        ("EINSORA_AGENT_OFFLINE_AFTER", after.as_str()),
        ("EINSORA_AGENT_OFFLINE_FAIL", fail.as_str()),
    ])
}

/// Joins a machine called `name` (its state directory `agent-<name>`) from a namespace of its
/// own on `lan`.
pub fn join(solo: &Solo, owner: &Owner, lan: &Lan, agents: &str, name: &str) -> Machine {
    let body = json!({ "name": name });
    let made = call(
        solo,
        &owner.session,
        "POST",
        "/v1/enrolment-tokens",
        Some(body),
    );
    assert_eq!(made.status, 200, "{}", made.body);
    let token = made.json()["token"].as_str().unwrap().to_owned();
    let state = solo.e.dir().join(format!("agent-{name}"));
    let env = [("EINSORA_AGENT_STATE_DIR", state.to_str().unwrap())];
    let controller = format!("https://{agents}");
    let args = [
        "agent",
        "join",
        "--token",
        &token,
        "--controller",
        &controller,
    ];
    let host = lan.host();
    let out = host.wrap(&solo.e.command(&args, &env)).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let id = std::fs::read_to_string(state.join("machine-id")).unwrap();
    Machine { id, state, host }
}

/// The machine's agent, in its namespace, with the sim driver, heartbeating well within the
/// scaled-down offline thresholds. Its logs are held to the stack's gate.
pub fn run_agent(solo: &Solo, machine: &Machine) -> Agent {
    run_agent_with(solo, machine, &[])
}

/// [`run_agent`] with `extra` settings.
pub fn run_agent_with(solo: &Solo, machine: &Machine, extra: &[(&str, &str)]) -> Agent {
    start_agent(solo, machine, extra, false)
}

/// [`run_agent_with`], the machine's run directories (its workloads' sockets) a tmpfs of its
/// own that the control host can't see ([`Host::wrap_apart`]).
pub fn run_agent_apart(solo: &Solo, machine: &Machine, extra: &[(&str, &str)]) -> Agent {
    start_agent(solo, machine, extra, true)
}

fn start_agent(solo: &Solo, machine: &Machine, extra: &[(&str, &str)], apart: bool) -> Agent {
    let heartbeat = setting(HEARTBEAT);
    let mut env = vec![
        ("EINSORA_AGENT_STATE_DIR", machine.state.to_str().unwrap()),
        ("EINSORA_AGENT_SIM", "true"),
        ("EINSORA_AGENT_DOCKER", "false"),
        ("EINSORA_AGENT_NATIVE", "off"),
        ("EINSORA_AGENT_HEARTBEAT", heartbeat.as_str()),
    ];
    env.extend_from_slice(extra);
    let agent = solo.e.command(&["agent"], &env);
    let mut cmd = if apart {
        machine.host.wrap_apart(&agent, &machine.state.join("run"))
    } else {
        machine.host.wrap(&agent)
    };
    cmd.stdout(Stdio::null()).stderr(Stdio::piped());
    let spawned = Spawned::start(cmd, Stop::TermWithin(AGENT_STOPS_WITHIN)).unwrap();
    solo.gate("agent", spawned.lines());
    Agent(spawned)
}

/// Waits until the machine reads online with the sim driver (its agent's inventory arrived);
/// the machine as read. (Online means seen within minutes: a machine that synced once reads
/// online through a test's short absences.)
pub fn online(solo: &Solo, owner: &Owner, machine_id: &str, agent: &Agent) -> Value {
    online_with(solo, owner, machine_id, agent, "sim")
}

/// [`online`], with `driver` its only driver.
pub fn online_with(
    solo: &Solo,
    owner: &Owner,
    machine_id: &str,
    agent: &Agent,
    driver: &str,
) -> Value {
    let path = format!("/v1/machines/{machine_id}");
    let read = || call(solo, &owner.session, "GET", &path, None).json();
    eventually_or(
        format_args!("the machine online with the {driver} driver"),
        PATIENCE,
        || {
            let machine = read();
            (machine["status"] == "online" && machine["drivers"] == json!([driver]))
                .then_some(machine)
        },
        || format!("{}\n{}", read(), agent.logs()),
    )
}

/// The timeline's steps, notes left out.
pub fn steps(solo: &Solo, owner: &Owner, id: &str) -> Vec<String> {
    timeline(solo, &owner.session, id)
        .into_iter()
        .filter(|e| !e.starts_with("note:"))
        .collect()
}
