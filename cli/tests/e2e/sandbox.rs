//! The docker driver's sandbox on a real engine, probed from outside and from inside: a
//! workload listens on no port, on the host or in its own network namespace; its socket is its
//! user's alone; inside, it runs unprivileged, read-only, offline, within its pids and memory
//! limits, and the machine keeps syncing when it hits them; a bad model is refused with a clear
//! reason before anything is served; and Einsora itself runs as a non-root user. Needs what
//! docker.rs needs (the engine, the images, EINSORA_TEST_MODEL). Bounds are generous: a loaded
//! 2-core machine.

mod egress;
mod host;
mod kernel;
mod system_user;

use std::collections::BTreeSet;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::notebooks::{Leftovers, containers, open, port, run_cell, solo, solo_with};
use crate::harness::solo::{Engine, Solo};
use crate::harness::support::{Einsora, processes_on};
use crate::harness::workloads::{Owner, create, state, timeline, wait_for};
use crate::harness::world::{a_notebook, call, launch, tenant};
use host::{
    container_of, host_addresses, inspect, interfaces, is_loopback, listening, oom_kills, pid_of,
    sharing_namespaces_with, socket_inodes, status_field, uid_of,
};
use kernel::{FORK_BOMB, Kernel, MEMORY_HOG, PROBE, Ran};
use system_user::SystemUser;

const GIB: i64 = 1 << 30;

fn an_endpoint(name: &str, model: &str) -> Value {
    json!({ "kind": "endpoint", "name": name, "gpu_class": "cpu-1c-2g",
            "image": "openai-endpoint", "endpoint": { "model": model } })
}

/// The user a workload's server runs as when this test's Einsora runs as the test's user:
/// uid 61000 when that is root, else the test's own.
fn workload_user() -> (u32, u32) {
    if uid_of("self") == 0 {
        return (61_000, 61_000);
    }
    (uid_of("self"), gid_of("self"))
}

/// The real gid of `pid` (`self` for this test).
fn gid_of(pid: &str) -> u32 {
    let gids = status_field(pid, "Gid").unwrap();
    gids.split_whitespace().next().unwrap().parse().unwrap()
}

/// Asserts `path`'s type, mode and owner.
fn assert_private(path: &Path, mode: u32, user: (u32, u32)) {
    let meta = std::fs::symlink_metadata(path).unwrap();
    assert_eq!(
        meta.mode() & 0o7777,
        mode,
        "{} is {:o}",
        path.display(),
        meta.mode() & 0o7777
    );
    assert_eq!((meta.uid(), meta.gid()), user, "{}'s owner", path.display());
}

/// Where the agent keeps `what` (`run`, `data`, `models`) of a workload.
fn agent_dir(solo: &Solo, what: &str, id: &str) -> PathBuf {
    solo.e.dir().join("agent").join(what).join(id)
}

/// A workload's socket and run directory: owner-only, the workload user's.
fn assert_socket_is_private(solo: &Solo, id: &str, socket: &str, user: (u32, u32)) {
    let run = agent_dir(solo, "run", id);
    assert_private(&run, 0o700, user);
    let path = run.join(socket);
    let meta = std::fs::symlink_metadata(&path).unwrap();
    assert!(
        meta.file_type().is_socket(),
        "{} is a socket",
        path.display()
    );
    assert_private(&path, 0o600, user);
}

