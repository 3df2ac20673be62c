use super::*;
use crate::drivers::local::contract::ModelServer;

fn notebook(user: Option<(u32, u32)>) -> Sandbox {
    Sandbox {
        bwrap: "/usr/bin/bwrap".into(),
        serves: Serves::Notebook {
            data: "/state/data/w1".into(),
        },
        cpus: 2,
        interpreter: Interpreter {
            python: "/opt/venv/bin/python3".into(),
            binds: vec![(
                "/state/native/envs/jupyterlab-cpu-ab".into(),
                "/opt/venv".into(),
            )],
        },
        launcher: "start.py",
        launchers: "/state/native/launchers".into(),
        run_dir: "/state/run/w1".into(),
        token_file: "/state/secrets/w1/token".into(),
        gpus: Vec::new(),
        gpu_nodes: Vec::new(),
        user,
        netns: None,
        cgroup: Vec::new(),
    }
}

/// The bubblewrap part of the command line: what follows the bwrap program.
fn bwrap_args(c: &Command) -> Vec<String> {
    let at = c.args.iter().position(|a| a == "/usr/bin/bwrap").unwrap();
    c.args[at + 1..].to_vec()
}

fn has(args: &[String], seq: &[&str]) -> bool {
    args.windows(seq.len())
        .any(|w| w.iter().zip(seq).all(|(a, b)| a == b))
}

/// As root: its places are staged, it drops to the workload's user, and bubblewrap sees none
/// of the agent's paths, only the staging directory's.
#[test]
fn a_root_agent_stages_the_places_and_drops_to_the_workload_user() {
    let c = notebook(Some((61_000, 61_000))).command();
    assert_eq!(c.program, PathBuf::from("/usr/bin/setsid"));
    assert_eq!(
        c.args[..5],
        [
            "/usr/bin/unshare",
            "--mount",
            "--propagation",
            "slave",
            "--"
        ]
    );
    assert!(c.args.iter().any(|a| a.contains("setpriv --reuid=")));
    let at = c.args.iter().position(|a| a == "stage").unwrap();
    assert_eq!(c.args[at + 1..at + 3], ["61000", "61000"]);
    assert_eq!(c.args[at + 3], "/state/run/w1", "its run directory first");
    let bwrap = bwrap_args(&c);
    assert!(
        !bwrap.iter().any(|a| a.starts_with("/state")),
        "only staged paths: {bwrap:?}"
    );
    assert!(
        has(&bwrap, &["--bind", "/run/einsora-stage/0", "/run/einsora"]),
        "{bwrap:?}"
    );
    assert!(has(
        &bwrap,
        &[
            "--ro-bind",
            "/run/einsora-stage/1",
            "/run/secrets/einsora/token"
        ]
    ));
    assert!(has(&bwrap, &["--bind", "/run/einsora-stage/2", "/work"]));
    assert!(has(
        &bwrap,
        &["--ro-bind", "/run/einsora-stage/3", "/opt/venv"]
    ));
    assert!(has(
        &bwrap,
        &["--ro-bind", "/run/einsora-stage/4", "/opt/einsora"]
    ));
    assert!(has(
        &bwrap,
        &[
            "--chdir",
            "/work",
            "--",
            "/opt/venv/bin/python3",
            "/opt/einsora/start.py"
        ]
    ));
}

/// Every namespace its own (its network only loopback), no capabilities, nothing of the
/// agent's environment, and no GPU for a CPU class.
#[test]
fn the_sandbox_shares_nothing_and_a_cpu_class_gets_no_gpu() {
    let c = notebook(None).command();
    assert_eq!(c.args[0], "/usr/bin/bwrap", "not root: no staging");
    let bwrap = bwrap_args(&c);
    assert!(has(&bwrap, &["--unshare-all"]));
    assert!(has(&bwrap, &["--remount-ro", "/"]), "its root is read-only");
    assert!(has(&bwrap, &["--cap-drop", "ALL"]));
    assert!(!bwrap.iter().any(|a| a.starts_with("--share")), "{bwrap:?}");
    assert!(has(&bwrap, &["--bind", "/state/run/w1", "/run/einsora"]));
    assert!(
        !bwrap.iter().any(|a| a.contains("nvidia")),
        "no GPU device: {bwrap:?}"
    );
    let names: Vec<&str> = c.env.iter().map(|(k, _)| k.as_str()).collect();
    assert!(!names.contains(&"CUDA_VISIBLE_DEVICES"), "{names:?}");
    assert!(names.contains(&"EINSORA_TOKEN_FILE"), "{names:?}");
    assert!(
        c.env.iter().all(|(_, v)| !v.contains("/state/secrets")),
        "only the token's path inside: {:?}",
        c.env
    );
}

