//! The linux-native driver with real workloads: `einsora up` on a machine whose agent has no
//! docker driver and the linux-native one, a JupyterLab notebook and a llama.cpp endpoint run as
//! sandboxed processes (bubblewrap) from environments built from the images' locks, and open
//! through the access proxy; the sandbox holds from inside the notebook. Needs bubblewrap, the
//! images' wheels (EINSORA_TEST_WHEELS) and EINSORA_TEST_MODEL.

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::cli::Cli;
use crate::harness::notebooks::*;
use crate::harness::solo::Solo;
use crate::harness::workloads::{timeline, wait_for, wait_for_within};
use crate::harness::world::{Tenant, call, tenant};
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

/// `einsora up` restarted: the notebook's server is adopted (the same process: its supervisor
/// record and JupyterLab's start time unchanged), not started again, and still serves. What it
/// prints reaches `einsora logs`, redacted, and across the restart no line is lost or repeated.
#[test]
fn an_agent_restart_adopts_a_native_notebook() {
    let (mut solo, _leftovers) = solo_native(&[]);
    let acme = tenant(&solo, "dev@acme");
    let cli = Cli::with_token(&solo, token(&acme));
    let id = cli.launch_notebook("kept")["id"]
        .as_str()
        .unwrap()
        .to_owned();
    wait_for_within(&solo, &acme.session, &id, "running", FIRST_START);
    let (host, cookie) = open(&solo, &acme.session, &id);
    let started = notebook(&solo, &host, &cookie, "GET", "/api/status", "")["started"].clone();
    let record = solo
        .e
        .dir()
        .join("agent/native/processes")
        .join(format!("{id}.json"));
    let before = std::fs::read_to_string(&record).unwrap();
    // A cell writes to its server's own output (the kernel inherits it), a credential with it.
    let print = |marker: &str| {
        format!("import os\nos.write(2, b'{marker} tsk_abcdefghijklmnop\\n')\nprint('ok')")
    };
    let (host_before, cookie_before) = (host.clone(), cookie.clone());
    assert_eq!(
        run_cell(
            &solo,
            &host_before,
            &cookie_before,
            &print("before-restart")
        ),
        "ok\n"
    );
    let first = cli.logs_until(&id, "before-restart");
    assert!(
        first.contains("before-restart tsk_abcd…"),
        "redacted: {first}"
    );
    assert!(!first.contains("tsk_abcdefghijklmnop"), "{first}");

    solo.restart();
    wait_for(&solo, &acme.session, &id, "running");
    let after = std::fs::read_to_string(&record).unwrap();
    assert_eq!(after, before, "the same process");
    let (host, cookie) = open(&solo, &acme.session, &id);
    let status = notebook(&solo, &host, &cookie, "GET", "/api/status", "");
    assert_eq!(
        status["started"], started,
        "JupyterLab wasn't started again"
    );
    assert_eq!(run_cell(&solo, &host, &cookie, "print(6 * 7)"), "42\n");
    assert_eq!(
        run_cell(&solo, &host, &cookie, &print("after-restart")),
        "ok\n"
    );
    let cli = Cli::with_token(&solo, token(&acme));
    let second = cli.logs_until(&id, "after-restart");
    let lines: Vec<&str> = second.lines().collect();
    assert!(
        second.starts_with(&first),
        "what it had is still there, first"
    );
    for marker in ["before-restart", "after-restart"] {
        let times = lines.iter().filter(|l| l.contains(marker)).count();
        assert_eq!(times, 1, "{marker} once: {second}");
    }
    let tail = cli.ok(&["logs", &id, "--tail", "1"]);
    assert_eq!(tail.lines().count(), 1, "{tail}");
}

/// From inside the notebook: nothing outside its files is writable, its token is read-only,
/// its network is loopback alone (nothing reaches the controller, nothing from outside reaches
/// a listener it opens), it has no GPU, and it sees none of the agent's directories. It is held
/// to its class (cpu-1c-2g): a process that takes more memory than 2 GiB is killed, it can't
/// have as many as 256 threads, and, from the host, every process of it is in its cgroup with
/// those limits and one CPU's time; stopped, its cgroup is gone.
#[test]
fn the_native_sandbox_holds_from_inside() {
    // Loopback only: the owner's egress is sandbox/egress.rs's.
    let (solo, _leftovers) = solo_native(&[("EINSORA_AGENT_EGRESS", "off")]);
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
import subprocess, sys, threading
r["over_memory"] = subprocess.run([sys.executable, "-c", "x = b'x' * (3 << 30)"]).returncode
release, threads = threading.Event(), []
try:
    for _ in range(300):
        t = threading.Thread(target=release.wait)
        t.start()
        threads.append(t)
except RuntimeError:
    pass
r["threads"] = len(threads)
release.set()
for t in threads:
    t.join()
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
    if agent_is_root() {
        assert_eq!(r["over_memory"], -9, "killed past its class's memory: {r}");
        let threads = r["threads"].as_u64().unwrap();
        assert!((1..256).contains(&threads), "{r}");
        held_to_its_class(&solo, &acme, &id);
    }
}

