//! The linux-native driver with real workloads: `einsora up` on a machine whose agent has no
//! docker driver and the linux-native one, a JupyterLab notebook and a llama.cpp endpoint run as
//! sandboxed processes (bubblewrap) from environments built from the images' locks, and open
//! through the access proxy; the sandbox holds from inside the notebook. Needs bubblewrap, the
//! images' wheels (EINSORA_TEST_WHEELS) and EINSORA_TEST_MODEL.

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::cli::Cli;
use crate::harness::notebooks::*;
use crate::harness::workloads::{timeline, wait_for, wait_for_within};
use crate::harness::world::{call, tenant};
use einsora_testkit::http::{exchange, request};

/// Its environment is built on first use: pip installing JupyterLab from local wheels.
const FIRST_START: Duration = Duration::from_secs(600);

/// Launched from the CLI, opened through the proxy: a cell runs on a kernel; stopped and
/// started, its files are still there; deleted, nothing of it is left.
#[test]
fn a_native_notebook_runs_opens_keeps_its_files_and_is_deleted() {
    let (solo, _leftovers) = solo_native(&[]);
    let acme = tenant(&solo, "dev@acme");
    let cli = Cli::with_token(&solo, token(&acme));
    let id = cli.launch_notebook("nb")["id"].as_str().unwrap().to_owned();
    wait_for_within(&solo, &acme.session, &id, "running", FIRST_START);

    let (host, cookie) = open(&solo, &acme.session, &id);
    assert_eq!(run_cell(&solo, &host, &cookie, "print(6 * 7)"), "42\n");
    let file = json!({ "type": "file", "format": "text", "content": "still here" }).to_string();
    notebook(
        &solo,
        &host,
        &cookie,
        "PUT",
        "/api/contents/kept.txt",
        &file,
    );

    cli.ok(&["stop", &id]);
    wait_for(&solo, &acme.session, &id, "stopped");
    assert!(
        data_dir(&solo, &id).join("kept.txt").is_file(),
        "its data is kept"
    );
    cli.ok(&["start", &id]);
    wait_for(&solo, &acme.session, &id, "running");
    let (host, cookie) = open(&solo, &acme.session, &id);
    let kept = notebook(&solo, &host, &cookie, "GET", "/api/contents/kept.txt", "");
    assert_eq!(kept["content"], "still here");

    cli.ok(&["delete", &id]);
    wait_for(&solo, &acme.session, &id, "deleted");
    assert!(!data_dir(&solo, &id).exists(), "its data is gone");
    let steps = timeline(&solo, &acme.session, &id);
    assert!(steps[1].ends_with("with linux-native"), "{steps:?}");

    // Another tenant's notebook never runs on a weak driver (nor on another's private machine).
    let globex = tenant(&solo, "dev@globex");
    let theirs = Cli::with_token(&solo, token(&globex)).launch_notebook("theirs");
    let theirs = theirs["id"].as_str().unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let steps = timeline(&solo, &globex.session, theirs);
    assert!(steps.iter().all(|s| !s.starts_with("running")), "{steps:?}");
}

