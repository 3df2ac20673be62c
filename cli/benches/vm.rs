//! A VM from create to SSH: `einsora up` (release build, SQLite, dev auth, the agent backend
//! with the libvirt driver only, qemu's emulation allowed: EINSORA_VM_ACCEL=tcg) on a fresh data
//! directory; once its machine offers the libvirt driver, for each image (the test guest `tiny`, from `vm-tiny`, then the full
//! `debian-12`, from `vm-debian`), BENCH_RUNS times (default 10), one after another: create a
//! VM (class cpu-1c-2g) with an SSH key through the API, and from then on poll every 50 ms until
//! its domain runs (`virsh list`), until the API says `running` (the guest said it is ready),
//! and until `einsora ssh <id> -- true` succeeds. Each VM is deleted (its domain and disk gone)
//! before the next.
//!
//! Where the boot goes, from the same run: the guest's console says how long its kernel had
//! been up when its own start began: for Debian, cloud-init's first stage (`Up N seconds`); for
//! the test guest, its init's end (`einsora: booted, kernel up N s`).
//!
//! `cargo bench -p einsora --bench vm`. Needs libvirt and the images:
//! `images/libvirtd start && images/build vm-tiny vm-debian` (EINSORA_VM_IMAGES: the images
//! cache, default target/images-cache).

// A test harness: a failed unwrap is a failed test, and it reads its own environment.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use hyper::Method;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::json;

use einsora_testkit::bench::{Report, Table, median, setting};
use support::{Api, Http};

const POLL: Duration = Duration::from_millis(50);
const LIMIT: Duration = Duration::from_secs(300);

/// Seconds from the create request to each step, for one VM; and the guest's own account.
#[derive(Debug, Default, Clone)]
struct Steps {
    domain_running: f64,
    api_running: f64,
    ssh_answers: f64,
    /// The kernel's uptime at the guest's own mark, as its console says.
    kernel_up: f64,
}

/// An image the bench boots: its catalog name, its directory in the images cache, and the
/// guest's console line that marks its own start, with the kernel's uptime in seconds after
/// `before` on it.
struct Guest {
    image: &'static str,
    dir: &'static str,
    mark: &'static str,
    before: &'static str,
    column: &'static str,
}

const GUESTS: [Guest; 2] = [
    Guest {
        image: "tiny",
        dir: "vm-tiny",
        mark: "einsora: booted",
        before: "kernel up ",
        column: "kernel up when its init ended",
    },
    Guest {
        image: "debian-12",
        dir: "vm-debian",
        mark: "running 'init-local'",
        before: " Up ",
        column: "kernel up when cloud-init started",
    },
];

fn main() -> anyhow::Result<()> {
    let runs: usize = setting("BENCH_RUNS", 10)?;
    let images = std::env::var("EINSORA_VM_IMAGES").unwrap_or_else(|_| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../target/images-cache")
            .display()
            .to_string()
    });
    for guest in &GUESTS {
        anyhow::ensure!(
            Path::new(&images).join(guest.dir).join("inputs").is_file(),
            "needs the VM image: images/build {} (or EINSORA_VM_IMAGES)",
            guest.dir
        );
    }
    let mut report = Report::start(
        "vm",
        "VM create to SSH",
        "cargo bench -p einsora --bench vm",
    );
    let vms = tempfile::tempdir()?;
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(vms.path(), std::fs::Permissions::from_mode(0o711))?;
    }
    let keys = tempfile::tempdir()?;
    let key = keys.path().join("key");
    let made = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&key)
        .status()?;
    anyhow::ensure!(made.success(), "ssh-keygen failed");
    let public = std::fs::read_to_string(key.with_extension("pub"))?;
    let vm_dir = vms.path().display().to_string();
    let up = support::up::Up::start(&[
        ("EINSORA_AGENT_DOCKER", "false"),
        ("EINSORA_AGENT_NATIVE", "off"),
        ("EINSORA_AGENT_LIBVIRT", "true"),
        ("EINSORA_VM_ACCEL", "tcg"),
        ("EINSORA_VM_IMAGES", &images),
        ("EINSORA_VM_DIR", &vm_dir),
    ])?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let all = rt.block_on(async {
        let http: Http = Client::builder(TokioExecutor::new()).build_http();
        let base = format!("http://{}", up.http_addr);
        let token = support::token(&http, &base, &up.password).await?;
        let api = Api { http, base, token };
        // From when the machine offers VMs: its agent first asks whether KVM runs guests here
        // (up to 10 s), which is its start's cost, not a VM's.
        let offered = Instant::now();
        loop {
            let (_, m) = api.send(Method::GET, "/v1/machines", None).await?;
            if m["machines"][0]["drivers"]
                .as_array()
                .is_some_and(|d| d.iter().any(|d| d == "libvirt"))
            {
                break;
            }
            anyhow::ensure!(
                offered.elapsed() < LIMIT,
                "the machine never offered libvirt: {m}"
            );
            tokio::time::sleep(POLL).await;
        }
        let mut all = Vec::new();
        for guest in &GUESTS {
            let mut steps = Vec::new();
            for run in 0..runs {
                let s = once(&api, &up, vms.path(), &key, public.trim(), guest, run).await?;
                eprintln!(
                    "{} run {}: SSH at {:.2} s",
                    guest.image,
                    run + 1,
                    s.ssh_answers
                );
                steps.push(s);
            }
            all.push(steps);
        }
        anyhow::Ok(all)
    })?;
    for (guest, steps) in GUESTS.iter().zip(&all) {
        report.say(format!(
            "`{}`: seconds from the create request, {runs} VMs one after another (the last \
             column is the guest's own account of its kernel's uptime):",
            guest.image
        ));
        report.table(&table_of(guest, steps));
    }
    report.finish()?;
    Ok(())
}

