//! The libvirt driver with real guests: `einsora up` whose agent has the libvirt driver and no
//! other, running VMs under qemu's emulation (this machine's KVM doesn't run guests:
//! EINSORA_VM_ACCEL=tcg), through the libvirt `images/libvirtd` starts (./scripts/test does):
//! the Debian image with cloud-init (`images/build vm-debian`) once, the small test guest
//! (`images/build vm-tiny`, catalog image `tiny`) where a guest's contents don't matter; both
//! in EINSORA_TEST_VM_IMAGES. SSH goes through `einsora ssh`: the access proxy, the agent's SSH
//! socket, the guest's virtio-serial channels; no network.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::harness::agents::{Agent, Machine, join, online_with, run_agent_apart};
use crate::harness::cli::Cli;
use crate::harness::notebooks::*;
use crate::harness::solo::Solo;
use crate::harness::workloads::{Owner, timeline, wait_for, wait_for_within};
use crate::harness::world::{Credential, call, login, new_token, revoke_token, tenant};
use einsora_testkit::http::{exchange, request};

/// A Debian guest under TCG: its kernel, systemd and cloud-init's first boot.
const BOOT: Duration = Duration::from_secs(300);
/// The test guest under TCG boots in seconds; generous for a loaded machine.
const TINY_BOOT: Duration = Duration::from_secs(120);
const DEBIAN: &str = "debian-12";
const TINY: &str = "tiny";

/// Ends the guests a test started, however it ends (a failed assertion leaves none running).
struct Guests(Vec<String>);

impl Drop for Guests {
    fn drop(&mut self) {
        for id in &self.0 {
            let _ = Command::new("virsh")
                .args(["--quiet", "--connect", "qemu:///system", "destroy"])
                .arg(format!("einsora-{id}"))
                .output();
        }
    }
}

/// A process of the test's, killed however the test ends.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `einsora up` with the libvirt driver only, its VMs' directories in `vms`, and `more`
/// settings.
fn solo_vms(vms: &Path, more: &[(&str, &str)]) -> (Solo, Leftovers) {
    let images = std::env::var("EINSORA_TEST_VM_IMAGES").expect(
        "EINSORA_TEST_VM_IMAGES names the images cache holding vm-debian and vm-tiny \
         (./scripts/test builds them)",
    );
    let mut settings = vec![
        ("EINSORA_AGENT_LIBVIRT", "true"),
        ("EINSORA_VM_ACCEL", "tcg"),
        ("EINSORA_VM_IMAGES", &images),
        ("EINSORA_VM_DIR", vms.to_str().unwrap()),
    ];
    settings.extend_from_slice(more);
    solo_bare(&settings)
}

/// `einsora launch` of a VM of `image` in the tests' class, with the key in `public` (a `.pub`
/// file): its ID.
fn launch(cli: &Cli<'_>, image: &str, name: &str, public: Option<&str>) -> String {
    let mut args = vec![
        "launch",
        "--kind",
        "vm",
        "--name",
        name,
        "--class",
        "cpu-1c-2g",
        "--image",
        image,
    ];
    if let Some(public) = public {
        args.extend(["--ssh-key", public]);
    }
    cli.json(&args)["id"].as_str().unwrap().to_owned()
}

/// A directory qemu's user can pass through (a temporary directory is its owner's only).
fn vm_dir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    dir
}

/// A key pair: its private key's path.
fn key(dir: &Path) -> PathBuf {
    let key = dir.join("key");
    let made = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "tester@e2e", "-f"])
        .arg(&key)
        .status()
        .unwrap();
    assert!(made.success());
    key
}

/// A user `email` invited into the tenant of `owner`, joined, with an API token: the token.
fn member(solo: &Solo, owner: &Credential, email: &str) -> String {
    let invited = call(
        solo,
        owner,
        "POST",
        "/v1/invites",
        Some(serde_json::json!({ "email": email })),
    );
    assert_eq!(invited.status, 200, "{}", invited.body);
    let password = "a member's password 123";
    let joined = call(
        solo,
        &Credential::Nobody,
        "POST",
        "/v1/invites/accept",
        Some(serde_json::json!({
            "secret": invited.json()["secret"], "display_name": "Ann", "password": password,
        })),
    );
    assert_eq!(joined.status, 200, "{}", joined.body);
    let session = login(solo, email, password);
    new_token(solo, &session)
}

