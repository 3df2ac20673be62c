//! The process supervisor on its own, with real processes: a workload started by an agent that
//! is then killed with SIGKILL is adopted by the next agent; a PID the kernel gave to another
//! process is never adopted (nor signalled); stopping ends the whole group; a workload in a
//! cgroup of its own is its cgroup's members, even those that left its group.
//!
//! The "agent" that gets killed is this test binary run again as a child process
//! (`agent_that_starts_a_workload_and_waits`, ignored unless asked for).

// A test harness: a failed unwrap is a failed test, and it reads its own environment.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use einsora_agent::drivers::process::{Launch, Supervisor};
use einsora_testkit::process::{Proc, processes};

const STATE: &str = "EINSORA_TEST_SUPERVISOR_STATE";
const ID: &str = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";

/// Two sleeping processes in one group, as a workload with a child of its own would be.
fn launch(dir: &Path) -> Launch {
    Launch {
        program: "/bin/sh".into(),
        args: vec!["-c".into(), "sleep 300 & sleep 300 & wait".into()],
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        cwd: dir.to_owned(),
        log: dir.join("workload.log"),
        own_session: false,
        members: None,
    }
}

fn alive(pid: u32) -> bool {
    Proc::of(pid).is_some_and(|p| p.live())
}

fn members(group: u32) -> usize {
    processes().filter(|p| p.live() && p.group == group).count()
}

#[test]
#[ignore = "run as a child process by the tests below"]
fn agent_that_starts_a_workload_and_waits() {
    let Some(dir) = std::env::var_os(STATE) else {
        return;
    };
    let dir = Path::new(&dir);
    let supervisor = Supervisor::new(&dir.join("processes")).unwrap();
    let running = supervisor.start(ID, &launch(dir)).unwrap();
    println!("started {}", running.pid);
    std::thread::sleep(Duration::from_secs(300));
}

#[tokio::test]
async fn a_killed_agents_workload_is_adopted_and_stop_ends_its_whole_group() {
    let dir = tempfile::tempdir().unwrap();
    let mut agent = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "agent_that_starts_a_workload_and_waits",
            "--nocapture",
        ])
        .env(STATE, dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = agent.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if let Some(pid) = line.strip_prefix("started ") {
                let _ = tx.send(pid.parse::<u32>().unwrap());
            }
        }
    });
    let started = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the agent started its workload");
    // SIGKILL the agent: its workload lives on in its own process group.
    agent.kill().unwrap();
    agent.wait().unwrap();
    assert!(alive(started), "the workload outlived its agent");

    let supervisor = Supervisor::new(&dir.path().join("processes")).unwrap();
    let adopted = supervisor
        .find(ID)
        .unwrap()
        .expect("the next agent adopts it");
    assert_eq!(adopted.pid, started);
    let again = supervisor.start(ID, &launch(dir.path())).unwrap();
    assert_eq!(
        again, adopted,
        "starting it again adopts it rather than running a second one"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while members(adopted.group) < 3 {
        assert!(Instant::now() < deadline, "the shell and its two sleeps");
        std::thread::sleep(Duration::from_millis(20));
    }

    supervisor.stop(ID, Duration::from_secs(5)).await.unwrap();
    assert_eq!(members(adopted.group), 0, "stop ends the whole group");
    assert_eq!(supervisor.find(ID).unwrap(), None);
    supervisor.stop(ID, Duration::from_secs(5)).await.unwrap();
}

#[tokio::test]
async fn a_pid_another_process_now_has_is_never_adopted_or_signalled() {
    let dir = tempfile::tempdir().unwrap();
    let supervisor = Supervisor::new(&dir.path().join("processes")).unwrap();
    let running = supervisor.start(ID, &launch(dir.path())).unwrap();
    // Another process, a group leader too, started later (start times tick every 10 ms): as if
    // the kernel had reused the recorded PID, and so the group, for it.
    std::thread::sleep(Duration::from_millis(30));
    let mut stranger = Command::new("sleep")
        .arg("300")
        .process_group(0)
        .spawn()
        .unwrap();
    let record = dir.path().join("processes").join(format!("{ID}.json"));
    let text = std::fs::read_to_string(&record).unwrap();
    let forged = text
        .replace(
            &format!("\"pid\":{}", running.pid),
            &format!("\"pid\":{}", stranger.id()),
        )
        .replace(
            &format!("\"group\":{}", running.group),
            &format!("\"group\":{}", stranger.id()),
        );
    assert_ne!(forged, text);
    std::fs::write(&record, forged).unwrap();

    assert_eq!(
        supervisor.find(ID).unwrap(),
        None,
        "its start time differs: not adopted"
    );
    supervisor
        .stop(ID, Duration::from_millis(200))
        .await
        .unwrap();
    assert!(alive(stranger.id()), "a stranger is never signalled");
    stranger.kill().unwrap();
    stranger.wait().unwrap();
    // The real workload, no longer recorded, is ended here by its group.
    let group = rustix::process::Pid::from_raw(i32::try_from(running.group).unwrap()).unwrap();
    rustix::process::kill_process_group(group, rustix::process::Signal::KILL).unwrap();
}

