//! Workload output on the docker driver, followed live: `einsora logs -f` and the API's NDJSON
//! stream see a real notebook's lines as they are printed, through an agent killed with SIGKILL
//! mid-stream and a controller restart, each line once and in order; they end by themselves
//! when the workload stops. Another tenant's logs are 404, followed or not.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use einsora_testkit::eventually;
use einsora_testkit::http::{request, stream};
use serde_json::Value;

use crate::harness::cli::Cli;
use crate::harness::notebooks::{open, run_cell, solo, token};
use crate::harness::support::signal;
use crate::harness::workloads::{act, wait_for};
use crate::harness::world::{Credential, a_notebook, call, launch, tenant};

/// Generous: a line reaches a follower within about a second on an idle machine (the bench's
/// figure); this only catches one that never does.
const PROMPTLY: Duration = Duration::from_secs(30);
/// Lines the notebook prints while its agent is killed and its controller restarted.
const NUMBERED: usize = 300;

#[test]
fn a_notebooks_output_is_followed_live_through_an_agent_kill_and_a_controller_restart() {
    let (solo, _leftovers) = solo();
    // The agent killed and the controller stopped: `up` says it restarts them.
    solo.expect_log("stopped unexpectedly; restarting");
    let acme = tenant(&solo, "dev@acme");
    let id = launch(&solo, &acme.session, a_notebook("printer"));
    wait_for(&solo, &acme.session, &id, "running");
    let (host, cookie) = open(&solo, &acme.session, &id);

    let cli = Cli::with_token(&solo, token(&acme));
    let mut follower = Follower::spawn(&cli, &id);
    let path = format!("/v1/workloads/{id}/logs?follow=true&tail=1");
    let api = follow(&solo.http, &path, &acme.token);
    assert_eq!(api.head.status, 200, "{:?}", api.head);
    assert_eq!(
        api.head.header("content-type"),
        Some("application/x-ndjson")
    );
    let mut api = Texts::of(api.lines);

    let print = "import os\nos.write(2, b'live-1 tsk_abcdefghijklmnop\\n')\nprint('ok')";
    assert_eq!(run_cell(&solo, &host, &cookie, print), "ok\n");
    let seen = follower.until("live-1");
    assert!(seen.ends_with("live-1 tsk_abcd…"), "redacted: {seen}");
    assert!(api.until("live-1").ends_with("live-1 tsk_abcd…"));

    // A process of the notebook's prints numbered lines while its agent is killed and its
    // controller restarted.
    let numbered = format!(
        "import subprocess, sys\n\
         subprocess.Popen([sys.executable, '-c', \"import os, time\\n\
         for i in range(1, {}):\\n    os.write(2, b'seq-%04d\\\\n' % i)\\n    time.sleep(0.03)\"])\n\
         print('ok')",
        NUMBERED + 1
    );
    assert_eq!(run_cell(&solo, &host, &cookie, &numbered), "ok\n");
    follower.until("seq-0030");
    let agent = solo.child("agent").expect("up runs an agent");
    signal(agent, "KILL");
    eventually("up restarting its agent", PROMPTLY, || {
        solo.child("agent").filter(|&pid| pid != agent)
    });
    follower.until("seq-0150");
    let controller = solo.child("controller").expect("up runs a controller");
    signal(controller, "TERM");
    eventually("up restarting its controller", PROMPTLY, || {
        solo.child("controller").filter(|&pid| pid != controller)
    });
    let last = format!("seq-{NUMBERED:04}");
    follower.until(&last);
    api.until(&last);

    let expected: Vec<String> = (1..=NUMBERED).map(|i| format!("seq-{i:04}")).collect();
    let numbered_in = |lines: &[String]| -> Vec<String> {
        lines
            .iter()
            .filter(|l| l.starts_with("seq-"))
            .cloned()
            .collect()
    };
    assert_eq!(numbered_in(&follower.lines), expected, "einsora logs -f");
    assert_eq!(numbered_in(&api.lines), expected, "the API's follow");
    let kept: Vec<String> = cli.ok(&["logs", &id]).lines().map(str::to_owned).collect();
    assert_eq!(numbered_in(&kept), expected, "einsora logs");
    let since = cli.ok(&["logs", &id, "--since", "1h"]);
    assert_eq!(
        since.lines().count(),
        kept.len(),
        "all of it was printed within the hour"
    );
    assert_eq!(
        cli.ok(&["logs", &id, "--since", "2100-01-01T00:00:00Z"]),
        ""
    );

    let globex = tenant(&solo, "dev@globex");
    let theirs = call(
        &solo,
        &globex.token,
        "GET",
        &format!("/v1/workloads/{id}/logs"),
        None,
    );
    assert_eq!(theirs.status, 404, "{}", theirs.body);
    assert_eq!(follow(&solo.http, &path, &globex.token).head.status, 404);

    // Stopped, both followers end by themselves.
    assert_eq!(act(&solo, &acme.session, &id, "stop").0, 202);
    let status = follower.finish();
    assert!(status.success(), "einsora logs -f: {status:?}");
    api.until_closed();
}