/// With a notebook (and a kernel in it) and an endpoint running, no process of either listens
/// on the host, and in their own network namespaces (the endpoint's has no interface but
/// loopback, the notebook's one on the fenced egress network) nothing listens beyond loopback. Their sockets and run directories are their user's alone;
/// the token each was started with is a file in the agent's own secrets directory, readable by
/// that user alone, and none lies beside the socket.
#[test]
fn no_listeners() {
    let (solo, _leftovers) = solo();
    let acme = tenant(&solo, "dev@acme");
    let nb = launch(&solo, &acme.token, a_notebook("nb"));
    let llm = launch(&solo, &acme.token, an_endpoint("llm", "tiny.gguf"));
    wait_for(&solo, &acme.session, &nb, "running");
    wait_for(&solo, &acme.session, &llm, "running");
    let (host, cookie) = open(&solo, &acme.session, &nb);
    assert_eq!(run_cell(&solo, &host, &cookie, "print(6 * 7)"), "42\n");

    let on_host = listening("self");
    let host_inodes: BTreeSet<u64> = on_host.iter().map(|s| s.inode).collect();
    // The enumeration sees what it should: the access proxy's listener is among them.
    let access = solo.child("access").expect("the access proxy runs");
    let proxy_port: u16 = port(&solo).parse().unwrap();
    let proxy = on_host
        .iter()
        .find(|s| s.port == proxy_port)
        .expect("its listener");
    assert!(
        socket_inodes(&[access]).contains(&proxy.inode),
        "the proxy's listener is found by its inode"
    );

    let user = workload_user();
    let agent = (uid_of("self"), gid_of("self"));
    for (id, socket, token) in [(&nb, "jl.sock", "token"), (&llm, "llm.sock", "api-key")] {
        let container = container_of(id);
        let pid = pid_of(&container);
        // The owner's notebook has the egress network (sandbox/egress.rs); an endpoint none.
        let expected: &[&str] = if socket == "jl.sock" {
            &["eth0", "lo"]
        } else {
            &["lo"]
        };
        let mut names = interfaces(pid);
        names.sort();
        assert_eq!(names, expected, "{socket}'s namespace's interfaces");
        let inside = listening(&pid.to_string());
        let exposed: Vec<_> = inside.iter().filter(|s| !is_loopback(s.local)).collect();
        assert!(
            exposed.is_empty(),
            "{socket}'s server listens beyond loopback: {exposed:?}"
        );
        if socket == "jl.sock" {
            // ipykernel's one loopback port: the namespace's tables are the ones read.
            assert!(
                inside.iter().any(|s| s.state == "0A"),
                "the kernel's loopback listener is seen: {inside:?}"
            );
        }
        let processes = sharing_namespaces_with(pid);
        assert!(!processes.is_empty());
        let held = socket_inodes(&processes);
        assert!(!held.is_empty(), "{socket}'s server holds sockets");
        let on_the_host: Vec<_> = held.intersection(&host_inodes).collect();
        assert!(
            on_the_host.is_empty(),
            "{socket}'s server listens on the host: {on_the_host:?}"
        );
        assert_socket_is_private(&solo, id, socket, user);
        let secrets = agent_dir(&solo, "secrets", id);
        assert_private(&secrets, 0o700, agent);
        assert_private(&secrets.join(token), 0o400, user);
        let run = agent_dir(&solo, "run", id);
        for name in ["token", "api-key"] {
            assert!(
                !run.join(name).exists(),
                "a token beside {socket}: {}",
                run.display()
            );
        }
    }
}