/// From inside the notebook: nothing outside its files is writable, its token is read-only,
/// its network is loopback alone (nothing reaches the controller, nothing from outside reaches
/// a listener it opens), it has no GPU, and it sees none of the agent's directories.
#[test]
fn the_native_sandbox_holds_from_inside() {
    let (solo, _leftovers) = solo_native(&[]);
    let acme = tenant(&solo, "dev@acme");
    let cli = Cli::with_token(&solo, token(&acme));
    let id = cli.launch_notebook("probe")["id"]
        .as_str()
        .unwrap()
        .to_owned();
    wait_for_within(&solo, &acme.session, &id, "running", FIRST_START);
    let (host, cookie) = open(&solo, &acme.session, &id);
    let controller_port = solo.http.rsplit_once(':').unwrap().1;
    let state_dir = solo.e.dir().join("agent");
    let probe = format!(
        r#"
import json, os, socket
def tries(f):
    try:
        f()
        return "ok"
    except Exception as e:
        return type(e).__name__
r = {{"uid": os.getuid(), "work": tries(lambda: open("/work/probe.txt", "w").write("x"))}}
for p in ["/usr/probe", "/etc/probe", "/opt/venv/probe", "/opt/einsora/start.py", "/run/secrets/einsora/probe", "/probe", "/home/probe"]:
    r[p] = tries(lambda p=p: open(p, "a").write("x"))
r["token"] = tries(lambda: open("/run/secrets/einsora/token", "a").write("x"))
r["interfaces"] = sorted(n for _, n in socket.if_nameindex())
r["controller"] = tries(lambda: socket.create_connection(("127.0.0.1", {controller_port}), timeout=2))
r["state_dir"] = os.path.exists({state_dir:?})
r["gpus"] = sorted(d for d in os.listdir("/dev") if d.startswith("nvidia"))
listener = socket.socket()
listener.bind(("0.0.0.0", 0))
listener.listen()
r["port"] = listener.getsockname()[1]
print(json.dumps(r))
"#
    );
    let out = run_cell(&solo, &host, &cookie, &probe);
    let r: Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(r["work"], "ok", "its files are writable: {r}");
    for path in [
        "/usr/probe",
        "/etc/probe",
        "/opt/venv/probe",
        "/opt/einsora/start.py",
        "/run/secrets/einsora/probe",
        "/probe",
        "/home/probe",
    ] {
        assert_ne!(r[path], "ok", "{path} is writable: {r}");
    }
    assert_ne!(r["token"], "ok", "its token is read-only: {r}");
    assert_eq!(r["interfaces"], json!(["lo"]), "{r}");
    assert_ne!(r["controller"], "ok", "it reaches the controller: {r}");
    assert_eq!(r["state_dir"], false, "it sees the agent's directory: {r}");
    assert_eq!(r["gpus"], json!([]), "{r}");
    if agent_is_root() {
        assert_eq!(r["uid"], 61_000, "a user of no account: {r}");
    }
    let port = r["port"].as_u64().unwrap();
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", u16::try_from(port).unwrap())).is_err(),
        "a listener inside is reachable from the host: {r}"
    );
}

/// A llama.cpp endpoint answers chat completions to an API token through the proxy; another
/// tenant's token gets 404.
#[test]
fn a_native_endpoint_serves_chat_completions() {
    let (solo, _leftovers) = solo_native(&[]);
    let acme = tenant(&solo, "dev@acme");
    let body = json!({ "kind": "endpoint", "name": "llm", "gpu_class": "cpu-1c-2g",
                       "image": "openai-endpoint", "endpoint": { "model": "tiny.gguf" } });
    let made = call(&solo, &acme.token, "POST", "/v1/workloads", Some(body));
    assert_eq!(made.status, 202, "{}", made.body);
    let id = made.json()["id"].as_str().unwrap().to_owned();
    wait_for_within(&solo, &acme.session, &id, "running", FIRST_START);
    let grant = call(
        &solo,
        &acme.token,
        "POST",
        &format!("/v1/workloads/{id}/access"),
        Some(json!({})),
    );
    let base = grant.json()["endpoint"]["base_url"]
        .as_str()
        .unwrap()
        .to_owned();
    let host = format!("localhost:{}", port(&solo));
    let prefix = base.split_once(&host).unwrap().1.to_owned();
    let chat = |bearer: &str| {
        let body = json!({ "messages": [{ "role": "user", "content": "hello" }],
                           "max_tokens": 8 })
        .to_string();
        let auth = format!("Bearer {bearer}");
        let headers = [
            ("Content-Type", "application/json"),
            ("Authorization", auth.as_str()),
        ];
        request(
            "POST",
            &format!("{prefix}/chat/completions"),
            &host,
            &headers,
            &body,
        )
    };
    let answer = exchange(&solo.access, &chat(token(&acme)));
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(
        answer.json()["object"],
        "chat.completion",
        "{}",
        answer.body
    );
    let globex = tenant(&solo, "dev@globex");
    assert_eq!(exchange(&solo.access, &chat(token(&globex))).status, 404);

    call(
        &solo,
        &acme.token,
        "DELETE",
        &format!("/v1/workloads/{id}"),
        None,
    );
    wait_for(&solo, &acme.session, &id, "deleted");
}

fn agent_is_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}