/// From the host: the cgroup a root agent made for notebook `id` of class cpu-1c-2g, on this
/// machine's hierarchy (v2, or v1's per controller), holds its server with its limits, and is
/// removed when it stops.
fn held_to_its_class(solo: &Solo, owner: &Tenant, id: &str) {
    let root = std::path::Path::new("/sys/fs/cgroup");
    let unified = root.join("cgroup.controllers").exists();
    let at = |controller: &str, file: &str| {
        let dir = if unified {
            root.join("einsora").join(id)
        } else {
            root.join(controller).join("einsora").join(id)
        };
        std::fs::read_to_string(dir.join(file))
            .unwrap_or_else(|e| panic!("{controller}/{file}: {e}"))
            .trim()
            .to_owned()
    };
    let two_gib = (2_u64 << 30).to_string();
    if unified {
        assert_eq!(at("memory", "memory.max"), two_gib);
        assert_eq!(at("cpu", "cpu.max"), "100000 100000");
    } else {
        assert_eq!(at("memory", "memory.limit_in_bytes"), two_gib);
        assert_eq!(at("cpu", "cpu.cfs_quota_us"), "100000");
    }
    assert_eq!(at("pids", "pids.max"), "256");
    let members: Vec<u32> = at("memory", "cgroup.procs")
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    let server = members.iter().any(|pid| {
        std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).contains("start.py"))
    });
    assert!(server, "its server is in its cgroup: {members:?}");
    let cli = Cli::with_token(solo, token(owner));
    cli.ok(&["stop", id]);
    wait_for(solo, &owner.session, id, "stopped");
    let memory = if unified {
        root.join("einsora").join(id)
    } else {
        root.join("memory/einsora").join(id)
    };
    assert!(!memory.exists(), "its cgroup is removed when it stops");
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
    let (host, prefix) = endpoint_base(&solo, &acme.token, &id);
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

/// `einsora agent sandbox` runs a script in a notebook's sandbox: given no GPU it sees no NVIDIA
/// device and no CUDA_VISIBLE_DEVICES; a GPU this machine doesn't have is refused by name.
#[test]
fn the_sandbox_command_runs_a_script_and_refuses_a_gpu_the_machine_lacks() {
    let e = crate::harness::support::Einsora::new();
    let script = e.dir().join("probe.py");
    std::fs::write(
        &script,
        "import json, os\nprint(json.dumps({'uid': os.getuid(), 'cuda': os.environ.get('CUDA_VISIBLE_DEVICES'), \
         'nvidia': [d for d in os.listdir('/dev') if d.startswith('nvidia')], 'cwd': os.getcwd()}))\n",
    )
    .unwrap();
    let script = script.to_str().unwrap();
    let sandbox = ["agent", "sandbox", "--python", "/usr/bin/python3"];
    let out = e
        .command(&[&sandbox[..], &[script]].concat(), &[])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_str(said.trim()).unwrap();
    assert_eq!(seen["cuda"], Value::Null, "{seen}");
    assert_eq!(seen["nvidia"], json!([]), "{seen}");
    assert_eq!(seen["cwd"], "/work", "{seen}");
    if agent_is_root() {
        assert_eq!(seen["uid"], 61_000, "{seen}");
    }
    let out = e
        .command(
            &[&sandbox[..], &["--gpu", "GPU-absent", script]].concat(),
            &[],
        )
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("GPU-absent isn't one of this machine's GPUs"),
        "{err}"
    );
}

/// scripts/gpu-check runs here against an nvidia-smi stand-in replaying a 2×H100 recording and
/// a Python without PyTorch: the inventory matches and its recording is nvidia-smi's answer
/// byte for byte, the negative control sees no GPU, and the GPU steps fail saying why (this
/// machine's NVIDIA driver lists none): the report says all of it, and the script fails.
#[test]
fn gpu_check_reports_what_ran_and_what_failed() {
    let e = crate::harness::support::Einsora::new();
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../agent/tests/fixtures/inventory/nvidia-smi-2x-h100.csv"
    );
    let bin = e.dir().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let stand_in = bin.join("nvidia-smi");
    std::fs::write(
        &stand_in,
        format!(
            "#!/bin/sh\ncase \"$*\" in\n\
             *uuid,name,memory.total*) cat {fixture} ;;\n\
             -L) echo 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-6c3c1e2a-9d0f-4a36-b0a2-5f1e8c7d9b10)'\n    \
                 echo 'GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-0e8f4b7d-2c41-4f5a-8e9b-3a6d1c2b7f44)' ;;\n\
             *) echo 570.86.15 ;;\nesac\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &stand_in,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let out_dir = e.dir().join("report");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/gpu-check");
    let path = format!("{}:/usr/bin:/bin:/usr/sbin:/sbin", bin.display());
    let run = std::process::Command::new("bash")
        .arg(script)
        .args(["--python", "/usr/bin/python3", "--einsora"])
        .arg(env!("CARGO_BIN_EXE_einsora"))
        .arg("--out")
        .arg(&out_dir)
        .env("PATH", path)
        .output()
        .unwrap();
    let report = std::fs::read_to_string(out_dir.join("report.md")).unwrap_or_default();
    assert!(!run.status.success(), "no GPU here: {report}");
    assert!(
        report.contains("- PASS: the inventory lists the GPUs"),
        "{report}"
    );
    assert!(
        report.contains("- PASS: given no GPU, it sees none"),
        "{report}"
    );
    let gpu_steps = report.matches("- FAIL: given GPU-").count();
    assert_eq!(gpu_steps, 2, "{report}");
    assert!(
        report.contains("isn't one of this machine's GPUs"),
        "{report}"
    );
    let recorded = std::fs::read(out_dir.join(format!("nvidia-smi-{}.csv", hostname()))).unwrap();
    assert_eq!(
        recorded,
        std::fs::read(fixture).unwrap(),
        "the recording is nvidia-smi's answer"
    );
}

fn hostname() -> String {
    let out = std::process::Command::new("hostname")
        .arg("-s")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}