/// `GET path` as `who`, its answer streamed.
fn follow(http: &str, path: &str, who: &Credential) -> einsora_testkit::http::Streamed {
    let headers = who.headers();
    let headers: Vec<(&str, &str)> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    stream(http, &request("GET", path, http, &headers, ""))
}

/// The texts of the lines an NDJSON follow brought, in order.
struct Texts {
    pages: Receiver<String>,
    lines: Vec<String>,
}

impl Texts {
    fn of(pages: Receiver<String>) -> Texts {
        Texts {
            pages,
            lines: Vec::new(),
        }
    }

    /// Reads pages until a line containing `marker` arrives; that line.
    fn until(&mut self, marker: &str) -> String {
        let deadline = Instant::now() + PROMPTLY;
        loop {
            if let Some(found) = self.lines.iter().rev().find(|l| l.contains(marker)) {
                return found.clone();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let page = self
                .pages
                .recv_timeout(left)
                .unwrap_or_else(|e| panic!("{marker:?} never followed ({e:?}): {:?}", self.lines));
            let page: Value = serde_json::from_str(&page).unwrap();
            assert!(page.get("error").is_none(), "{page}");
            for line in page["lines"].as_array().unwrap() {
                self.lines.push(line["text"].as_str().unwrap().to_owned());
            }
        }
    }

    /// Waits for the server to end the stream.
    fn until_closed(&mut self) {
        let deadline = Instant::now() + PROMPTLY;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.pages.recv_timeout(left) {
                Ok(_) => {}
                Err(RecvTimeoutError::Disconnected) => return,
                Err(RecvTimeoutError::Timeout) => panic!("the followed stream never ended"),
            }
        }
    }
}

/// `einsora logs <id> -f`, its lines read as they come.
struct Follower {
    child: Child,
    lines: Vec<String>,
    incoming: Receiver<String>,
}

impl Follower {
    fn spawn(cli: &Cli<'_>, id: &str) -> Follower {
        let mut child = cli
            .command(&["logs", id, "-f"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, incoming) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Follower {
            child,
            lines: Vec::new(),
            incoming,
        }
    }

    fn until(&mut self, marker: &str) -> String {
        let deadline = Instant::now() + PROMPTLY;
        loop {
            if let Some(found) = self.lines.iter().rev().find(|l| l.contains(marker)) {
                return found.clone();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.incoming.recv_timeout(left) {
                Ok(line) => self.lines.push(line),
                Err(e) => panic!("{marker:?} never followed ({e:?}): {:?}", self.lines),
            }
        }
    }

    /// Waits for it to exit by itself.
    fn finish(&mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + PROMPTLY;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "einsora logs -f never ended");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