/// Inside a notebook, through the proxy: its code runs unprivileged, on a read-only root, with
/// no network where the machine gives none (EINSORA_AGENT_EGRESS=off); a fork bomb stops at the pids limit and the kernel lives on; a memory hog is
/// killed at the class's memory while the server, the agent and the machine carry on.
#[test]
fn the_sandbox_holds() {
    let (solo, _leftovers) = solo_with(&[
        // Silence for this long would be a timeline note: the agent must keep syncing.
        ("EINSORA_AGENT_HEARTBEAT", "1s"),
        ("EINSORA_AGENT_OFFLINE_AFTER", "15s"),
        ("EINSORA_AGENT_EGRESS", "off"),
    ]);
    let acme = tenant(&solo, "dev@acme");
    let nb = launch(&solo, &acme.token, a_notebook("nb"));
    wait_for(&solo, &acme.session, &nb, "running");
    let container = container_of(&nb);
    let limits = &inspect(&container)["HostConfig"];
    assert_eq!(limits["NanoCpus"], 1_000_000_000_i64, "cpu-1c-2g: one CPU");
    assert_eq!(limits["Memory"], 2 * GIB, "cpu-1c-2g: 2 GiB");
    assert_eq!(limits["MemorySwap"], 2 * GIB, "no swap");
    assert_eq!(limits["PidsLimit"], 256);

    let (host, cookie) = open(&solo, &acme.session, &nb);
    let mut kernel = Kernel::start(&solo, &host, &cookie);
    let outside: Vec<String> = ["1.1.1.1".to_owned(), "10.0.0.1".to_owned()]
        .into_iter()
        .chain(host_addresses())
        .collect();
    let gateway = solo.http.rsplit_once(':').unwrap().1;
    let probe = PROBE
        .replace("OUTSIDE", &serde_json::to_string(&outside).unwrap())
        .replace("GATEWAY", gateway);
    let seen = kernel.json(&probe);
    let (uid, gid) = workload_user();
    assert_eq!(
        (&seen["uid"], &seen["euid"]),
        (&json!(uid), &json!(uid)),
        "{seen}"
    );
    assert_ne!(seen["uid"], 0, "{seen}");
    assert_eq!(seen["gid"], gid, "{seen}");
    for caps in ["CapEff", "CapPrm", "CapBnd"] {
        assert_eq!(seen[caps], "0000000000000000", "{caps}: {seen}");
    }
    assert_eq!(seen["NoNewPrivs"], "1", "{seen}");
    const EROFS: i64 = 30;
    assert_eq!(seen["usr"], EROFS, "/usr is read-only: {seen}");
    assert_eq!(seen["root"], EROFS, "/ is read-only: {seen}");
    assert_eq!(seen["interfaces"], json!(["lo"]), "{seen}");
    const ENETUNREACH: i64 = 101;
    for address in &outside {
        assert_eq!(seen["outside"][address], ENETUNREACH, "{address}: {seen}");
    }
    assert_eq!(seen["udp"], ENETUNREACH, "{seen}");
    // No IPv6 route, or (the engine leaving IPv6 off) no IPv6 address to send from.
    const EADDRNOTAVAIL: i64 = 99;
    assert!(
        [EADDRNOTAVAIL, ENETUNREACH].contains(&seen["ipv6"].as_i64().unwrap_or_default()),
        "no IPv6 either: {seen}"
    );
    const ECONNREFUSED: i64 = 111;
    assert_eq!(
        seen["gateway"], ECONNREFUSED,
        "its loopback is its own, not the host's (where the gateway listens): {seen}"
    );

    let bomb = kernel.json(FORK_BOMB);
    const EAGAIN: i64 = 11;
    assert_eq!(
        bomb["errno"], EAGAIN,
        "fork failed at the pids limit: {bomb}"
    );
    let forked = bomb["forked"].as_i64().unwrap();
    assert!(
        (50..256).contains(&forked),
        "stopped below 256 tasks: {bomb}"
    );
    assert_eq!(
        kernel.run("print(1 + 1)"),
        Ran::Printed("2\n".into()),
        "the kernel lives on"
    );

    let pid = pid_of(&container);
    let kills = oom_kills(pid);
    let ran = kernel.run(MEMORY_HOG);
    assert!(matches!(ran, Ran::Died(_)), "the hog was killed: {ran:?}");
    assert!(oom_kills(pid) > kills, "by the OOM killer");
    let after = inspect(&container);
    assert_eq!(after["State"]["Running"], true, "the server survives");
    assert_eq!(after["State"]["Pid"], pid, "the same server");
    // A fresh kernel runs (the server restarts the dead one).
    assert_eq!(run_cell(&solo, &host, &cookie, "print(6 * 7)"), "42\n");
    assert_eq!(state(&solo, &acme.session, &nb), "running");
    let machines = call(&solo, &acme.session, "GET", "/v1/machines", None).json();
    assert_eq!(machines["machines"][0]["status"], "online", "{machines}");
    // The agent still takes its desired state and reports back.
    let stopped = call(
        &solo,
        &acme.session,
        "POST",
        &format!("/v1/workloads/{nb}/stop"),
        Some(json!({})),
    );
    assert!(stopped.status < 300, "{}", stopped.body);
    wait_for(&solo, &acme.session, &nb, "stopped");
    let steps = timeline(&solo, &acme.session, &nb);
    assert!(
        !steps
            .iter()
            .any(|s| s.contains("offline") || s.starts_with("failed")),
        "the machine kept syncing: {steps:?}"
    );
}