fn running_domains() -> String {
    let out = Command::new("virsh")
        .args(["--quiet", "--connect", "qemu:///system", "list", "--name"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()
}

/// Launched with a key from the CLI, a VM boots and answers `einsora ssh`; stopped, its guest
/// shuts down and its disk is kept; started, it boots the same disk (a file written before is
/// there); deleted, its domain and its disk are gone.
#[test]
fn a_vm_boots_answers_ssh_keeps_its_disk_and_is_deleted() {
    let vms = vm_dir();
    let (solo, _leftovers) = solo_vms(vms.path(), &[]);
    let keys = tempfile::tempdir().unwrap();
    let key = key(keys.path());
    let public = format!("{}.pub", key.display());
    let acme = tenant(&solo, "dev@acme");
    let cli = Cli::with_token(&solo, token(&acme));
    let id = launch(&cli, DEBIAN, "box", Some(&public));
    let _guests = Guests(vec![id.clone()]);
    wait_for_within(&solo, &acme.session, &id, "running", BOOT);
    assert!(running_domains().contains(&format!("einsora-{id}")));
    // Its serial console is its output: the kernel's first line, and cloud-init's.
    let logs = cli.logs_until(&id, "Cloud-init");
    assert!(logs.contains("Linux version"), "{logs}");

    let key = key.to_str().unwrap();
    let ssh = |command: &str| cli.ok(&["ssh", &id, "-i", key, "--", command]);
    let uname = ssh("uname -sm");
    assert_eq!(uname.trim(), "Linux x86_64", "{uname}");
    // No network interface but loopback: the guest is reached only over its channels.
    let links = ssh("ls /sys/class/net");
    assert_eq!(links.trim(), "lo", "{links}");
    ssh("echo still here > kept.txt && sync");
    // Two sessions at once, each on a channel of its own.
    let mut long = cli.command(&["ssh", &id, "-i", key, "--", "sleep 5; echo long"]);
    let long = long.stdout(std::process::Stdio::piped()).spawn().unwrap();
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(ssh("echo short").trim(), "short");
    // Its qemu listens on nothing: no TCP or UDP socket of its own at all.
    let pid = std::fs::read_to_string(format!("/run/libvirt/qemu/einsora-{id}.pid")).unwrap();
    let sockets = Command::new("ss").args(["-H", "-tuanp"]).output().unwrap();
    let sockets = String::from_utf8(sockets.stdout).unwrap();
    let pid = format!("pid={},", pid.trim());
    assert!(!sockets.contains(&pid), "qemu has a socket: {sockets}");
    let long = long.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&long.stdout).trim(), "long");

    // Nobody else gets in: another tenant's CLI, a made-up ticket, a request that isn't an
    // upgrade.
    let globex = tenant(&solo, "dev@globex");
    let theirs = Cli::with_token(&solo, token(&globex));
    let refused = theirs.run(&["ssh", &id, "-i", key, "--", "true"], None);
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("not_found"), "{said}");
    let host = format!("w-{id}.localhost:{}", port(&solo));
    let upgrade = [("Connection", "upgrade"), ("Upgrade", "einsora-ssh")];
    let forged = [
        upgrade.as_slice(),
        &[("Authorization", "Ticket tkt_madeup")],
    ]
    .concat();
    let forged = exchange(
        &solo.access,
        &request("GET", "/_einsora/ssh", &host, &forged, ""),
    );
    assert_eq!(forged.status, 401, "{forged:?}");
    let plain = exchange(
        &solo.access,
        &request("GET", "/_einsora/ssh", &host, &[], ""),
    );
    assert_eq!(plain.status, 400, "{plain:?}");

    cli.ok(&["stop", &id]);
    wait_for_within(
        &solo,
        &acme.session,
        &id,
        "stopped",
        Duration::from_secs(120),
    );
    assert!(!running_domains().contains(&id), "its guest is shut down");
    let disk = vms.path().join(&id).join("disk.qcow2");
    assert!(disk.is_file(), "its disk is kept");

    cli.ok(&["start", &id]);
    wait_for_within(&solo, &acme.session, &id, "running", BOOT);
    assert_eq!(ssh("cat kept.txt").trim(), "still here");

    cli.ok(&["delete", &id]);
    wait_for(&solo, &acme.session, &id, "deleted");
    assert!(!running_domains().contains(&id), "its domain is gone");
    assert!(!vms.path().join(&id).exists(), "its disk is gone");
    let steps = timeline(&solo, &acme.session, &id);
    assert!(steps[1].ends_with("with libvirt"), "{steps:?}");
}