/// A GPU workload gets exactly its GPUs' device nodes and names them by UUID.
#[test]
fn a_gpu_workload_sees_only_its_reserved_gpus() {
    let mut s = notebook(None);
    s.gpus = vec!["GPU-aaaa".into()];
    s.gpu_nodes = vec!["/dev/nvidiactl".into(), "/dev/nvidia3".into()];
    let c = s.command();
    let bwrap = bwrap_args(&c);
    assert!(has(
        &bwrap,
        &["--dev-bind-try", "/dev/nvidia3", "/dev/nvidia3"]
    ));
    assert!(!bwrap.iter().any(|a| a == "/dev/nvidia0"), "{bwrap:?}");
    assert!(
        c.env
            .contains(&("CUDA_VISIBLE_DEVICES".into(), "GPU-aaaa".into()))
    );
    assert_ne!(s.fingerprint(), notebook(None).fingerprint());
    assert_eq!(notebook(None).fingerprint(), notebook(None).fingerprint());
}

/// An endpoint's model is read-only at the contract's path, with the server's arguments.
#[test]
fn an_endpoint_gets_its_model_read_only_and_no_notebook_files() {
    let mut s = notebook(None);
    s.serves = Serves::Endpoint {
        model: "/state/models/w1/model.gguf".into(),
        alias: "tiny".into(),
        server: ModelServer::LlamaCpp,
        slots: 3,
    };
    s.launcher = "llamacpp-serve.py";
    s.token_file = "/state/secrets/w1/api-key".into();
    let c = s.command();
    let bwrap = bwrap_args(&c);
    assert!(has(
        &bwrap,
        &[
            "--ro-bind",
            "/state/models/w1/model.gguf",
            "/model/model.gguf"
        ]
    ));
    assert!(!bwrap.iter().any(|a| a == "/work"), "{bwrap:?}");
    assert!(has(
        &bwrap,
        &["/opt/einsora/llamacpp-serve.py", "--alias", "tiny"]
    ));
    // Its slots: requests at once, each with a request's share of the context.
    assert!(
        has(&bwrap, &["--parallel", "3", "--ctx-size=3072"]),
        "{bwrap:?}"
    );
}

/// With egress, root joins the workload's network namespace first and bubblewrap keeps it (and
/// gives it a resolver); that is part of its fingerprint, so a workload whose egress is lifted
/// runs under another sandbox.
#[test]
fn egress_joins_the_agents_namespace_before_anything_else_and_changes_the_fingerprint() {
    let mut egress = notebook(Some((61_000, 61_000)));
    egress.netns = Some("/run/netns/einsora-0123456789abcdef".into());
    let c = egress.command();
    assert_eq!(
        c.args[..3],
        [
            "/usr/bin/nsenter",
            "--net=/run/netns/einsora-0123456789abcdef",
            "--"
        ]
    );
    assert_eq!(c.args[3], "/usr/bin/unshare", "then staged as without");
    let bwrap = bwrap_args(&c);
    assert_eq!(bwrap[..2], ["--unshare-all", "--share-net"]);
    assert!(has(
        &bwrap,
        &["--ro-bind-try", "/etc/resolv.conf", "/etc/resolv.conf"]
    ));
    let loopback = notebook(Some((61_000, 61_000)));
    let plain = bwrap_args(&loopback.command());
    assert!(
        !plain
            .iter()
            .any(|a| a == "--share-net" || a.contains("resolv")),
        "{plain:?}"
    );
    assert!(
        !loopback
            .command()
            .args
            .iter()
            .any(|a| a.contains("nsenter"))
    );
    assert_ne!(egress.fingerprint(), loopback.fingerprint());
}

/// With a cgroup, the agent's own shell joins it before anything of the workload's runs (then
/// `setsid` and the rest, as without); the cgroup is part of its fingerprint.
#[test]
fn a_cgroup_is_joined_first_and_changes_the_fingerprint() {
    let mut limited = notebook(Some((61_000, 61_000)));
    limited.cgroup = vec![
        "/sys/fs/cgroup/memory/einsora/w1/cgroup.procs".into(),
        "/sys/fs/cgroup/pids/einsora/w1/cgroup.procs".into(),
    ];
    let c = limited.command();
    assert_eq!(c.program, PathBuf::from("/bin/sh"));
    assert_eq!(c.args[0], "-ec");
    assert_eq!(
        c.args[2..6],
        [
            "join",
            "/sys/fs/cgroup/memory/einsora/w1/cgroup.procs",
            "/sys/fs/cgroup/pids/einsora/w1/cgroup.procs",
            "--",
        ]
    );
    assert_eq!(c.args[6], "/usr/bin/setsid");
    let unlimited = notebook(Some((61_000, 61_000)));
    assert_eq!(c.args[7..], unlimited.command().args[..], "then as without");
    assert_ne!(limited.fingerprint(), unlimited.fingerprint());
}

/// The joining script, run for real by `sh`: each named file gets the shell's PID, and the
/// program after `--` runs as that same process with its arguments.
#[test]
fn the_joining_script_writes_its_pid_then_becomes_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let out = std::process::Command::new("/bin/sh")
        .args(["-ec", JOIN, "join"])
        .arg(&a)
        .arg(&b)
        .args(["--", "/bin/sh", "-c", "echo $$ \"$0\"", "second word"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8(out.stdout).unwrap();
    let pid = std::fs::read_to_string(&a).unwrap();
    assert_eq!(std::fs::read_to_string(&b).unwrap(), pid);
    assert_eq!(
        said,
        format!("{} second word\n", pid.trim()),
        "the same process"
    );
}