/// Broken and escaping model files, launched as endpoints: refused by the API when their name
/// is a path trick, else by the agent with the model codes' reasons, before any container.
#[test]
fn a_bad_model_is_refused_with_a_clear_reason() {
    let (solo, leftovers) = solo();
    solo.expect_log("its model can't be served");
    let acme = tenant(&solo, "dev@acme");
    let models = leftovers.models();
    let good = std::fs::read(models.join("tiny.gguf")).unwrap();
    std::fs::write(models.join("truncated.gguf"), &good[..good.len() / 2]).unwrap();
    let mut wrong = good.clone();
    wrong[..4].copy_from_slice(b"GGML");
    std::fs::write(models.join("wrong-magic.gguf"), wrong).unwrap();
    std::fs::write(models.join("empty.gguf"), b"").unwrap();
    std::fs::create_dir(models.join("dir.gguf")).unwrap();
    // A valid model, but outside the models directory.
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("elsewhere.gguf"), &good).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("elsewhere.gguf"),
        models.join("escape.gguf"),
    )
    .unwrap();
    std::os::unix::fs::symlink(outside.path(), models.join("out")).unwrap();

    let before = call(&solo, &acme.session, "GET", "/v1/workloads", None).json();
    assert!(before["workloads"].is_array(), "{before}");
    for trick in [
        "../x.gguf",
        "/etc/passwd",
        "a/../tiny.gguf",
        "./tiny.gguf",
        "a//b.gguf",
    ] {
        let body = an_endpoint("trick", trick);
        let refused = call(&solo, &acme.token, "POST", "/v1/workloads", Some(body));
        assert_eq!(refused.status, 400, "{trick}: {}", refused.body);
        let error = &refused.json()["error"];
        assert_eq!(error["code"], "invalid_request", "{trick}: {error}");
        assert!(
            error["message"]
                .as_str()
                .unwrap()
                .contains("endpoint.model"),
            "{error}"
        );
    }
    let after = call(&solo, &acme.session, "GET", "/v1/workloads", None).json();
    assert_eq!(before, after, "nothing was created");

    const INVALID: &str =
        "its model isn't valid (a GGUF file, or a safetensors model directory); nothing was served";
    const REFUSED: &str = "its machine refused its model: not in its models directory, too large, or holding \
         what isn't served (pickled weights, code of its own)";
    const UNAVAILABLE: &str = "its model couldn't be fetched onto its machine";
    let cases = [
        (
            "truncated.gguf",
            INVALID,
            "data runs past the end of the file",
        ),
        (
            "wrong-magic.gguf",
            INVALID,
            "doesn't start with the GGUF magic",
        ),
        ("empty.gguf", INVALID, "the file ends inside"),
        ("dir.gguf", REFUSED, "isn't a regular file"),
        (
            "escape.gguf",
            REFUSED,
            "isn't inside the machine's models directory",
        ),
        (
            "out/elsewhere.gguf",
            REFUSED,
            "isn't inside the machine's models directory",
        ),
        ("missing.gguf", UNAVAILABLE, "doesn't exist"),
    ];
    // One at a time: this machine has room for two such endpoints.
    let mut ids = Vec::new();
    for (n, (model, reason, logged)) in cases.into_iter().enumerate() {
        let id = launch(&solo, &acme.token, an_endpoint(&format!("bad-{n}"), model));
        wait_for(&solo, &acme.session, &id, "failed");
        let steps = timeline(&solo, &acme.session, &id);
        assert_eq!(
            steps.last().unwrap(),
            &format!("failed: {reason}"),
            "{model}: {steps:?}"
        );
        assert!(
            solo.logs()
                .lines()
                .any(|l| l.contains(model) && l.contains(logged)),
            "the operator's log says why {model} was refused: {}",
            refusals(&solo)
        );
        ids.push(id);
    }
    // What the checks below look for is there for a model that is served: its container, the
    // copy it serves, a grant to open it.
    let good = launch(&solo, &acme.token, an_endpoint("good", "tiny.gguf"));
    wait_for(&solo, &acme.session, &good, "running");
    assert_eq!(containers(&good).len(), 1, "the good model's container");
    let served = agent_dir(&solo, "models", &good).join("model.gguf");
    assert!(served.is_file(), "{} is served", served.display());
    let access = format!("/v1/workloads/{good}/access");
    let grant = call(&solo, &acme.token, "POST", &access, Some(json!({})));
    assert_eq!(grant.status, 200, "{}", grant.body);
    for (id, (model, _, _)) in ids.iter().zip(cases) {
        assert!(containers(id).is_empty(), "{model}: no container was made");
        let copied = agent_dir(&solo, "models", id).join("model.gguf");
        assert!(!copied.exists(), "{model}: nothing was kept to serve");
        let access = format!("/v1/workloads/{id}/access");
        let grant = call(&solo, &acme.token, "POST", &access, Some(json!({})));
        assert_eq!(
            grant.status, 409,
            "{model}: nothing to open: {}",
            grant.body
        );
        let error = &grant.json()["error"];
        assert_eq!(error["code"], "conflict", "{model}: {error}");
        assert!(
            error["message"]
                .as_str()
                .is_some_and(|m| m.contains("isn't running (it is failed)")),
            "{model}: {error}"
        );
    }
}

/// The agent's log lines about models it refused.
fn refusals(solo: &Solo) -> String {
    let logs = solo.logs();
    let lines = logs
        .lines()
        .filter(|l| l.contains("its model can't be served"));
    lines.collect::<Vec<_>>().join("\n")
}

