//! Disk: a whole installation (store, agent state, workloads' disks) on a small throwaway
//! filesystem, as a Solo machine has one disk. A notebook that fills its storage (its files,
//! its run directory) gets ENOSPC at the limits while the store still writes and the agent
//! keeps syncing; its container's
//! log keeps a bounded tail, and where its rotations dropped lines before the agent read them
//! the workload's output says so; below the free-space floor no new work starts, and the timeline
//! says why. Needs what docker.rs needs, and root (it mounts the filesystem).

mod throwaway;

use std::process::Command;
use std::time::Duration;

use einsora_testkit::eventually;

use serde_json::Value;

use crate::harness::mounts::mounted_on;
use crate::harness::notebooks::{
    Leftovers, catalog_with_small_disks, containers, data_dir, notebook, open, run_cell,
};
use crate::harness::solo::{Engine, Solo};
use crate::harness::support::{Einsora, signal};
use crate::harness::workloads::{act, state, timeline, wait_for};
use crate::harness::world::{Credential, a_notebook, call, launch, tenant};
use throwaway::Throwaway;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
/// The agent's free-space floor here.
const FLOOR: u64 = 768 * MIB;
/// What a container's log keeps here, in all.
const LOG_LIMIT: u64 = 2 * MIB;

/// Writes to `PATH` until the filesystem refuses; what it wrote and the errno.
const FILL: &str = r#"import json
written, errno = 0, None
try:
    with open('PATH', 'wb', buffering=0) as f:
        chunk = b'\xff' * (1 << 20)
        while True:
            written += f.write(chunk)
except OSError as e:
    errno = e.errno
print(json.dumps({'errno': errno, 'written': written}))"#;

/// Writes 8 MiB to the server's own output: the container's log.
const FLOOD_THE_LOG: &str = r#"import os
fd = os.open('/proc/1/fd/1', os.O_WRONLY)
for i in range(FLOOD_LINES):
    os.write(fd, b'flood %07d ' % i + b'y' * 1009 + b'\n')
print('logged')"#;
/// Lines of the flood, 1 KiB each.
const FLOOD_LINES: u64 = 8 * 1024;

/// The flood's lines in `workload`'s output, once its last one is there: each one's number and
/// whether lines may be missing before it.
fn flood_as_shipped(solo: &Solo, who: &Credential, workload: &str) -> Vec<(u64, bool)> {
    let mut shipped = Vec::new();
    let (mut after, mut gap) = (0u64, false);
    eventually(
        "the flood's last line in the output",
        Duration::from_secs(60),
        || {
            let path = format!("/v1/workloads/{workload}/logs?after={after}&limit=1000");
            let page: Value =
                serde_json::from_str(&call(solo, who, "GET", &path, None).body).ok()?;
            for line in page["lines"].as_array()? {
                // A gap marked on the server's own line is a gap before the next flood line.
                gap |= line["gap_before"] == true;
                let text = line["text"].as_str().unwrap_or_default();
                if let Some(n) = text.strip_prefix("flood ").and_then(|t| t.get(..7)) {
                    shipped.push((n.parse().unwrap(), std::mem::take(&mut gap)));
                }
                after = line["number"].as_str()?.parse().ok()?;
            }
            shipped
                .last()
                .filter(|l| l.0 == FLOOD_LINES - 1)
                .map(|_| ())
        },
    );
    shipped
}

fn inspect(container: &str) -> Value {
    let out = Command::new("docker")
        .args(["inspect", container])
        .output()
        .unwrap();
    let all: Value = serde_json::from_slice(&out.stdout).unwrap();
    all[0].clone()
}

/// The size of a container's log, its rotated file included.
fn log_bytes(container: &Value) -> u64 {
    let path = container["LogPath"].as_str().unwrap();
    let size = |p: String| std::fs::metadata(p).map_or(0, |m| m.len());
    size(path.to_owned()) + size(format!("{path}.1"))
}

