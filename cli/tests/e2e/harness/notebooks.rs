//! Solo on the real Docker engine, and notebooks opened through the access proxy as a browser
//! would: cells run, files written, what a test leaves behind removed.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::harness::solo::Solo;
use einsora_testkit::http::{exchange, request};

use crate::harness::wire::WebSocket;
use crate::harness::world::{Credential, Tenant, call};

/// What a test leaves on the shared engine: its machine's containers and the mounts its agent
/// made for them, removed when dropped (workloads outlive their agent by design).
pub struct Leftovers {
    machine_id: PathBuf,
    models: Option<tempfile::TempDir>,
    wheels: Option<tempfile::TempDir>,
    /// A Mac's run directories, outside the agent's ([`solo_mac`]).
    mac_runs: Option<tempfile::TempDir>,
}

impl Leftovers {
    /// The containers of the machine `solo`'s agent enrols.
    pub fn of(solo: &Solo) -> Leftovers {
        Leftovers {
            machine_id: solo.e.dir().join("agent").join("machine-id"),
            models: None,
            wheels: None,
            mac_runs: None,
        }
    }

    /// The native workloads of a joined machine's agent (its state directory `agent`): they
    /// outlive their agent by design, so a test that ran some ends them here, after its agent.
    pub fn of_agent(agent: &Path) -> Leftovers {
        Leftovers {
            machine_id: agent.join("machine-id"),
            models: None,
            wheels: None,
            mac_runs: None,
        }
    }

    /// The models directory [`solo`] made.
    pub fn models(&self) -> &Path {
        self.models.as_ref().expect("a models directory").path()
    }
}

impl Drop for Leftovers {
    fn drop(&mut self) {
        let Ok(machine) = std::fs::read_to_string(&self.machine_id) else {
            return;
        };
        einsora_testkit::docker::remove_machines(machine.trim());
        if let Some(agent) = self.machine_id.parent() {
            end_native_workloads(agent);
            // Their disks and run directories, which the agent mounted (when root).
            crate::harness::mounts::unmount_all_under(agent);
        }
        if let Some(runs) = &self.mac_runs {
            crate::harness::mounts::unmount_all_under(runs.path());
        }
    }
}

/// The linux-native driver's workloads the agent under `agent` started (they outlive it by
/// design), by the process groups its supervisor recorded, and their network namespaces and
/// cgroups.
fn end_native_workloads(agent: &Path) {
    let records = ["native", "macos"]
        .iter()
        .filter_map(|driver| std::fs::read_dir(agent.join(driver).join("processes")).ok())
        .flatten();
    for record in records.flatten() {
        let name = record.file_name();
        if let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".json")) {
            let netns = einsora_agent::drivers::native::netns_name(id);
            let _ = Command::new("ip")
                .args(["netns", "delete", &netns])
                .stderr(std::process::Stdio::null())
                .status();
        }
        let Ok(text) = std::fs::read_to_string(record.path()) else {
            continue;
        };
        let group = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v["group"].as_u64());
        if let Some(group) = group.filter(|g| *g > 1) {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{group}")])
                .status();
        }
        if let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".json")) {
            remove_cgroup(id);
        }
    }
}

