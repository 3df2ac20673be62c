//! Running the real `einsora` binary in a fresh data directory.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

pub struct Einsora {
    pub data_dir: tempfile::TempDir,
}

impl Einsora {
    pub fn new() -> Self {
        Einsora {
            data_dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn dir(&self) -> &Path {
        self.data_dir.path()
    }

    pub fn db(&self) -> PathBuf {
        self.dir().join("einsora.db")
    }

    pub fn command(&self, args: &[&str], env: &[(&str, &str)]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_einsora"));
        cmd.args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("EINSORA_DATA_DIR", self.dir())
            .env("EINSORA_LOG", "info")
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

pub fn free_addr() -> String {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string()
}

/// Sends SIGTERM by PID and waits for the exit.
pub fn terminate(mut child: Child) -> Output {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let _ = child.try_wait();
    child.wait_with_output().unwrap()
}

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