/// `einsora up` restarted while a VM runs: its guest is adopted (the same domain, never
/// booted again), and it still answers `einsora ssh`.
#[test]
fn an_agent_restart_adopts_a_running_vm() {
    let vms = vm_dir();
    let (mut solo, _leftovers) = solo_vms(vms.path(), &[]);
    let keys = tempfile::tempdir().unwrap();
    let key = key(keys.path());
    let public = format!("{}.pub", key.display());
    let acme = tenant(&solo, "dev@acme");
    let cli = Cli::with_token(&solo, token(&acme));
    let id = launch(&cli, TINY, "kept", Some(&public));
    let _guests = Guests(vec![id.clone()]);
    wait_for_within(&solo, &acme.session, &id, "running", TINY_BOOT);
    let key = key.to_str().unwrap();
    let boot_id = |cli: &Cli<'_>| {
        cli.ok(&[
            "ssh",
            &id,
            "-i",
            key,
            "--",
            "cat /proc/sys/kernel/random/boot_id",
        ])
    };
    let before = boot_id(&cli);

    solo.restart();
    wait_for(&solo, &acme.session, &id, "running");
    let cli = Cli::with_token(&solo, token(&acme));
    // Reachable again once the agent has heard the guest's ready line (said every 2 s).
    let after = einsora_testkit::eventually_or(
        "the VM reachable again",
        Duration::from_secs(30),
        || {
            let out = cli.run(
                &[
                    "ssh",
                    &id,
                    "-i",
                    key,
                    "--",
                    "cat /proc/sys/kernel/random/boot_id",
                ],
                None,
            );
            out.status
                .success()
                .then(|| String::from_utf8(out.stdout).unwrap())
        },
        || timeline(&solo, &acme.session, &id).join("\n"),
    );
    assert_eq!(after, before, "the same boot of the same guest");
    let steps = timeline(&solo, &acme.session, &id);
    let boots = steps.iter().filter(|s| s.starts_with("running")).count();
    assert_eq!(boots, 1, "never started again: {steps:?}");

    // Another user of the same tenant, with a key of their own, doesn't get in: a VM opens to
    // its owner (as a notebook does).
    let ann = member(&solo, &acme.session, "ann@acme.example");
    let anns = Cli::with_token(&solo, &ann);
    let refused = anns.run(&["ssh", &id, "-i", key, "--", "true"], None);
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("not_found"), "{said}");

    // A session open when its token is revoked ends, and the token opens none again.
    let mut open = cli.command(&["ssh", &id, "-i", key, "--", "sleep 120"]);
    let mut open = Killed(open.spawn().unwrap());
    std::thread::sleep(Duration::from_secs(3));
    let tokens = call(&solo, &acme.session, "GET", "/v1/tokens", None).json();
    let laptop = tokens["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "laptop");
    let laptop = laptop.expect("the tenant's token")["id"]
        .as_str()
        .unwrap()
        .to_owned();
    revoke_token(&solo, &acme.session, &laptop);
    let ended = einsora_testkit::eventually_or(
        "the open session to end",
        Duration::from_secs(15),
        || open.0.try_wait().unwrap(),
        || "it is still open",
    );
    assert!(!ended.success(), "ended by the proxy, not by its command");
    let refused = cli.run(&["ssh", &id, "-i", key, "--", "true"], None);
    assert!(!refused.status.success());

    // Its qemu killed: the VM stopped by itself, and is failed.
    let pid = std::fs::read_to_string(format!("/run/libvirt/qemu/einsora-{id}.pid")).unwrap();
    let killed = Command::new("kill")
        .args(["-KILL", pid.trim()])
        .status()
        .unwrap();
    assert!(killed.success());
    wait_for(&solo, &acme.session, &id, "failed");
    let steps = timeline(&solo, &acme.session, &id);
    assert!(
        steps.last().unwrap().contains("it stopped by itself"),
        "{steps:?}"
    );
}

