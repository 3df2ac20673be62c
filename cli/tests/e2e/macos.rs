//! The macos-native driver on Linux CI, with the stand-ins of `crates/standins`: the agent reads
//! a recorded Mac (an M2 Max with 32 GB) through the stand-in `sysctl`, builds its notebooks'
//! environment with a real uv from the notebook image's lock and wheels, and runs JupyterLab
//! under the stand-in `sandbox-exec` (the generated profile parsed and checked, then bubblewrap
//! with the places it names), its socket in a short run directory of its own. What a Mac really
//! enforces is `scripts/mac-check`'s, on a Mac.

use std::time::Duration;

use serde_json::json;

use crate::harness::cli::Cli;
use crate::harness::notebooks::*;
use crate::harness::solo::Solo;
use crate::harness::workloads::{timeline, wait_for, wait_for_within};
use crate::harness::world::{call, tenant};
use einsora_testkit::http::{exchange, request};

/// Its environment is built on first use: uv installing JupyterLab from local wheels.
const FIRST_START: Duration = Duration::from_secs(600);

fn launch(cli: &Cli<'_>, name: &str, class: &str) -> String {
    let args = [
        "launch",
        "--kind",
        "notebook",
        "--name",
        name,
        "--class",
        class,
        "--image",
        "jupyterlab",
    ];
    cli.json(&args)["id"].as_str().unwrap().to_owned()
}

/// The supervisor's record of its process (its PID and start time), as the agent keeps it.
fn record(solo: &Solo, id: &str) -> String {
    let path = solo
        .e
        .dir()
        .join("agent/macos/processes")
        .join(format!("{id}.json"));
    std::fs::read_to_string(path).unwrap()
}

