//! Controllers a test owns, for crash, fencing and outage tests: `einsora up` runs every other
//! role (and its own controller, kept to a second region, `lab`), while the test starts, kills,
//! pauses and restarts the controllers of the region under test, `local`.

use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use einsora_store::DatabaseUrl;

use crate::solo::{Engine, Solo};
use crate::support::{Einsora, Lines, signal};
use crate::world::catalog_with_a_second_region;

/// The region the test's own controllers reconcile.
pub const REGION: &str = "local";

/// `einsora up` (dev auth mode) whose own controller reconciles `lab`, with `env` for every role.
pub fn stack(engine: Engine, database: Option<&str>, env: &[(&str, &str)]) -> (Solo, String) {
    let e = Einsora::new();
    let catalog = catalog_with_a_second_region(&e);
    let mut all: Vec<(&str, &str)> = vec![
        ("EINSORA_AUTH_MODE", "dev"),
        ("EINSORA_CATALOG", &catalog),
        ("EINSORA_REGION", "lab"),
    ];
    if let Some(url) = database {
        all.push(("EINSORA_DATABASE_URL", url));
    }
    all.extend_from_slice(env);
    let mut solo = Solo::launch(e, engine, &all);
    if let Some(url) = database {
        solo.database = url.to_owned();
    }
    (solo, catalog)
}

pub struct Controller {
    child: Child,
    logs: Lines,
}

impl Controller {
    /// A controller of [`REGION`] on the stack's database and certificates, with `env`. Nothing
    /// dials its ports: it binds whichever the kernel gives it. Its logs are held to the
    /// stack's gate.
    pub fn start(solo: &Solo, catalog: &str, env: &[(&str, &str)]) -> Controller {
        let mut all: Vec<(&str, &str)> = vec![
            ("EINSORA_AGENT_ADDR", "127.0.0.1:0"),
            ("EINSORA_DATABASE_URL", &solo.database),
            ("EINSORA_CATALOG", catalog),
            ("EINSORA_REGION", REGION),
            ("EINSORA_CONTROLLER_ADDR", "127.0.0.1:0"),
            ("EINSORA_CLUSTER_BACKEND", "fake"),
        ];
        all.extend_from_slice(env);
        let mut child = solo
            .e
            .command(&["controller"], &all)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let logs = Lines::collect(child.stderr.take().unwrap());
        solo.gate("controller", &logs);
        Controller { child, logs }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn logs(&self) -> String {
        self.logs.text()
    }

    /// SIGKILL, and reaps it.
    pub fn kill(mut self) {
        signal(self.pid(), "KILL");
        let _ = self.child.wait();
    }

    /// Its exit status once it exits by itself within `within`.
    pub fn exits_within(&mut self, within: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            signal(self.pid(), "KILL");
            let _ = self.child.wait();
        }
    }
}

/// The PID of the process holding [`REGION`]'s lease now, if one does.
pub fn lease_holder(database: &str) -> Option<u32> {
    let sql = format!(
        "SELECT holder FROM leases WHERE name = 'controller:{REGION}' \
         AND expires_at > {}",
        time::OffsetDateTime::now_utc().unix_timestamp() * 1000
    );
    let holder = einsora_testkit::db::query(&DatabaseUrl::parse(database).unwrap(), &sql);
    // `<host>/<pid>/<uuid>`
    holder.trim().split('/').nth(1)?.parse().ok()
}