/// A machine whose owner allows one VM at once (EINSORA_VM_LIMIT=1) says so, with how its VMs
/// run, and takes no second: it waits, saying why, until the first is gone.
#[test]
fn a_machines_vm_limit_holds() {
    let vms = vm_dir();
    let (solo, _leftovers) = solo_vms(vms.path(), &[("EINSORA_VM_LIMIT", "1")]);
    let acme = tenant(&solo, "dev@acme");
    let cli = Cli::with_token(&solo, token(&acme));
    let first = launch(&cli, TINY, "first", None);
    let second = launch(&cli, TINY, "second", None);
    let _guests = Guests(vec![first.clone(), second.clone()]);
    wait_for_within(&solo, &acme.session, &first, "running", TINY_BOOT);
    let machines = call(&solo, &acme.session, "GET", "/v1/machines", None).json();
    assert_eq!(
        machines["machines"][0]["vm"],
        serde_json::json!({ "accel": "tcg", "limit": 1 }),
        "{machines}"
    );
    let reason = "waiting for room: each machine here that runs vms on cpu-1c-2g already runs \
                  as many at once as it may";
    let said = timeline(&solo, &acme.session, &second);
    assert!(said.iter().any(|s| s.contains(reason)), "{said:?}");
    assert!(!running_domains().contains(&second));

    cli.ok(&["delete", &first]);
    wait_for_within(&solo, &acme.session, &second, "running", TINY_BOOT);
}