#[test]
fn a_full_workload_gets_enospc_while_the_store_and_the_agent_carry_on() {
    let disk = Throwaway::new(4 * GIB);
    let outside = tempfile::tempdir().unwrap();
    let catalog = catalog_with_small_disks(outside.path());
    let floor = format!("{}MiB", FLOOR / MIB);
    let log_limit = format!("{}MiB", LOG_LIMIT / MIB);
    let e = Einsora {
        data_dir: tempfile::tempdir_in(disk.path()).unwrap(),
        run_as: None,
    };
    let env = [
        ("EINSORA_AUTH_MODE", "dev"),
        ("EINSORA_CLUSTER_BACKEND", "agent"),
        ("EINSORA_CATALOG", catalog.as_str()),
        ("EINSORA_AGENT_DISK_FLOOR", floor.as_str()),
        ("EINSORA_AGENT_LOG_LIMIT", log_limit.as_str()),
        ("EINSORA_AGENT_HEARTBEAT", "1s"),
    ];
    let solo = Solo::launch(e, Engine::Sqlite, &env);
    solo.expect_log("free disk space is below the floor");
    let _leftovers = Leftovers::of(&solo);
    let acme = tenant(&solo, "dev@acme");

    let full = launch(&solo, &acme.token, a_notebook("full"));
    wait_for(&solo, &acme.session, &full, "running");
    let data = data_dir(&solo, &full);
    let (kind, source) = mounted_on(&data).expect("its data directory is a mount point");
    assert_eq!(kind, "ext4", "{source}");
    assert!(source.starts_with("/dev/loop"), "{source}");
    let run = solo.e.dir().join("agent").join("run").join(&full);
    assert_eq!(mounted_on(&run).map(|m| m.0).as_deref(), Some("tmpfs"));
    let container = inspect(&containers(&full)[0]);
    assert_eq!(
        container["HostConfig"]["LogConfig"]["Config"]["max-size"],
        (LOG_LIMIT / 2).to_string()
    );

    let (host, cookie) = open(&solo, &acme.session, &full);
    // The agent paused while the notebook prints 8 MiB, so the engine (keeping 2) rotates most
    // of it out before it is read.
    let agent = solo.child("agent").expect("up runs an agent");
    let flood = FLOOD_THE_LOG.replace("FLOOD_LINES", &FLOOD_LINES.to_string());
    signal(agent, "STOP");
    let flooded = run_cell(&solo, &host, &cookie, &flood);
    signal(agent, "CONT");
    assert_eq!(flooded, "logged\n");
    let logged = log_bytes(&container);
    assert!(
        (LOG_LIMIT / 4..=LOG_LIMIT + LOG_LIMIT / 4).contains(&logged),
        "8 MiB written, {logged} bytes kept"
    );
    // Every place lines went is marked in the workload's output.
    // What the engine kept is the flood's tail, shipped whole once the agent goes on, and the
    // one place lines went is marked: its first line.
    let shipped = flood_as_shipped(&solo, &acme.token, &full);
    let numbers: Vec<u64> = shipped.iter().map(|l| l.0).collect();
    let first = numbers[0];
    assert!(first > 0, "2 MiB kept of 8, yet line 0 was shipped");
    assert_eq!(numbers, (first..FLOOD_LINES).collect::<Vec<_>>());
    let marked: Vec<u64> = shipped.iter().filter(|l| l.1).map(|l| l.0).collect();
    assert_eq!(marked, [first], "lines 0..{first} are missing");

    let fill = |path: &str| -> Value {
        let said = run_cell(&solo, &host, &cookie, &FILL.replace("PATH", path));
        serde_json::from_str(&said).unwrap()
    };
    const ENOSPC: i64 = 28;
    let filled = fill("/run/einsora/fill.bin");
    assert_eq!(filled["errno"], ENOSPC, "{filled}");
    let written = filled["written"].as_u64().unwrap();
    assert!(
        written <= 16 * MIB,
        "its run directory is full at 16 MiB: {written} bytes"
    );
    let filled = fill("/work/fill.bin");
    assert_eq!(filled["errno"], ENOSPC, "{filled}");
    let written = filled["written"].as_u64().unwrap();
    assert!(
        (800 * MIB..GIB).contains(&written),
        "full at its 1 GiB limit: {written} bytes"
    );
    assert!(
        disk.available() > FLOOR,
        "the installation's disk keeps its room: {} bytes free",
        disk.available()
    );
    // The store still writes, and the machine still starts work.
    let second = launch(&solo, &acme.token, a_notebook("second"));
    wait_for(&solo, &acme.session, &second, "running");
    // The full one is still served; its owner frees its space as a user would.
    notebook(
        &solo,
        &host,
        &cookie,
        "DELETE",
        "/api/contents/fill.bin",
        "",
    );
    assert_eq!(run_cell(&solo, &host, &cookie, "print(6 * 7)"), "42\n");

    // Deleted, its disk goes: unmounted, its image removed.
    let image = solo
        .e
        .dir()
        .join("agent")
        .join("disks")
        .join(format!("{full}.img"));
    assert!(image.is_file());
    assert_eq!(act(&solo, &acme.token, &full, "delete").0, 202);
    wait_for(&solo, &acme.session, &full, "deleted");
    assert!(!image.exists() && !data.exists(), "its disk is gone");
    assert_eq!(mounted_on(&data), None);
    assert_eq!(mounted_on(&run), None);

    // Below the floor: new work is refused, with the reason; running work is left alone.
    let filler = disk.path().join("filler");
    let room = disk.available() - (FLOOR - 128 * MIB);
    let took = Command::new("fallocate")
        .args(["-l", &room.to_string()])
        .arg(&filler)
        .status()
        .unwrap();
    assert!(took.success());
    let refused = launch(&solo, &acme.token, a_notebook("refused"));
    wait_for(&solo, &acme.session, &refused, "failed");
    assert_eq!(
        timeline(&solo, &acme.session, &refused).last().unwrap(),
        "failed: its machine is low on disk space, so it wasn't started; free some space there \
         or delete workloads, then start it again"
    );
    assert!(containers(&refused).is_empty(), "nothing was started");
    assert_eq!(state(&solo, &acme.session, &second), "running");
    let (host, cookie) = open(&solo, &acme.session, &second);
    assert_eq!(run_cell(&solo, &host, &cookie, "print(6 * 7)"), "42\n");

    // Space freed, it starts when asked again.
    std::fs::remove_file(&filler).unwrap();
    assert_eq!(act(&solo, &acme.token, &refused, "start").0, 202);
    wait_for(&solo, &acme.session, &refused, "running");
}