fn table_of(guest: &Guest, all: &[Steps]) -> Table {
    let mut table = Table::new(
        &[
            "run",
            "domain running",
            "API says running",
            "SSH answers",
            guest.column,
        ],
        1,
    );
    let cells = |s: &Steps| [s.domain_running, s.api_running, s.ssh_answers, s.kernel_up];
    for (i, s) in all.iter().enumerate() {
        let mut row = vec![(i + 1).to_string()];
        row.extend(cells(s).iter().map(|v| format!("{v:.2}")));
        table.row(row);
    }
    for (name, pick) in [("**median**", 0usize), ("min", 1), ("max", 2)] {
        let mut row = vec![name.to_owned()];
        for c in 0..4 {
            let mut v: Vec<f64> = all.iter().map(|s| cells(s)[c]).collect();
            v.sort_by(f64::total_cmp);
            let value = match pick {
                0 => median(v.iter().copied()),
                1 => v.first().copied().unwrap_or(f64::NAN),
                _ => v.last().copied().unwrap_or(f64::NAN),
            };
            row.push(format!("{value:.2}"));
        }
        table.row(row);
    }
    table
}

async fn once(
    api: &Api,
    up: &support::up::Up,
    vms: &Path,
    key: &Path,
    public: &str,
    guest: &Guest,
    run: usize,
) -> anyhow::Result<Steps> {
    let started = Instant::now();
    let body = json!({
        "kind": "vm", "name": format!("vm{run}"), "gpu_class": "cpu-1c-2g", "image": guest.image,
        "vm": { "ssh_authorized_keys": [public] },
    });
    let (status, answer) = api.send(Method::POST, "/v1/workloads", Some(body)).await?;
    anyhow::ensure!(status == 202, "create answered {status}: {answer}");
    let id = answer["id"].as_str().unwrap_or_default().to_owned();
    let domain = format!("einsora-{id}");
    let mut steps = Steps::default();
    loop {
        let listed = Command::new("virsh")
            .args(["--quiet", "--connect", "qemu:///system", "list", "--name"])
            .output()?;
        if String::from_utf8_lossy(&listed.stdout)
            .lines()
            .any(|l| l.trim() == domain)
        {
            steps.domain_running = started.elapsed().as_secs_f64();
            break;
        }
        anyhow::ensure!(started.elapsed() < LIMIT, "{id}'s domain never ran");
        tokio::time::sleep(POLL).await;
    }
    api.wait_running(&id, POLL, started + LIMIT).await?;
    steps.api_running = started.elapsed().as_secs_f64();
    loop {
        let ssh = Command::new(support::EINSORA)
            .args(["ssh", &id, "-i"])
            .arg(key)
            .args(["--", "true"])
            .env("EINSORA_SERVER", format!("http://{}", up.http_addr))
            .env("EINSORA_TOKEN", &api.token)
            .env("EINSORA_CLI_CONFIG", up.dir.path().join("cli.json"))
            .output()?;
        if ssh.status.success() {
            break;
        }
        anyhow::ensure!(
            started.elapsed() < LIMIT,
            "ssh never answered: {}",
            String::from_utf8_lossy(&ssh.stderr)
        );
        tokio::time::sleep(POLL).await;
    }
    steps.ssh_answers = started.elapsed().as_secs_f64();
    let console = std::fs::read_to_string(vms.join(&id).join("output.log")).unwrap_or_default();
    steps.kernel_up = console
        .lines()
        .find(|l| l.contains(guest.mark))
        .and_then(|l| l.split(guest.before).nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(f64::NAN);

    let (status, _) = api
        .send(Method::DELETE, &format!("/v1/workloads/{id}"), None)
        .await?;
    anyhow::ensure!(status < 300, "delete answered {status}");
    loop {
        let path = format!("/v1/workloads/{id}?include_deleted=true");
        let (_, w) = api.send(Method::GET, &path, None).await?;
        if w["state"] == "deleted" && !vms.join(&id).exists() {
            break;
        }
        anyhow::ensure!(started.elapsed() < LIMIT * 2, "{id} never went");
        tokio::time::sleep(POLL).await;
    }
    Ok(steps)
}