/// A VM on a joined machine whose agent lives in network and mount namespaces of its own (its
/// sockets can't be dialled from the control host): `einsora ssh` reaches it through the
/// relay. Started again while its machine's agent is gone, it waits for that machine (its disk
/// is there) and never starts on the other, which has room; back, its machine boots it with
/// the file written before.
#[test]
fn a_vm_on_a_joined_machine_is_reached_through_the_relay_and_returns_to_its_disk() {
    // Offline after 4 s of silence (scaled down; it never fails a workload here): admission
    // holds while a machine that was there when the controller started hasn't reconnected,
    // for that long.
    let (solo, lan, agents) = crate::harness::agents::solo(&[
        ("EINSORA_AUTH_MODE", "dev"),
        ("EINSORA_AGENT_OFFLINE_AFTER", "4s"),
        ("EINSORA_AGENT_OFFLINE_FAIL", "10m"),
    ]);
    let acme = tenant(&solo, "dev@acme");
    let owner = Owner {
        token: token(&acme).to_owned(),
        session: acme.session.clone(),
    };
    let images = std::env::var("EINSORA_TEST_VM_IMAGES").unwrap();
    let dirs = [vm_dir(), vm_dir()];
    let settings = |dir: &tempfile::TempDir| {
        [
            ("EINSORA_AGENT_SIM", "false"),
            ("EINSORA_AGENT_LIBVIRT", "true"),
            ("EINSORA_VM_ACCEL", "tcg"),
            ("EINSORA_VM_IMAGES", images.as_str()),
            ("EINSORA_VM_DIR", dir.path().to_str().unwrap()),
        ]
        .map(|(k, v)| (k, v.to_owned()))
    };
    let start = |machine: &Machine, dir: &tempfile::TempDir| {
        let settings = settings(dir);
        let settings: Vec<(&str, &str)> = settings.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let agent = run_agent_apart(&solo, machine, &settings);
        online_with(&solo, &owner, &machine.id, &agent, "libvirt");
        agent
    };
    let mut machines: Vec<(Machine, Option<Agent>)> = ["left", "right"]
        .into_iter()
        .zip(&dirs)
        .map(|(name, dir)| {
            let machine = join(&solo, &owner, &lan, &agents, name);
            let agent = start(&machine, dir);
            (machine, Some(agent))
        })
        .collect();

    let keys = tempfile::tempdir().unwrap();
    let key = key(keys.path());
    let public = format!("{}.pub", key.display());
    let cli = Cli::with_token(&solo, token(&acme));
    let id = launch(&cli, TINY, "far", Some(&public));
    let _guests = Guests(vec![id.clone()]);
    wait_for_within(&solo, &acme.session, &id, "running", TINY_BOOT);
    let placed_on = || {
        let w = call(
            &solo,
            &acme.session,
            "GET",
            &format!("/v1/workloads/{id}"),
            None,
        );
        w.json()["machine_id"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    let on = placed_on();
    let home = machines
        .iter()
        .position(|(m, _)| m.id == on)
        .expect("placed on a joined machine");
    // Its SSH socket is its machine's alone: nothing of its run directory shows here.
    assert!(!machines[home].0.state.join("run").join(&id).exists());
    let key = key.to_str().unwrap();
    let ssh = |command: &str| cli.ok(&["ssh", &id, "-i", key, "--", command]);
    assert_eq!(ssh("uname -sm").trim(), "Linux x86_64");
    ssh("echo far away > kept.txt && sync");

    cli.ok(&["stop", &id]);
    wait_for_within(&solo, &acme.session, &id, "stopped", TINY_BOOT);
    drop(machines[home].1.take());
    cli.ok(&["start", &id]);
    // Placed back on its machine at once (the controller hasn't yet heard it is gone) or
    // queued for it: either way it waits for that machine, saying so.
    let waiting = [
        "waiting for its machine to come online: its disk is there",
        "its machine is offline; waiting for it to reconnect",
    ];
    einsora_testkit::eventually_or(
        "the VM waiting for its machine",
        Duration::from_secs(30),
        || {
            timeline(&solo, &acme.session, &id)
                .iter()
                .any(|s| waiting.iter().any(|w| s.contains(w)))
                .then_some(())
        },
        || timeline(&solo, &acme.session, &id).join("\n"),
    );
    std::thread::sleep(crate::harness::agents::PASSES);
    assert_ne!(
        crate::harness::workloads::state(&solo, &acme.session, &id),
        "running"
    );
    assert_eq!(placed_on(), on, "never on the other machine");

    let agent = start(&machines[home].0, &dirs[home]);
    machines[home].1 = Some(agent);
    wait_for_within(&solo, &acme.session, &id, "running", TINY_BOOT);
    assert_eq!(placed_on(), on, "back on the machine holding its disk");
    assert_eq!(ssh("cat kept.txt").trim(), "far away");
}

/// Where KVM doesn't run guests (this machine's hangs) and emulation isn't allowed
/// (EINSORA_VM_ACCEL's default), the machine offers no libvirt driver, and a VM waits saying
/// why.
#[test]
fn without_kvm_and_no_leave_to_emulate_a_machine_offers_no_vms() {
    let vms = vm_dir();
    let images = std::env::var("EINSORA_TEST_VM_IMAGES").unwrap();
    let (solo, _leftovers) = solo_bare(&[
        ("EINSORA_AGENT_LIBVIRT", "true"),
        ("EINSORA_VM_IMAGES", &images),
        ("EINSORA_VM_DIR", vms.path().to_str().unwrap()),
    ]);
    let acme = tenant(&solo, "dev@acme");
    // The probe guest's refusal is logged as the driver is left off.
    solo.expect_log("no libvirt driver: KVM doesn't run guests here");
    let machines = einsora_testkit::eventually_or(
        "the machine's drivers",
        Duration::from_secs(30),
        || {
            let m = call(&solo, &acme.session, "GET", "/v1/machines", None).json();
            m["machines"][0]["drivers"].is_array().then_some(m)
        },
        || "no machine",
    );
    assert_eq!(
        machines["machines"][0]["drivers"],
        serde_json::json!([]),
        "{machines}"
    );
    let cli = Cli::with_token(&solo, token(&acme));
    let id = launch(&cli, TINY, "box", None);
    let _guests = Guests(vec![id.clone()]);
    let reason = "waiting for a machine with a driver that runs vms on cpu-1c-2g";
    einsora_testkit::eventually_or(
        "the seeds' reason",
        Duration::from_secs(30),
        || {
            timeline(&solo, &acme.session, &id)
                .iter()
                .any(|s| s.contains(reason))
                .then_some(())
        },
        || timeline(&solo, &acme.session, &id).join("\n"),
    );
    assert!(running_domains().is_empty() || !running_domains().contains(&id));
}

/// The domain a VM given two GPUs gets (the agent's golden file, `vfio::tests`) is one libvirt
/// takes: it validates against libvirt's own schema. (No GPU here to pass through.)
#[test]
fn the_vfio_domain_validates_against_libvirts_schema() {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../agent/src/drivers/libvirt/testdata/two-gpus/domain.xml");
    let out = Command::new("virt-xml-validate")
        .arg(&golden)
        .arg("domain")
        .output()
        .expect("virt-xml-validate (libvirt-clients: ./scripts/test installs it)");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
