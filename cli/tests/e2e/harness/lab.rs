//! A Lab from compose/compose.yaml, as an operator runs it: the images built from this tree
//! (`einsora images build server`, with this test's einsora), a compose project of its own in
//! a temporary directory (its database password a secret file there), the ports the test
//! picked, its containers' logs followed for the gate, and `down -v` when dropped. The compose
//! CLI is EINSORA_COMPOSE (scripts/test installs one).

use std::path::Path;
use std::process::{Command, Output, Stdio};

use einsora_testkit::spawn::{Spawned, Stop};

use crate::harness::support::{Einsora, stderr};

/// The compose file, as the repository has it.
const COMPOSE: &str = include_str!("../../../../compose/compose.yaml");

pub struct Lab {
    dir: tempfile::TempDir,
    project: String,
    env: Vec<(String, String)>,
    pub http: u16,
    pub access: u16,
    /// The agents' ports of controller-a and controller-b.
    pub agents: [u16; 2],
    logs: Option<Spawned>,
}

impl Lab {
    /// Builds the images, and writes the project (its secret made) with `env` for every
    /// service; nothing runs yet.
    pub fn new(e: &Einsora, env: &[(&str, &str)]) -> Lab {
        let built = e.run(&["images", "build", "server"], &[]);
        assert!(
            built.status.success(),
            "images build server: {}",
            stderr(&built)
        );
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("compose.yaml"), COMPOSE).unwrap();
        std::fs::create_dir(dir.path().join("secrets")).unwrap();
        let password = format!("lab-{}", uuid::Uuid::now_v7().simple());
        std::fs::write(dir.path().join("secrets/db-password"), password).unwrap();
        // Free now; compose publishes them (a port taken meanwhile fails `up`, loudly).
        let free = || einsora_testkit::Port::loopback().to_string();
        let port = |held: String| held.rsplit_once(':').unwrap().1.parse::<u16>().unwrap();
        let (http, access) = (port(free()), port(free()));
        let agents = [port(free()), port(free())];
        let mut all = vec![
            ("EINSORA_LAB_HTTP_PORT".to_owned(), http.to_string()),
            ("EINSORA_LAB_ACCESS_PORT".to_owned(), access.to_string()),
            ("EINSORA_LAB_AGENTS_PORT".to_owned(), agents[0].to_string()),
            (
                "EINSORA_LAB_STANDBY_AGENTS_PORT".to_owned(),
                agents[1].to_string(),
            ),
            (
                "EINSORA_PUBLIC_URL".to_owned(),
                format!("http://localhost:{http}"),
            ),
            (
                "EINSORA_ACCESS_URL".to_owned(),
                format!("http://localhost:{access}"),
            ),
        ];
        all.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        Lab {
            dir,
            project: format!("einsora-e2e-{}", std::process::id()),
            env: all,
            http,
            access,
            agents,
            logs: None,
        }
    }

    /// `docker compose <args>` on the project, with the test's settings in its environment.
    pub fn compose(&self, args: &[&str]) -> Command {
        let cli = std::env::var("EINSORA_COMPOSE")
            .expect("EINSORA_COMPOSE names a compose v2 CLI (./scripts/test installs one)");
        let mut command = Command::new(cli);
        command
            .args(["--project-name", &self.project, "--project-directory"])
            .arg(self.dir.path())
            .arg("--file")
            .arg(self.dir.path().join("compose.yaml"))
            .args(args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null());
        command
    }

    /// `compose <args>`, which must succeed; what it printed.
    pub fn ok(&self, args: &[&str]) -> Output {
        let out = self.compose(args).output().unwrap();
        if !out.status.success() {
            let logs = self
                .compose(&["logs", "--no-color", "--tail", "40"])
                .output();
            let logs = logs.map(|l| String::from_utf8_lossy(&l.stdout).into_owned());
            panic!(
                "compose {args:?}: {}\n{}",
                stderr(&out),
                logs.unwrap_or_default()
            );
        }
        out
    }

    /// `up -d --wait`: every service healthy (init done), and its logs followed from then.
    pub fn up(&mut self) {
        self.ok(&["up", "-d", "--wait"]);
        if self.logs.is_none() {
            let mut follow = self.compose(&["logs", "--follow", "--no-color", "--no-log-prefix"]);
            follow.stdout(Stdio::piped()).stderr(Stdio::piped());
            self.logs = Some(Spawned::start(follow, Stop::Kill).unwrap());
        }
    }

    /// What `service`'s containers logged so far.
    pub fn logs_of(&self, service: &str) -> String {
        let out = self.ok(&["logs", "--no-color", service]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs `einsora <args>` once in a new container of the init service (the project's
    /// settings, volumes and secrets; no fixed address), with `mount` (host, container) read
    /// only.
    pub fn einsora(&self, args: &[&str], mount: Option<(&Path, &str)>, stdin: &str) -> Output {
        let mut run = vec!["run", "--rm", "-T", "--entrypoint", "einsora-entrypoint"];
        let volume;
        if let Some((host, inside)) = mount {
            volume = format!("{}:{inside}:ro", host.display());
            run.extend(["--volume", &volume]);
        }
        run.push("init");
        run.extend_from_slice(args);
        crate::harness::support::fed(self.compose(&run), stdin)
    }

    /// The logs followed since the first `up`, for the gate.
    pub fn lines(&self) -> &einsora_testkit::spawn::Lines {
        self.logs.as_ref().expect("up first").lines()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = self
            .compose(&["down", "--volumes", "--remove-orphans", "--timeout", "5"])
            .output();
    }
}
