//! Controllers a test owns, for crash, fencing and outage tests: `einsora up` runs every other
//! role (and its own controller, kept to a second region, `lab`), while the test starts, kills,
//! pauses and restarts the controllers of the region under test, `local`.

use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use einsora_store::DatabaseUrl;
use einsora_testkit::spawn::{Spawned, Stop};

use crate::harness::solo::{Engine, Solo};
use crate::harness::support::Einsora;
use crate::harness::world::catalog_with_a_second_region;

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

/// A controller process beside the stack, SIGKILLed when dropped.
pub struct Controller(Spawned);

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
        let mut cmd = solo.e.command(&["controller"], &all);
        cmd.stdout(Stdio::null()).stderr(Stdio::piped());
        let spawned = Spawned::start(cmd, Stop::Kill).unwrap();
        solo.gate("controller", spawned.lines());
        Controller(spawned)
    }

    pub fn pid(&self) -> u32 {
        self.0.pid()
    }

    pub fn logs(&self) -> String {
        self.0.logs()
    }

    /// SIGKILL, and reaps it.
    pub fn kill(self) {
        self.0.stop();
    }

    /// Its exit status once it exits by itself within `within`.
    pub fn exits_within(&mut self, within: Duration) -> Option<ExitStatus> {
        self.0.exits_within(within)
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