#[test]
fn ids_that_could_escape_the_state_directory_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let supervisor = Supervisor::new(dir.path()).unwrap();
    for id in ["../x", "a/b", "", "x.json", &"a".repeat(65)] {
        assert!(supervisor.find(id).is_err(), "{id:?}");
    }
}

/// A leader that exits leaves its group's other processes running: they are still the
/// workload, found and stopped as one.
#[tokio::test]
async fn a_group_whose_leader_exited_is_still_the_workload() {
    let dir = tempfile::tempdir().unwrap();
    let supervisor = Supervisor::new(&dir.path().join("processes")).unwrap();
    let orphaning = Launch {
        args: vec!["-c".into(), "sleep 300 & exit 0".into()],
        ..launch(dir.path())
    };
    let running = supervisor.start(ID, &orphaning).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(running.pid) || members(running.group) == 0 {
        assert!(
            Instant::now() < deadline,
            "the leader exits, its child stays"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(supervisor.find(ID).unwrap(), Some(running.clone()));
    supervisor.stop(ID, Duration::from_secs(5)).await.unwrap();
    assert_eq!(
        members(running.group),
        0,
        "the leader's orphan is stopped too"
    );
}

/// A pids cgroup of the test's own on this machine's real hierarchy (v2, or v1's pids
/// hierarchy), removed when dropped; `None` where the test isn't root.
struct TestCgroup(std::path::PathBuf);

impl TestCgroup {
    fn make() -> Option<TestCgroup> {
        if !rustix::process::geteuid().is_root() {
            eprintln!("not root: no cgroup can be made");
            return None;
        }
        let root = Path::new("/sys/fs/cgroup");
        let hierarchy = if root.join("cgroup.controllers").exists() {
            root.to_owned()
        } else {
            root.join("pids")
        };
        let dir = hierarchy.join(format!("einsora-test-{}", std::process::id()));
        std::fs::create_dir(&dir).unwrap();
        Some(TestCgroup(dir))
    }

    fn procs(&self) -> std::path::PathBuf {
        self.0.join("cgroup.procs")
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// A workload in a cgroup (its first process joins it, as the linux-native sandbox's does)
/// whose leader exits after a child made a session of its own, so it is in no group the
/// supervisor knows: the cgroup's members are still the workload, found and stopped.
#[tokio::test]
async fn a_workload_in_a_cgroup_is_its_members_even_those_that_left_its_group() {
    let Some(cgroup) = TestCgroup::make() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let supervisor = Supervisor::new(&dir.path().join("processes")).unwrap();
    let procs = cgroup.procs();
    let escaping = Launch {
        args: vec![
            "-c".into(),
            format!("echo $$ > {}; setsid sleep 300 & exit 0", procs.display()),
        ],
        members: Some(procs.clone()),
        ..launch(dir.path())
    };
    let running = supervisor.start(ID, &escaping).unwrap();
    let in_cgroup = || {
        std::fs::read_to_string(&procs)
            .unwrap()
            .lines()
            .map(|l| l.parse::<u32>().unwrap())
            .collect::<Vec<_>>()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(running.pid) || in_cgroup().is_empty() {
        assert!(
            Instant::now() < deadline,
            "the leader exits, its child stays"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let child = in_cgroup()[0];
    assert_eq!(members(running.group), 0, "nothing is left in its group");
    assert_ne!(Proc::of(child).unwrap().group, running.group);
    assert_eq!(supervisor.find(ID).unwrap(), Some(running), "still running");
    supervisor.stop(ID, Duration::from_secs(5)).await.unwrap();
    assert!(in_cgroup().is_empty(), "the session's sleep is stopped too");
    assert!(!alive(child));
    assert_eq!(supervisor.find(ID).unwrap(), None);
}

/// A record whose leader's PID another process now has (here: this test, with another start
/// time) is still the workload while its cgroup lists members, and is dropped once it lists
/// none. The members file stands in for a cgroup's `cgroup.procs`.
#[test]
fn a_cgroup_with_members_outweighs_a_leader_pid_taken_by_another_process() {
    let dir = tempfile::tempdir().unwrap();
    let processes = dir.path().join("processes");
    let supervisor = Supervisor::new(&processes).unwrap();
    let procs = dir.path().join("cgroup.procs");
    let member = std::process::id();
    std::fs::write(&procs, format!("{member}\n")).unwrap();
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    let record = serde_json::json!({
        "pid": member,
        "started": 1,
        "group": member,
        "boot": boot.trim(),
        "members": procs,
    });
    let path = processes.join(format!("{ID}.json"));
    std::fs::write(&path, record.to_string()).unwrap();
    let found = supervisor
        .find(ID)
        .unwrap()
        .expect("its cgroup has a member");
    assert_eq!(found.members.as_deref(), Some(procs.as_path()));
    std::fs::write(&procs, "").unwrap();
    assert_eq!(supervisor.find(ID).unwrap(), None, "nothing is left in it");
    assert!(!path.exists(), "the record is dropped");
}
