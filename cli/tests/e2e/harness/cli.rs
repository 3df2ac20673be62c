//! The CLI as a test runs it: dev mode's announced passwords, and `einsora` commands with a
//! data directory and a server of their own.

use std::process::Output;

use serde_json::Value;

use crate::harness::solo::Solo;
use crate::harness::support::{fed, stderr};

/// Dev mode's announced password for `email` (announced once the api has seeded; the latest,
/// as a restarted api announces new ones).
pub fn dev_password(solo: &Solo, email: &str) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let out = solo.stdout();
        let line = out
            .lines()
            .rev()
            .find(|l| l.contains(&format!("email {email} ")));
        if let Some(password) = line.and_then(|l| l.split_whitespace().last()) {
            return password.to_owned();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no dev account {email} in:\n{out}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

pub struct Cli<'a> {
    solo: &'a Solo,
    config: std::path::PathBuf,
    token: Option<String>,
}

impl<'a> Cli<'a> {
    pub fn new(solo: &'a Solo, name: &str) -> Self {
        let config = solo.e.dir().join(format!("cli-{name}.json"));
        Cli {
            solo,
            config,
            token: None,
        }
    }

    pub fn with_token(solo: &'a Solo, token: &str) -> Self {
        let mut cli = Cli::new(solo, "token");
        cli.token = Some(token.to_owned());
        cli
    }

    pub fn run(&self, args: &[&str], stdin: Option<&str>) -> Output {
        fed(self.command(args), stdin.unwrap_or(""))
    }

    /// The command line `einsora <args>` as this CLI user, not yet started.
    pub fn command(&self, args: &[&str]) -> std::process::Command {
        let server = format!("http://{}", self.solo.http);
        let mut env = vec![
            ("EINSORA_SERVER", server.as_str()),
            ("EINSORA_CLI_CONFIG", self.config.to_str().unwrap()),
        ];
        if let Some(token) = &self.token {
            env.push(("EINSORA_TOKEN", token));
        }
        self.solo.e.command(args, &env)
    }

    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args, None);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        String::from_utf8(out.stdout).unwrap()
    }

    /// `einsora logs <id>` once it shows `marker` (within 30 s).
    pub fn logs_until(&self, id: &str, marker: &str) -> String {
        einsora_testkit::eventually_or(
            "the marker in its logs",
            std::time::Duration::from_secs(30),
            || {
                let out = self.ok(&["logs", id]);
                out.contains(marker).then_some(out)
            },
            || self.ok(&["logs", id]),
        )
    }

    pub fn json(&self, args: &[&str]) -> Value {
        let mut args = args.to_vec();
        args.push("--json");
        serde_json::from_str(&self.ok(&args)).unwrap()
    }

    /// `einsora launch` of a JupyterLab notebook of the tests' class, `cpu-1c-2g`: what it
    /// prints with `--json`.
    pub fn launch_notebook(&self, name: &str) -> Value {
        self.json(&[
            "launch",
            "--kind",
            "notebook",
            "--name",
            name,
            "--class",
            "cpu-1c-2g",
            "--image",
            "jupyterlab",
        ])
    }

    pub fn login(&self, email: &str, password: &str) {
        let out = self.run(
            &["login", "--email", email, "--password-stdin"],
            Some(&format!("{password}\n")),
        );
        assert!(out.status.success(), "login: {}", stderr(&out));
    }
}