/// An Apple-class notebook on the Mac: placed on macos-native with the Mac's GPU, opened
/// through the proxy, a cell runs; a CPU notebook waits for the Apple GPU while it runs
/// (native code can use Metal), then runs once it stops; stopped and started it keeps its
/// files; `einsora up` restarted adopts its process; restarted under another sandbox (the
/// owner's egress turned off: another profile) it is stopped as sandbox-changed, and started
/// again runs with its files; deleted, nothing of it is left. Another tenant's notebook never
/// runs there.
#[test]
fn a_mac_notebook_lives_its_whole_life_under_the_stand_in_sandbox() {
    let (mut solo, _leftovers) = solo_mac(&[]);
    solo.expect_log("its sandbox changed; stopping it");
    let acme = tenant(&solo, "dev@acme");
    let cli = Cli::with_token(&solo, token(&acme));
    let metal = launch(&cli, "metal", "apple-silicon-32gb");
    wait_for_within(&solo, &acme.session, &metal, "running", FIRST_START);
    let steps = timeline(&solo, &acme.session, &metal);
    assert!(
        steps.iter().any(|s| s.ends_with("with macos-native")),
        "{steps:?}"
    );
    let machines = cli.json(&["machines"]);
    let mac = &machines["machines"][0];
    assert_eq!(mac["os"], "macos", "{mac}");
    assert!(mac.to_string().contains("Apple M2 Max"), "{mac}");
    assert_eq!(mac["cpus"], 12, "{mac}");
    assert_eq!(
        mac["cores"],
        json!({ "performance": 8, "efficiency": 4 }),
        "{mac}"
    );
    let (host, cookie) = open(&solo, &acme.session, &metal);
    assert_eq!(run_cell(&solo, &host, &cookie, "print(6 * 7)"), "42\n");
    // Its token, a place the profile lets it read but not write, is read-only under the
    // stand-in too; the agent's state beyond its places isn't there at all; its kernels'
    // sockets are in its short run directory, each path within macOS's 103 bytes.
    let cell = "import os\n\
                t = os.environ['EINSORA_TOKEN_FILE']\n\
                print(len(open(t).read().strip()))\n\
                for p in (t, os.path.dirname(os.path.dirname(t)) + '/planted'):\n    \
                    try:\n        open(p, 'w').write('x')\n        print('wrote', p)\n    \
                    except OSError:\n        print('refused')\n\
                print(os.environ['JUPYTER_RUNTIME_DIR'])";
    let said = run_cell(&solo, &host, &cookie, cell);
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(lines[..3], ["64", "refused", "refused"], "{said}");
    assert!(!solo.e.dir().join("agent/secrets/planted").exists());
    let kernel = "kernel-00000000-0000-0000-0000-000000000000-ipc-5";
    assert!(lines[3].len() + 1 + kernel.len() <= 103, "{said}");
    let file = json!({ "type": "file", "format": "text", "content": "still here" }).to_string();
    notebook(
        &solo,
        &host,
        &cookie,
        "PUT",
        "/api/contents/kept.txt",
        &file,
    );

    // The Apple GPU is the Metal notebook's: a CPU notebook on this Mac waits for it.
    let cpu = launch(&cli, "cpu", "cpu-1c-2g");
    std::thread::sleep(Duration::from_secs(3));
    let steps = timeline(&solo, &acme.session, &cpu);
    assert!(
        steps.iter().any(|s| s.contains("Apple GPU is in use")),
        "{steps:?}"
    );
    cli.ok(&["stop", &metal]);
    wait_for(&solo, &acme.session, &metal, "stopped");
    wait_for_within(
        &solo,
        &acme.session,
        &cpu,
        "running",
        Duration::from_secs(120),
    );
    cli.ok(&["delete", &cpu]);
    wait_for(&solo, &acme.session, &cpu, "deleted");

    cli.ok(&["start", &metal]);
    wait_for(&solo, &acme.session, &metal, "running");
    let (host, cookie) = open(&solo, &acme.session, &metal);
    let kept = notebook(&solo, &host, &cookie, "GET", "/api/contents/kept.txt", "");
    assert_eq!(kept["content"], "still here");
    drop(cli);
    let before = record(&solo, &metal);

    solo.restart();
    wait_for(&solo, &acme.session, &metal, "running");
    assert_eq!(record(&solo, &metal), before, "the same process, adopted");
    let (host, cookie) = open(&solo, &acme.session, &metal);
    assert_eq!(run_cell(&solo, &host, &cookie, "print(6 * 7)"), "42\n");

    solo.restart_with(&[("EINSORA_AGENT_EGRESS", "off")]);
    wait_for(&solo, &acme.session, &metal, "failed");
    let reason = "failed: its sandbox changed; start it again to run under the new one with its \
                  saved data";
    let steps = timeline(&solo, &acme.session, &metal);
    assert_eq!(steps.last().unwrap(), reason, "{steps:?}");
    let cli = Cli::with_token(&solo, token(&acme));
    cli.ok(&["start", &metal]);
    wait_for(&solo, &acme.session, &metal, "running");
    assert_ne!(
        record(&solo, &metal),
        before,
        "a new process, under the new sandbox"
    );
    let (host, cookie) = open(&solo, &acme.session, &metal);
    let kept = notebook(&solo, &host, &cookie, "GET", "/api/contents/kept.txt", "");
    assert_eq!(kept["content"], "still here", "its saved data");

    cli.ok(&["delete", &metal]);
    wait_for(&solo, &acme.session, &metal, "deleted");
    // Another tenant's notebook never runs on macos-native (weak isolation: the owner's only).
    let globex = tenant(&solo, "dev@globex");
    let theirs = Cli::with_token(&solo, token(&globex)).launch_notebook("theirs");
    let theirs = theirs["id"].as_str().unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let steps = timeline(&solo, &globex.session, theirs);
    assert!(steps.iter().all(|s| !s.starts_with("running")), "{steps:?}");

    let agent = solo.e.dir().join("agent");
    let left = [
        data_dir(&solo, &metal),
        agent.join("homes").join(&metal),
        agent.join("secrets").join(&metal),
        agent.join("macos/profiles").join(format!("{metal}.sb")),
        std::path::PathBuf::from(lines[3]),
    ];
    for place in left {
        assert!(!place.exists(), "{} is gone", place.display());
    }
}

