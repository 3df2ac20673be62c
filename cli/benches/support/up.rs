//! `einsora up` as a bench runs it: the release build (or BENCH_CANDIDATE), SQLite, dev auth,
//! the agent backend with the docker driver, every other setting its default, on a fresh data
//! directory; stopped with SIGTERM when dropped, and the containers its machine left removed.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use einsora_testkit::spawn::Spawned;

use super::free_addr;

/// An error naming what to run unless the engine answers and has the notebook image.
pub fn require_notebook_image() -> anyhow::Result<()> {
    let ready = Command::new("docker")
        .args(["image", "inspect", "einsora/notebook:local"])
        .output()
        .is_ok_and(|o| o.status.success());
    anyhow::ensure!(
        ready,
        "needs a Docker engine and the notebook image: images/dockerd start && images/build notebook"
    );
    Ok(())
}

pub struct Up {
    stop: Stop,
    pub http_addr: String,
    pub access_addr: String,
    /// dev@acme's password, as `up` printed it.
    pub password: String,
    pub dir: tempfile::TempDir,
}

impl Up {
    /// Starts it with `extra` settings and waits until it is ready.
    pub fn start(extra: &[(&str, &str)]) -> anyhow::Result<Up> {
        let dir = tempfile::tempdir()?;
        let (http_addr, access_addr) = (free_addr(), free_addr());
        let mut env: Vec<(String, String)> = [
            ("EINSORA_DATA_DIR", dir.path().display().to_string()),
            ("EINSORA_HTTP_ADDR", http_addr.clone()),
            ("EINSORA_ACCESS_ADDR", access_addr.clone()),
            ("EINSORA_METRICS_ADDR", free_addr()),
            ("EINSORA_AUTH_MODE", "dev".to_owned()),
            ("EINSORA_CLUSTER_BACKEND", "agent".to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        env.extend(
            extra
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        );
        let bin = std::env::var("BENCH_CANDIDATE").unwrap_or_else(|_| super::EINSORA.to_owned());
        let mut cmd = Command::new(&bin);
        cmd.arg("up")
            .envs(env)
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let stop = Stop {
            up: Some(super::spawn(cmd)?),
            machine_id: dir.path().join("agent").join("machine-id"),
        };
        let password = stop.wait_printed(|text| {
            let ready = text.contains("Einsora is ready: ");
            let line = text.lines().find(|l| l.contains("email dev@acme "))?;
            ready.then(|| line.split_whitespace().last().map(str::to_owned))?
        })?;
        Ok(Up {
            stop,
            http_addr,
            access_addr,
            password,
            dir,
        })
    }

    /// The supervisor's process ID.
    pub fn pid(&self) -> u32 {
        self.stop.up.as_ref().map_or(0, Spawned::pid)
    }
}

/// When the bench ends: SIGTERM to `up` (by PID) and a wait for it, then whatever containers
/// its machine left on the engine (workloads outlive their agent by design).
struct Stop {
    up: Option<Spawned>,
    machine_id: std::path::PathBuf,
}

impl Stop {
    /// Waits until `found` finds something in what `up` printed.
    fn wait_printed<T>(&self, found: impl Fn(&str) -> Option<T>) -> anyhow::Result<T> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let text = self.up.as_ref().map(Spawned::logs).unwrap_or_default();
            if let Some(value) = found(&text) {
                return Ok(value);
            }
            anyhow::ensure!(Instant::now() < deadline, "up was never ready:\n{text}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Stop {
    fn drop(&mut self) {
        drop(self.up.take());
        let Ok(machine) = std::fs::read_to_string(&self.machine_id) else {
            return;
        };
        einsora_testkit::docker::remove_machines(machine.trim());
    }
}
