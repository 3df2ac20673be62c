//! The relay with real workloads on other machines: `einsora up` with no machine of its own,
//! its agents' port on a LAN of network namespaces; two machines join from there with tokens,
//! each agent (linux-native) with its run directories on a tmpfs of its own that the control
//! host can't see, so no workload socket of theirs can be dialled from it and every byte goes
//! over the relay. A notebook opened through it runs a kernel cell over its WebSocket; an
//! endpoint answers chat, whole and streamed. Then the notebook's machine is cut off: its
//! relayed WebSocket ends, and the notebook's host says to try again shortly, its session kept.
//! Needs
//! bubblewrap, EINSORA_TEST_WHEELS and EINSORA_TEST_MODEL, as `native.rs` does.

use std::time::Duration;

use serde_json::json;

use crate::harness::agents::{join, run_agent_apart};
use crate::harness::lan::Lan;
use crate::harness::notebooks::{
    catalog_with_small_disks, endpoint_base, kernel_channels, open, run_cell, token, wheelhouse,
};
use crate::harness::solo::Solo;
use crate::harness::wire::events;
use crate::harness::workloads::{Owner, wait_for_within};
use crate::harness::world::{call, tenant};
use einsora_testkit::http::{exchange, request};

/// Each machine builds its environment on first use: pip installing from local wheels.
const FIRST_START: Duration = Duration::from_secs(600);
/// The agents' port's keepalive (20 s to give up on a silent connection) and a loaded machine's
/// margin.
const CUT_OFF: Duration = Duration::from_secs(60);

#[test]
fn workloads_on_other_machines_are_opened_through_the_relay() {
    let lan = Lan::new();
    let port = lan.port();
    let agents = port.to_string();
    let wheels = wheelhouse(&["notebook", "llamacpp"]);
    let models = tempfile::tempdir().unwrap();
    let model = std::env::var("EINSORA_TEST_MODEL").expect("EINSORA_TEST_MODEL (./scripts/test)");
    std::fs::copy(&model, models.path().join("tiny.gguf")).unwrap();
    let catalog = catalog_with_small_disks(models.path());
    let mut solo = Solo::start(&[
        ("EINSORA_AUTH_MODE", "dev"),
        ("EINSORA_AGENT_ADDR", agents.as_str()),
        ("EINSORA_CLUSTER_BACKEND", "agent"),
        ("EINSORA_LOCAL_AGENT", "false"),
        ("EINSORA_CATALOG", catalog.as_str()),
    ]);
    solo.hold(port);
    let acme = tenant(&solo, "dev@acme");
    let owner = Owner {
        token: token(&acme).to_owned(),
        session: acme.session.clone(),
    };
    let apart = [
        ("EINSORA_AGENT_SIM", "false"),
        ("EINSORA_AGENT_NATIVE", "on"),
        ("EINSORA_NATIVE_WHEELS", wheels.path().to_str().unwrap()),
        ("EINSORA_MODELS_DIR", models.path().to_str().unwrap()),
    ];
    // Declared before the machines: their workloads end after their agents stop.
    let mut leftovers = Vec::new();
    let machines: Vec<_> = ["left", "right"]
        .into_iter()
        .map(|name| {
            let machine = join(&solo, &owner, &lan, &agents, name);
            leftovers.push(crate::harness::notebooks::Leftovers::of_agent(
                &machine.state,
            ));
            let agent = run_agent_apart(&solo, &machine, &apart);
            (machine, agent)
        })
        .collect();

    let made = |body: serde_json::Value| {
        let made = call(&solo, &acme.token, "POST", "/v1/workloads", Some(body));
        assert_eq!(made.status, 202, "{}", made.body);
        made.json()["id"].as_str().unwrap().to_owned()
    };
    let notebook = made(
        json!({ "kind": "notebook", "name": "nb", "gpu_class": "cpu-1c-2g",
                                "image": "jupyterlab" }),
    );
    let endpoint = made(
        json!({ "kind": "endpoint", "name": "llm", "gpu_class": "cpu-1c-2g",
                                "image": "openai-endpoint", "endpoint": { "model": "tiny.gguf" } }),
    );
    let mut holders = Vec::new();
    for id in [&notebook, &endpoint] {
        wait_for_within(&solo, &acme.session, id, "running", FIRST_START);
        let placed = call(
            &solo,
            &acme.session,
            "GET",
            &format!("/v1/workloads/{id}"),
            None,
        );
        let on = placed.json()["machine_id"].as_str().unwrap().to_owned();
        let (machine, _) = machines
            .iter()
            .find(|(m, _)| m.id == on)
            .expect("placed on a joined machine");
        // Its socket is its machine's alone: nothing of its run directory shows here.
        assert!(
            !machine.state.join("run").join(id).exists(),
            "the control host sees {id}'s run directory"
        );
        holders.push(machine);
    }

    let (nb_host, nb_cookie) = open(&solo, &acme.session, &notebook);
    assert_eq!(
        run_cell(&solo, &nb_host, &nb_cookie, "print(6 * 7)"),
        "42\n"
    );

    let (host, prefix) = endpoint_base(&solo, &acme.token, &endpoint);
    let chat = |stream: bool| {
        let body = json!({ "messages": [{ "role": "user", "content": "hello" }],
                           "max_tokens": 8, "stream": stream })
        .to_string();
        let auth = format!("Bearer {}", token(&acme));
        let headers = [
            ("Content-Type", "application/json"),
            ("Authorization", auth.as_str()),
        ];
        let path = format!("{prefix}/chat/completions");
        request("POST", &path, &host, &headers, &body)
    };
    let answer = exchange(&solo.access, &chat(false));
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(
        answer.json()["object"],
        "chat.completion",
        "{}",
        answer.body
    );
    let (status, data) = events(&solo.access, &chat(true));
    assert!(status.contains(" 200 "), "{status}");
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"), "{data:?}");
    assert!(data.len() > 2, "streamed in pieces: {data:?}");

    // The notebook's machine cut off: the relayed WebSocket ends once the agents' port's
    // keepalive gives up on the connection (10 s to ping, 10 s to wait), and the notebook's
    // host then says its machine isn't connected.
    let mut ws = kernel_channels(&solo, &nb_host, &nb_cookie);
    solo.expect_log("the workload did not answer through the relay");
    holders[0].host.partition();
    assert!(ws.closes_within(CUT_OFF), "the relayed WebSocket ends");
    // Asked now, the proxy says to try again shortly (it isn't answering, or isn't ready: its
    // machine isn't connected), and the session stays for when it is back.
    let origin = format!("http://{nb_host}");
    let headers = [("Cookie", nb_cookie.as_str()), ("Origin", origin.as_str())];
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while std::time::Instant::now() < deadline {
        let path = "/api/status";
        let said = exchange(&solo.access, &request("GET", path, &nb_host, &headers, ""));
        assert_eq!(said.status, 503, "{}", said.body);
        assert!(said.body.contains("try again shortly"), "{}", said.body);
        std::thread::sleep(Duration::from_millis(500));
    }
}
