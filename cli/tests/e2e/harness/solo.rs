//! `einsora up` as a real process on a fresh data directory: every role, supervised, with every
//! line it and its children write captured (terminal and einsora.log, for the secrets test), its
//! children findable by role, and a raw HTTP/1.1 client so tests control every byte they send.

use std::process::{Child, Output};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use einsora_store::DatabaseUrl;
use einsora_testkit::Port;
use einsora_testkit::http::{self, Answer};

use crate::harness::support::{Einsora, Lines, children_of, stderr, terminate};

/// The owner `Solo` makes before `einsora up` in local auth mode.
pub const OWNER_EMAIL: &str = "owner@solo.test";
pub const OWNER_PASSWORD: &str = "an owner's long password";
/// EINSORA_CONTROLLER_INTERVAL of every stack: one controller pass, at most.
pub const CONTROLLER_INTERVAL: Duration = Duration::from_millis(200);

/// Where a stack keeps its data.
#[derive(Debug, Clone, Copy)]
pub enum Engine {
    Sqlite,
    /// A fresh database on the test process's throwaway Postgres server.
    Postgres,
}

pub struct Solo {
    pub e: Einsora,
    pub http: String,
    /// EINSORA_ACCESS_ADDR of this stack.
    pub access: String,
    /// EINSORA_DATABASE_URL of this stack.
    pub database: String,
    up: Option<Child>,
    /// What `up` was started with, for [`Solo::restart`].
    env: Vec<(String, String)>,
    logs: Lines,
    stdout: Lines,
    /// The logs of processes a test started beside the stack (agents, more controllers),
    /// held to the same gate.
    beside: Mutex<Vec<(String, Lines)>>,
    /// The ports its settings name, held for as long as it lives (across restarts too).
    ports: Vec<Port>,
    /// WARN and ERROR lines the test expects (each a fragment of such a line): any other fails
    /// the test when the stack is dropped ([`Solo::expect_log`]).
    expected: Mutex<Vec<String>>,
}

impl Solo {
    /// Starts `einsora up` (with `env`, e.g. EINSORA_AUTH_MODE=dev) and waits until it says
    /// it is ready.
    pub fn start(env: &[(&str, &str)]) -> Solo {
        Solo::start_on(Engine::Sqlite, env)
    }

    pub fn start_on(engine: Engine, env: &[(&str, &str)]) -> Solo {
        Solo::launch(Einsora::new(), engine, env)
    }

    /// [`Solo::start_on`] on the data directory of `e`. Outside dev auth mode, the owner
    /// ([`OWNER_EMAIL`]) is made first with `einsora setup`, as `up` without a terminal needs.
    /// Workloads run on the fake backend unless `env` names another.
    pub fn launch(e: Einsora, engine: Engine, env: &[(&str, &str)]) -> Solo {
        let database = match engine {
            Engine::Sqlite => format!("sqlite:{}", e.db().display()),
            Engine::Postgres => einsora_testkit::TempPostgres::shared()
                .fresh_database()
                .unwrap(),
        };
        let dev = env.contains(&("EINSORA_AUTH_MODE", "dev"));
        if !dev {
            make_owner(&e, &database);
        }
        Solo::resume(e, database, env)
    }

    /// `einsora up` on the data directory of `e` and `database`, as they are: an installation
    /// that has its owner already (a restored one).
    pub fn resume(e: Einsora, database: String, env: &[(&str, &str)]) -> Solo {
        let (http, access) = (Port::loopback(), Port::loopback());
        let (http_addr, access_addr) = (http.to_string(), access.to_string());
        let interval = einsora_testkit::setting(CONTROLLER_INTERVAL);
        let mut common: Vec<(&str, &str)> = vec![
            ("EINSORA_HTTP_ADDR", &http_addr),
            ("EINSORA_ACCESS_ADDR", &access_addr),
            ("EINSORA_DATABASE_URL", &database),
            ("EINSORA_CONTROLLER_INTERVAL", &interval),
            ("EINSORA_CLUSTER_BACKEND", "fake"),
        ];
        common.extend_from_slice(env);
        let up = e.spawn(&["up"], &common);
        let env = common
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut solo = Solo::watch(e, up, http_addr, access_addr, database);
        solo.env = env;
        solo.hold(http);
        solo.hold(access);
        solo
    }

    /// Keeps `port` (one the stack's settings name) held until the stack is dropped.
    pub fn hold(&mut self, port: Port) {
        self.ports.push(port);
    }

    /// Stops `up` and starts it again, as launched, on the same data.
    pub fn restart(&mut self) {
        self.restart_with(&[]);
    }

    /// [`Solo::restart`] with `extra` settings for this start (and the next ones).
    pub fn restart_with(&mut self, extra: &[(&str, &str)]) {
        self.stop();
        self.env
            .extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let env: Vec<(&str, &str)> = self
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let up = self.e.spawn(&["up"], &env);
        self.follow(up);
    }

    /// The roles of an installation this test didn't start (a Lab from compose/), reached at
    /// its gateway `http` and its access proxy `access`; `lines` (its logs) held to the gate.
    pub fn attached(e: Einsora, http: String, access: String, lines: &Lines) -> Solo {
        let solo = Solo {
            e,
            http,
            access,
            database: String::new(),
            up: None,
            env: Vec::new(),
            logs: Lines::default(),
            stdout: Lines::default(),
            ports: Vec::new(),
            expected: Mutex::new(Vec::new()),
            beside: Mutex::new(Vec::new()),
        };
        solo.gate("lab", lines);
        solo
    }

