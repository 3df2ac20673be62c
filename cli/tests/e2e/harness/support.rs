//! Running the real `einsora` binary in a fresh data directory.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub struct Einsora {
    pub data_dir: tempfile::TempDir,
    /// The user (uid, gid) every command runs as, with that user's groups, through `setpriv`;
    /// `None`: the test's own.
    pub run_as: Option<(u32, u32)>,
}

impl Einsora {
    pub fn new() -> Self {
        Einsora {
            data_dir: tempfile::tempdir().unwrap(),
            run_as: None,
        }
    }

    pub fn dir(&self) -> &Path {
        self.data_dir.path()
    }

    pub fn db(&self) -> PathBuf {
        self.dir().join("einsora.db")
    }

    pub fn command(&self, args: &[&str], env: &[(&str, &str)]) -> Command {
        let binary = env!("CARGO_BIN_EXE_einsora");
        let mut cmd = match self.run_as {
            None => Command::new(binary),
            Some((uid, gid)) => {
                let mut cmd = Command::new("setpriv");
                let (uid, gid) = (uid.to_string(), gid.to_string());
                cmd.args([
                    "--reuid",
                    &uid,
                    "--regid",
                    &gid,
                    "--init-groups",
                    "--",
                    binary,
                ]);
                cmd
            }
        };
        // The test's PATH for another user too, though it may name directories only the test
        // can search (root's home): the agent must read those as "not there".
        cmd.args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("EINSORA_DATA_DIR", self.dir())
            .env("EINSORA_LOG", "info")
            // Tests run many installations at once: each serves its metrics on a port of its
            // own unless the test names one.
            .env("EINSORA_METRICS_ADDR", "127.0.0.1:0")
            .envs(env.iter().copied())
            .stdin(Stdio::null());
        cmd
    }

    pub fn run(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        self.command(args, env).output().unwrap()
    }

    pub fn spawn(&self, args: &[&str], env: &[(&str, &str)]) -> Child {
        self.command(args, env)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Sends SIGTERM by PID and waits for the exit.
pub fn terminate(mut child: Child) -> Output {
    signal(child.id(), "TERM");
    let _ = child.try_wait();
    child.wait_with_output().unwrap()
}

/// The output of `child` once it exits; fails (killing it) if it runs longer than `within`.
pub fn finish(mut child: Child, within: Duration) -> Output {
    let deadline = Instant::now() + within;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("still running after {within:?}; stderr:\n{}", stderr(&out));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// Running processes (not zombies) whose parent is `parent`, with their first argument (an
/// `einsora` child's role).
pub fn children_of(parent: u32) -> Vec<(u32, String)> {
    einsora_testkit::process::children_of(parent)
        .into_iter()
        .map(|p| (p.pid, p.argument(1).unwrap_or_default()))
        .collect()
}

pub use einsora_testkit::process::processes_on;

/// The database's contents as SQL, to check that a refused command wrote nothing.
pub fn dump(db: &Path) -> String {
    let out = Command::new("sqlite3")
        .arg(db)
        .arg(".dump")
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

pub use einsora_testkit::spawn::{Lines, signal};

/// `cmd` run to its end with `input` on its standard input: its output, both streams kept.
pub fn fed(mut cmd: Command, input: &str) -> Output {
    use std::io::Write;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    drop(stdin);
    child.wait_with_output().unwrap()
}