/// An endpoint of an Apple class on the Mac, launched, stopped, started and deleted: its runtime
/// is MLX, and the real MLX server
/// (`images/mlx/serve.py`, mlx-lm on MLX's CPU backend here) serves a tiny MLX model directory
/// copied into the endpoint's own storage, validated and checksummed; a chat answers through the
/// proxy, whole and streamed, with token usage; a request naming another model (which
/// mlx-lm's own server would fetch from a hub) is refused; a model that isn't one is refused
/// before anything starts.
#[test]
fn a_mac_endpoint_answers_chats_through_the_proxy() {
    let (solo, _leftovers) = solo_mac(&[]);
    solo.expect_log("its model can't be served");
    let acme = tenant(&solo, "dev@acme");
    let launch = |name: &str, model: &str| {
        let body = json!({ "kind": "endpoint", "name": name, "gpu_class": "apple-silicon-32gb",
                           "image": "openai-endpoint", "endpoint": { "model": model } });
        let made = call(&solo, &acme.token, "POST", "/v1/workloads", Some(body));
        assert_eq!(made.status, 202, "{}", made.body);
        made.json()["id"].as_str().unwrap().to_owned()
    };
    let bad = launch("bad", "not-a-model.gguf");
    wait_for(&solo, &acme.session, &bad, "failed");
    let id = launch("llm", "tiny-mlx");
    wait_for_within(&solo, &acme.session, &id, "running", FIRST_START);
    let steps = timeline(&solo, &acme.session, &id);
    assert!(
        steps.iter().any(|s| s.ends_with("with macos-native")),
        "{steps:?}"
    );
    let (host, prefix) = endpoint_base(&solo, &acme.token, &id);
    let chat = |body: serde_json::Value| {
        let body = body.to_string();
        let auth = format!("Bearer {}", token(&acme));
        let headers = [
            ("Content-Type", "application/json"),
            ("Authorization", auth.as_str()),
        ];
        let path = format!("{prefix}/chat/completions");
        exchange(
            &solo.access,
            &request("POST", &path, &host, &headers, &body),
        )
    };
    let hello = |stream: bool| {
        json!({ "messages": [{ "role": "user", "content": "hello" }],
                "max_tokens": 8, "stream": stream })
    };
    let whole = chat(hello(false));
    assert_eq!(whole.status, 200, "{}", whole.body);
    let answer = whole.json();
    assert_eq!(answer["object"], "chat.completion", "{}", whole.body);
    assert!(
        answer["usage"]["prompt_tokens"].as_u64().unwrap() > 0,
        "{}",
        whole.body
    );
    assert!(
        answer["usage"]["completion_tokens"].as_u64().unwrap() > 0,
        "{}",
        whole.body
    );
    let streamed = chat(hello(true));
    assert_eq!(streamed.status, 200, "{}", streamed.body);
    assert!(streamed.body.contains("data: {"), "{}", streamed.body);
    assert!(
        streamed.body.contains("chat.completion.chunk"),
        "{}",
        streamed.body
    );
    assert!(
        streamed.body.trim_end().ends_with("data: [DONE]"),
        "{}",
        streamed.body
    );
    let elsewhere = json!({ "model": "mlx-community/Llama-3.2-1B-Instruct-4bit",
                            "messages": [{ "role": "user", "content": "hello" }] });
    let refused = chat(elsewhere);
    assert_eq!(refused.status, 404, "{}", refused.body);
    assert_eq!(
        refused.json()["error"]["code"],
        "model_not_found",
        "{}",
        refused.body
    );
    let manifest = solo.e.dir().join("agent/models").join(&id);
    let listed: Vec<_> = std::fs::read_dir(&manifest)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        listed.len() >= 2,
        "its private copy and its manifest: {listed:?}"
    );

    // Stopped and started, it serves again.
    let cli = Cli::with_token(&solo, token(&acme));
    cli.ok(&["stop", &id]);
    wait_for(&solo, &acme.session, &id, "stopped");
    cli.ok(&["start", &id]);
    wait_for(&solo, &acme.session, &id, "running");
    let again = chat(hello(false));
    assert_eq!(again.status, 200, "{}", again.body);

    call(
        &solo,
        &acme.token,
        "DELETE",
        &format!("/v1/workloads/{id}"),
        None,
    );
    wait_for(&solo, &acme.session, &id, "deleted");
    assert!(!manifest.exists(), "its private copy is gone");
}