    /// Follows an `einsora up` (or `dev`) already spawned with piped output until it is ready.
    pub fn watch(e: Einsora, up: Child, http: String, access: String, database: String) -> Solo {
        let mut solo = Solo {
            e,
            http,
            access,
            database,
            up: None,
            env: Vec::new(),
            logs: Lines::default(),
            stdout: Lines::default(),
            ports: Vec::new(),
            expected: Mutex::new(Vec::new()),
            beside: Mutex::new(Vec::new()),
        };
        solo.follow(up);
        solo
    }

    /// Collects the output of `up` and waits until it says it is ready (again, after a
    /// restart: its earlier lines are kept).
    fn follow(&mut self, mut up: Child) {
        let ready_before = self.stdout().matches("Einsora is ready: ").count();
        self.logs.add(up.stderr.take().unwrap());
        self.stdout.add(up.stdout.take().unwrap());
        self.up = Some(up);
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.stdout().matches("Einsora is ready: ").count() == ready_before {
            if let Some(status) = self.up.as_mut().unwrap().try_wait().unwrap() {
                self.up = None; // reaped: nothing for Drop to signal
                panic!("up exited ({status}):\n{}", self.logs());
            }
            assert!(
                Instant::now() < deadline,
                "up was never ready:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// What the processes printed on standard output (dev mode's accounts, the ready line).
    pub fn stdout(&self) -> String {
        self.stdout.text()
    }

    /// The lines `up` and its children wrote to the terminal (standard error), every start's.
    pub fn terminal(&self) -> String {
        self.logs.text()
    }

    /// Everything logged so far: the terminal's lines, then einsora.log.
    pub fn logs(&self) -> String {
        let file = std::fs::read_to_string(self.log_file()).unwrap_or_default();
        format!("{}{file}", self.logs.text())
    }

    /// Where this `up` serves the installation's metrics (`host:port`): the address it logged
    /// (the tests give it port 0), the latest start's.
    pub fn metrics_addr(&self) -> String {
        let logs = self.logs();
        let url = logs
            .lines()
            .rev()
            .find_map(|l| l.split("metrics_url=http://").nth(1))
            .expect("up logs where it serves the metrics");
        url.split('/').next().unwrap_or_default().to_owned()
    }

    pub fn log_file(&self) -> std::path::PathBuf {
        self.e.dir().join("einsora.log")
    }

    pub fn up_pid(&self) -> u32 {
        self.up.as_ref().expect("up is running").id()
    }

    /// The running children of `up`, with their roles.
    pub fn children(&self) -> Vec<(u32, String)> {
        children_of(self.up_pid())
    }

    /// The PID of the running child of `role`.
    pub fn child(&self, role: &str) -> Option<u32> {
        self.children()
            .into_iter()
            .find(|(_, r)| r == role)
            .map(|(pid, _)| pid)
    }

    /// SIGTERM to `up`, and its output once it has exited.
    pub fn stop(&mut self) -> Output {
        terminate(self.up.take().expect("up is running"))
    }

    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
    ) -> Answer {
        self.try_request(method, path, headers, body)
            .unwrap_or_else(|| panic!("{method} {path}: no answer\n{}", self.logs()))
    }

    fn try_request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
    ) -> Option<Answer> {
        let text = http::request(method, path, &self.http, headers, body.unwrap_or_default());
        http::try_exchange(&self.http, &text)
    }
}

impl Solo {
    fn database_url(&self) -> DatabaseUrl {
        DatabaseUrl::parse(&self.database).unwrap()
    }

    /// Runs SQL on the stack's database behind its back (`einsora_testkit::db::execute`).
    pub fn execute(&self, sql: &str) {
        einsora_testkit::db::execute(&self.database_url(), sql);
    }

    /// What `sql` reads on the stack's database (`einsora_testkit::db::query`).
    pub fn query(&self, sql: &str) -> String {
        einsora_testkit::db::query(&self.database_url(), sql)
    }

    /// A WARN or ERROR line containing `fragment` is one this test brings about.
    pub fn expect_log(&self, fragment: &str) {
        self.expected.lock().unwrap().push(fragment.to_owned());
    }

    /// Holds `lines`, the logs of `who` started beside the stack, to its gate too.
    pub fn gate(&self, who: &str, lines: &Lines) {
        self.beside
            .lock()
            .unwrap()
            .push((who.to_owned(), lines.clone()));
    }

    /// The WARN and ERROR lines logged that no expectation covers, the stack's and those of
    /// what was started beside it (each marked with who said it).
    fn unexpected_logs(&self) -> Vec<String> {
        let expected = self.expected.lock().unwrap();
        let mut unexpected = crate::harness::log_gate::unexpected(&self.logs(), &expected);
        for (who, lines) in self.beside.lock().unwrap().iter() {
            let theirs = crate::harness::log_gate::unexpected(&lines.text(), &expected);
            unexpected.extend(theirs.into_iter().map(|l| format!("[{who}] {l}")));
        }
        unexpected
    }
}

impl Drop for Solo {
    fn drop(&mut self) {
        if let Some(up) = self.up.take() {
            terminate(up);
        }
        if std::thread::panicking() {
            return;
        }
        crate::harness::log_gate::check(&self.unexpected_logs());
    }
}

pub fn make_owner(e: &Einsora, database: &str) {
    let args = ["setup", "--email", OWNER_EMAIL, "--password-stdin"];
    let setup = e.command(&args, &[("EINSORA_DATABASE_URL", database)]);
    let out = crate::harness::support::fed(setup, OWNER_PASSWORD);
    assert!(out.status.success(), "setup: {}", stderr(&out));
}