/// The cgroup a root agent made for workload `id` (v2's, or v1's per controller): whatever
/// is left in it killed, then removed once the kernel has taken its processes out.
fn remove_cgroup(id: &str) {
    let root = Path::new("/sys/fs/cgroup");
    for hierarchy in ["", "memory", "cpu", "pids"] {
        let dir = root.join(hierarchy).join("einsora").join(id);
        if !dir.is_dir() {
            continue;
        }
        let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
        for pid in procs.lines() {
            let _ = Command::new("kill")
                .args(["-KILL", pid])
                .stderr(std::process::Stdio::null())
                .status();
        }
        for _ in 0..100 {
            if std::fs::remove_dir(&dir).is_ok() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

/// [`solo_with`] whose machine has the linux-native driver and not docker: its environments
/// built from the wheels the images were (EINSORA_TEST_WHEELS), offline.
pub fn solo_native(extra: &[(&str, &str)]) -> (Solo, Leftovers) {
    let wheels = wheelhouse(&["notebook", "llamacpp"]);
    let wheels_dir = wheels.path().to_str().unwrap().to_owned();
    let mut env = vec![
        ("EINSORA_AGENT_DOCKER", "false"),
        ("EINSORA_AGENT_NATIVE", "on"),
        ("EINSORA_NATIVE_WHEELS", wheels_dir.as_str()),
    ];
    env.extend_from_slice(extra);
    env.push(("EINSORA_AUTH_MODE", "dev"));
    // No engine needed: this machine's agent has no docker driver.
    let (solo, mut leftovers) = solo_on_this_machine(&env);
    leftovers.wheels = Some(wheels);
    (solo, leftovers)
}

/// [`solo_with`] whose machine has neither the docker nor the linux-native driver: only what
/// `extra` turns on (the libvirt driver's tests).
pub fn solo_bare(extra: &[(&str, &str)]) -> (Solo, Leftovers) {
    let mut env = vec![
        ("EINSORA_AGENT_DOCKER", "false"),
        ("EINSORA_AGENT_NATIVE", "off"),
    ];
    env.extend_from_slice(extra);
    env.push(("EINSORA_AUTH_MODE", "dev"));
    solo_on_this_machine(&env)
}

/// The wheels of `names` (the images', EINSORA_TEST_WHEELS), in one directory.
pub fn wheelhouse(names: &[&str]) -> tempfile::TempDir {
    let built = std::env::var("EINSORA_TEST_WHEELS")
        .expect("EINSORA_TEST_WHEELS names the images' wheel directories (./scripts/test sets it)");
    let wheels = tempfile::tempdir().unwrap();
    for name in names {
        let dir = Path::new(&built).join(name);
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e} (images/build makes it)", dir.display()));
        for wheel in entries.map(Result::unwrap) {
            // A wheel two images pin (the same name is the same version and build) once.
            let link = wheels.path().join(wheel.file_name());
            if !link.exists() {
                std::os::unix::fs::symlink(wheel.path(), link).unwrap();
            }
        }
    }
    wheels
}

/// [`solo_with`] whose machine is a Mac played by stand-ins (`crates/standins`): its inventory
/// from a recorded Mac (`STANDIN_MAC`, default an M2 Max with 32 GB), the macos-native driver
/// with the stand-in `sandbox-exec`, its environments built by a real uv (EINSORA_TEST_UV)
/// from the notebook and llama.cpp images' wheels and MLX's Linux ones (EINSORA_TEST_WHEELS),
/// offline; its models directory holds `tiny-mlx` (EINSORA_TEST_MLX_MODEL) too.
pub fn solo_mac(extra: &[(&str, &str)]) -> (Solo, Leftovers) {
    let uv = std::env::var("EINSORA_TEST_UV")
        .expect("EINSORA_TEST_UV names uv (./scripts/test installs it into target/pytools)");
    // The MLX server's Linux environment too: the stand-in runs the real one, on the CPU.
    let wheels = wheelhouse(&["notebook", "llamacpp", "mlx-linux"]);
    let bins = std::env::current_exe().unwrap();
    let bins = bins.parent().and_then(Path::parent).unwrap();
    let standin = |name: &str| {
        let path = bins.join(name);
        assert!(
            path.is_file(),
            "{}: no stand-in (cargo build -p einsora-standins)",
            path.display()
        );
        path.to_str().unwrap().to_owned()
    };
    let (sandbox_exec, sysctl) = (standin("sandbox-exec"), standin("sysctl"));
    // Short, as a Mac's socket paths must be: /tmp/.tmpXXXXXX/<26 characters>.
    let runs = tempfile::tempdir().unwrap();
    let runs_dir = runs.path().to_str().unwrap().to_owned();
    let mut env = vec![
        ("EINSORA_AGENT_DOCKER", "false"),
        ("EINSORA_AGENT_NATIVE", "off"),
        ("EINSORA_MACOS_STANDIN", "on"),
        ("EINSORA_MACOS_SANDBOX_EXEC", sandbox_exec.as_str()),
        ("EINSORA_MACOS_SYSCTL", sysctl.as_str()),
        ("EINSORA_MACOS_UV", uv.as_str()),
        ("EINSORA_MACOS_PYTHON", "/usr/bin/python3"),
        ("EINSORA_MACOS_WHEELS", wheels.path().to_str().unwrap()),
        ("EINSORA_MACOS_RUN_DIR", runs_dir.as_str()),
    ];
    env.extend_from_slice(extra);
    env.push(("EINSORA_AUTH_MODE", "dev"));
    let (solo, mut leftovers) = solo_on_this_machine(&env);
    // A tiny MLX model directory beside the GGUF one (EINSORA_TEST_MLX_MODEL).
    let mlx = std::env::var("EINSORA_TEST_MLX_MODEL").expect(
        "EINSORA_TEST_MLX_MODEL names a tiny MLX model directory (./scripts/test makes one)",
    );
    let into = leftovers.models().join("tiny-mlx");
    std::fs::create_dir_all(&into).unwrap();
    for file in std::fs::read_dir(&mlx).unwrap().map(Result::unwrap) {
        std::fs::copy(file.path(), into.join(file.file_name())).unwrap();
    }
    leftovers.mac_runs = Some(runs);
    leftovers.wheels = Some(wheels);
    (solo, leftovers)
}

/// `einsora up` in dev auth mode on the agent backend, its machine owned by `acme`, with a
/// models directory holding `tiny.gguf` (and `not-a-model.gguf`, which isn't one); and what to
/// clean up after it.
pub fn solo() -> (Solo, Leftovers) {
    solo_with(&[])
}

/// [`solo`] with `extra` settings.
pub fn solo_with(extra: &[(&str, &str)]) -> (Solo, Leftovers) {
    let mut env = vec![("EINSORA_AUTH_MODE", "dev")];
    env.extend_from_slice(extra);
    solo_on_docker(&env)
}

/// [`solo_with`] in local auth mode, as a fresh installation runs: one tenant, its owner
/// ([`crate::harness::solo::OWNER_EMAIL`]) made by `einsora setup`, owning this machine.
pub fn solo_as_owner(extra: &[(&str, &str)]) -> (Solo, Leftovers) {
    solo_on_docker(extra)
}

fn solo_on_docker(extra: &[(&str, &str)]) -> (Solo, Leftovers) {
    let answers = Command::new("docker").arg("info").output();
    assert!(
        answers.is_ok_and(|o| o.status.success()),
        "these tests need a Docker engine and the local images: ./scripts/test starts one and \
         builds them"
    );
    solo_on_this_machine(extra)
}

/// `einsora up` on the agent backend, this machine enrolled with its drivers, its models
/// directory and the tests' catalog.
fn solo_on_this_machine(extra: &[(&str, &str)]) -> (Solo, Leftovers) {
    let model = std::env::var("EINSORA_TEST_MODEL")
        .expect("EINSORA_TEST_MODEL names a small GGUF model (./scripts/test makes one)");
    let models = tempfile::tempdir().unwrap();
    std::fs::copy(&model, models.path().join("tiny.gguf")).unwrap();
    // Never offered as a model: the dashboard's test checks.
    std::fs::write(models.path().join("not-a-model.gguf"), "GGUF, it says").unwrap();
    let catalog = catalog_with_small_disks(models.path());
    let mut env = vec![
        ("EINSORA_CLUSTER_BACKEND", "agent"),
        ("EINSORA_MODELS_DIR", models.path().to_str().unwrap()),
        ("EINSORA_CATALOG", catalog.as_str()),
    ];
    env.extend_from_slice(extra);
    let solo = Solo::start(&env);
    let mut leftovers = Leftovers::of(&solo);
    leftovers.models = Some(models);
    (solo, leftovers)
}

// Each notebook sets its whole disk aside when it starts, and tests run several at once on one
// machine.
pub use einsora_testkit::catalog::with_small_disks as catalog_with_small_disks;

pub fn token(t: &Tenant) -> &str {
    match &t.token {
        Credential::Token(token) => token,
        _ => unreachable!("a tenant's token"),
    }
}

/// The access proxy's port, as links name it.
pub fn port(solo: &Solo) -> &str {
    solo.access.rsplit_once(':').unwrap().1
}

/// An endpoint's base URL, as `who` is granted it: the proxy's `Host`, and the path prefix its
/// routes (`/chat/completions`, …) go under.
pub fn endpoint_base(solo: &Solo, who: &Credential, id: &str) -> (String, String) {
    let grant = crate::harness::world::call(
        solo,
        who,
        "POST",
        &format!("/v1/workloads/{id}/access"),
        Some(serde_json::json!({})),
    );
    let base = grant.json()["endpoint"]["base_url"]
        .as_str()
        .unwrap_or_else(|| panic!("a base URL: {}", grant.body))
        .to_owned();
    let host = format!("localhost:{}", port(solo));
    let prefix = base.split_once(&host).unwrap().1.to_owned();
    (host, prefix)
}

/// Opens the notebook as the dashboard's link does: its host, and the session cookie the
/// ticket was traded for. Until its machine says where it listens (just after a restart), the
/// proxy answers 503, and each try takes a new link.
pub fn open(solo: &Solo, who: &Credential, id: &str) -> (String, String) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let path = format!("/v1/workloads/{id}/access");
        let grant = call(solo, who, "POST", &path, Some(json!({})));
        assert_eq!(grant.status, 200, "{}", grant.body);
        let link = grant.json()["notebook"]["link"]
            .as_str()
            .unwrap()
            .to_owned();
        let host = format!("w-{id}.localhost:{}", port(solo));
        let target = link
            .split_once(&host)
            .expect("the link names the workload's host")
            .1;
        let opened = exchange(&solo.access, &request("GET", target, &host, &[], ""));
        if opened.status == 200 {
            let cookie = opened
                .header("set-cookie")
                .and_then(|c| c.split(';').next())
                .expect("a session cookie")
                .to_owned();
            return (host, cookie);
        }
        assert_eq!(opened.status, 503, "{}", opened.body);
        assert!(
            std::time::Instant::now() < deadline,
            "never opened: {}",
            opened.body
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// A request to the notebook through the proxy, as the browser sends it.
pub fn notebook(
    solo: &Solo,
    host: &str,
    cookie: &str,
    method: &str,
    path: &str,
    body: &str,
) -> Value {
    let origin = format!("http://{host}");
    let headers = [
        ("Cookie", cookie),
        ("Origin", origin.as_str()),
        ("Content-Type", "application/json"),
    ];
    let answer = exchange(&solo.access, &request(method, path, host, &headers, body));
    assert!(
        (200..300).contains(&answer.status),
        "{method} {path}: {} {}",
        answer.status,
        answer.body
    );
    serde_json::from_str(&answer.body).unwrap_or(Value::Null)
}

/// Runs `code` on a new kernel over its WebSocket, through the proxy; what it printed on
/// stdout (the first stream message naming it). What the cell writes to fd 2 arrives as a
/// stderr stream message in no fixed order with the stdout one, so it is never the answer.
pub fn run_cell(solo: &Solo, host: &str, cookie: &str, code: &str) -> String {
    let mut ws = kernel_channels(solo, host, cookie);
    let execute = json!({
        "header": { "msg_id": "cell-1", "username": "test", "session": "s-1",
                    "msg_type": "execute_request", "version": "5.3", "date": "" },
        "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
        "content": { "code": code, "silent": false, "store_history": false,
                     "user_expressions": {}, "allow_stdin": false, "stop_on_error": true },
    });
    ws.send(&execute.to_string());
    loop {
        let message: Value = serde_json::from_str(&ws.receive()).unwrap();
        let ours = message["parent_header"]["msg_id"] == "cell-1";
        match message["header"]["msg_type"].as_str() {
            Some("stream") if ours && message["content"]["name"] == "stdout" => {
                return message["content"]["text"].as_str().unwrap().into();
            }
            Some("error") if ours => panic!("the cell failed: {message}"),
            _ => {}
        }
    }
}

/// A new kernel's channels, open through the proxy with the session `cookie`.
pub fn kernel_channels(solo: &Solo, host: &str, cookie: &str) -> WebSocket {
    let kernel = notebook(solo, host, cookie, "POST", "/api/kernels", "{}");
    let path = format!("/api/kernels/{}/channels", kernel["id"].as_str().unwrap());
    let origin = format!("http://{host}");
    let headers = [("Cookie", cookie), ("Origin", origin.as_str())];
    WebSocket::connect(&solo.access, host, &path, &headers).unwrap()
}

pub use einsora_testkit::docker::containers_of as containers;

pub fn data_dir(solo: &Solo, id: &str) -> PathBuf {
    solo.e.dir().join("agent").join("data").join(id)
}

/// What a machine that lost a stopped notebook's disk has left: no image, nothing mounted, no
/// data directory.
pub fn lose_its_disk(solo: &Solo, id: &str) {
    let data = data_dir(solo, id);
    crate::harness::mounts::unmount_all_under(&data);
    let image = solo
        .e
        .dir()
        .join("agent")
        .join("disks")
        .join(format!("{id}.img"));
    match std::fs::remove_file(&image) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => panic!("{}: {e}", image.display()),
        _ => {}
    }
    std::fs::remove_dir_all(&data).unwrap();
}