/// `einsora setup` and `einsora up` as an unprivileged user in the engine's group: a notebook
/// opens through the proxy, which runs as that user and reaches the workload's socket, which
/// is that user's alone.
#[test]
fn einsora_as_a_non_root_user() {
    assert_eq!(
        uid_of("self"),
        0,
        "this test makes a system user: run it as root"
    );
    let engine = Path::new("/var/run/docker.sock");
    let meta = std::fs::metadata(engine).expect("a Docker engine on /var/run/docker.sock");
    let group = String::from_utf8(
        Command::new("stat")
            .args(["-c", "%G", "/var/run/docker.sock"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
    .trim()
    .to_owned();
    assert!(
        meta.gid() != 0 && meta.mode() & 0o060 == 0o060,
        "the engine's socket must be read-write for a group other than root's (dockerd's \
         `-G docker`, with a `docker` group) for a non-root Einsora to use it: it is {:o}, \
         group {group}",
        meta.mode() & 0o777
    );
    let user = SystemUser::create(&group);
    let mut e = Einsora::new();
    e.run_as = Some((user.uid, user.gid));
    let chowned = Command::new("chown")
        .arg(format!("{}:{}", user.uid, user.gid))
        .arg(e.dir())
        .status()
        .unwrap();
    assert!(chowned.success());
    let dir = e.dir().to_owned();

    let mut solo = Solo::launch(e, Engine::Sqlite, &[("EINSORA_CLUSTER_BACKEND", "agent")]);
    solo.expect_log("the egress fence can't be put up");
    solo.expect_log("can't limit workloads' disks");
    let leftovers = Leftovers::of(&solo);
    let running = processes_on(&dir);
    assert!(
        running.len() > 5,
        "up, its roles and its agent: {running:?}"
    );
    for pid in &running {
        assert_eq!(
            uid_of(&pid.to_string()),
            user.uid,
            "{pid} runs as {}",
            user.name
        );
    }

    let owner = Owner::of(&solo);
    let (status, made) = create(&solo, &owner.session, "nb", "cpu-1c-2g");
    assert_eq!(status, 202, "{made}");
    let id = made["id"].as_str().unwrap().to_owned();
    wait_for(&solo, &owner.session, &id, "running");
    let container = container_of(&id);
    let config = inspect(&container);
    assert_eq!(
        config["Config"]["User"],
        format!("{}:{}", user.uid, user.gid)
    );
    assert_socket_is_private(&solo, &id, "jl.sock", (user.uid, user.gid));

    let (host, cookie) = open(&solo, &owner.session, &id);
    assert_eq!(
        run_cell(&solo, &host, &cookie, "import os; print(os.getuid())"),
        format!("{}\n", user.uid)
    );
    let access = solo.child("access").expect("the access proxy runs");
    assert_eq!(
        uid_of(&access.to_string()),
        user.uid,
        "the proxy runs as {}",
        user.name
    );
    // The count of the user's processes, awaited to reach none below, sees them now.
    assert!(
        user.processes().contains(&access),
        "{}'s processes: {:?}",
        user.name,
        user.processes()
    );
    // Nobody else gets in: not another unprivileged user.
    let socket = agent_dir(&solo, "run", &id).join("jl.sock");
    let other = Command::new("setpriv")
        .args([
            "--reuid",
            "65534",
            "--regid",
            "65534",
            "--clear-groups",
            "--",
        ])
        .args([
            "/usr/bin/python3",
            "-c",
            "import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])",
        ])
        .arg(&socket)
        .output()
        .unwrap();
    assert!(!other.status.success(), "another user reached the socket");
    assert!(
        String::from_utf8_lossy(&other.stderr).contains("PermissionError"),
        "{}",
        String::from_utf8_lossy(&other.stderr)
    );

    let deleted = call(
        &solo,
        &owner.session,
        "DELETE",
        &format!("/v1/workloads/{id}"),
        None,
    );
    assert!(deleted.status < 300, "{}", deleted.body);
    wait_for(&solo, &owner.session, &id, "deleted");
    assert!(containers(&id).is_empty(), "its container is gone");
    solo.stop();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !user.processes().is_empty() {
        assert!(
            Instant::now() < deadline,
            "left running: {:?}",
            user.processes()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(leftovers);
    drop(solo);
    assert!(!dir.exists(), "its data directory is gone");
    let name = user.name.clone();
    drop(user);
    let gone = Command::new("id").arg(&name).output().unwrap();
    assert!(!gone.status.success(), "{name} is deleted");
}
