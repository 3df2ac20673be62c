//! Log shipping against `docker logs -f`, side by side on the same container: a running
//! JupyterLab notebook of `einsora up` (release build, agent backend, docker driver) prints
//! BENCH_LINES lines (default 100,000, each its print time in ns and 64 bytes of text) to its
//! own standard output as fast as it can, BENCH_ROUNDS times (default 3). Two followers read the
//! same lines at once: `einsora`'s own, the API's followed stream (`GET
//! /v1/workloads/{id}/logs?follow=true`, NDJSON, through the gateway), and `docker logs -f` on
//! the container. For each: lines a second and MB a second from the first line printed to the
//! last one received, and each line's delay from its print to its follower (p50, p99); and the
//! agent's CPU time per MB shipped (its process's utime + stime over the round).
//!
//! The lines are written by a process the bench starts in the container (`docker exec`) onto
//! the notebook's own standard output (`/proc/1/fd/1`): what a cell's output to the server's
//! stdout is, without a kernel in between.
//!
//! `einsora up` runs with `EINSORA_LOG_WORKLOAD_CAP=256MiB` and `EINSORA_AGENT_LOG_LIMIT=256MiB`:
//! a round is about the store's default cap (16 MiB), and two rounds overrun the engine's own
//! log at its default (two files of 10 MiB) while the agent is still shipping the first, so at
//! the defaults a burst this size is partly dropped (and marked as dropped) before it is read.
//!
//! `cargo bench -p einsora --bench logs`. Needs a Docker engine and the notebook image:
//! `images/dockerd start && images/build notebook`.

// A test harness: a failed unwrap is a failed test, and it reads its own environment.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use hyper::Method;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

use einsora_testkit::bench::{Report, Table, quantile, setting};
use support::{Api, Http};

/// Bytes of text each line carries after its number and time.
const PAD: usize = 64;
/// A follower that has had none of a round's lines for this long has all it will get (a
/// follower may lose lines: the table's lines column says how many came).
const QUIET: Duration = Duration::from_secs(20);

/// What one follower saw of one round.
struct Seen {
    lines: usize,
    bytes: usize,
    /// Each line's delay, ms, sorted.
    delays: Vec<f64>,
    /// From the first line's print to the last line's receipt.
    span: Duration,
}

fn main() -> anyhow::Result<()> {
    let lines: usize = setting("BENCH_LINES", 100_000)?;
    let rounds: usize = setting("BENCH_ROUNDS", 3)?;
    support::up::require_notebook_image()?;
    let mut report = Report::start(
        "logs",
        "Log shipping",
        "cargo bench -p einsora --bench logs",
    );
    // The store keeps a workload's output up to its cap (16 MiB by default) and the engine keeps
    // a container's log up to the agent's limit (20 MiB), each dropping the oldest: a round is
    // about that much, so both are raised here, out of the way of what is measured.
    let up = support::up::Up::start(&[
        ("EINSORA_LOG_WORKLOAD_CAP", "256MiB"),
        ("EINSORA_AGENT_LOG_LIMIT", "256MiB"),
    ])?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let http: Http = Client::builder(TokioExecutor::new()).build_http();
    let base = format!("http://{}", up.http_addr);
    let token = rt.block_on(support::token(&http, &base, &up.password))?;
    let api = Api { http, base, token };
    let id = rt.block_on(notebook(&api))?;
    let container = einsora_testkit::docker::containers_of(&id)
        .first()
        .cloned()
        .context("no container")?;
    let agent = agent_pid(up.pid()).context("no agent process")?;

    let mut table = Table::new(
        &[
            "round",
            "follower",
            "lines",
            "lines /s",
            "MB /s",
            "p50 delay ms",
            "p99 delay ms",
            "agent CPU s per MB",
        ],
        2,
    );
    for round in 1..=rounds {
        let marker = format!("r{round}x{}", std::process::id());
        let since = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs() - 1;
        let docker = std::thread::spawn({
            let (container, marker) = (container.clone(), marker.clone());
            move || docker_follow(&container, since, &marker, lines)
        });
        let cpu_before = support::probe::cpu_seconds(agent)?;
        let einsora = rt.spawn({
            let (base, token, id, marker) = (
                api.base.clone(),
                api.token.clone(),
                id.clone(),
                marker.clone(),
            );
            async move { einsora_follow(&base, &token, &id, &marker, lines).await }
        });
        // Both followers are listening: print.
        std::thread::sleep(Duration::from_secs(2));
        print_lines(&container, &marker, lines)?;
        let einsora = rt.block_on(einsora)??;
        let cpu = support::probe::cpu_seconds(agent)? - cpu_before;
        let docker = docker
            .join()
            .map_err(|_| anyhow::anyhow!("docker follower"))??;
        for (name, seen) in [
            ("einsora (API follow)", &einsora),
            ("docker logs -f", &docker),
        ] {
            let secs = seen.span.as_secs_f64();
            let mb = seen.bytes as f64 / 1e6;
            let per_mb = if name.starts_with("einsora") {
                format!("{:.3}", cpu / mb)
            } else {
                String::new()
            };
            table.row(vec![
                round.to_string(),
                name.to_owned(),
                seen.lines.to_string(),
                format!("{:.0}", seen.lines as f64 / secs),
                format!("{:.2}", mb / secs),
                format!("{:.1}", quantile(&seen.delays, 0.5)),
                format!("{:.1}", quantile(&seen.delays, 0.99)),
                per_mb,
            ]);
        }
        eprintln!("round {round} done");
    }
    report.say(format!(
        "{lines} lines of {PAD} bytes (plus their number and time) printed as fast as one \
         process can, per round; both followers reading the same lines at once:"
    ));
    report.table(&table);
    report.finish()?;
    // Deleted, its disk is released (a stopped agent keeps it mounted for adoption).
    rt.block_on(delete(&api, &id))?;
    drop(up);
    Ok(())
}

/// Deletes the workload and waits until it is gone.
async fn delete(api: &Api, id: &str) -> anyhow::Result<()> {
    let path = format!("/v1/workloads/{id}");
    api.send(Method::DELETE, &path, None).await?;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (status, w) = api.send(Method::GET, &path, None).await?;
        if status == 404 || w["state"] == "deleted" {
            return Ok(());
        }
        anyhow::ensure!(Instant::now() < deadline, "never deleted: {w}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A running notebook's ID.
async fn notebook(api: &Api) -> anyhow::Result<String> {
    let id = api.create("printer").await?;
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let (_, w) = api
            .send(Method::GET, &format!("/v1/workloads/{id}"), None)
            .await?;
        if w["state"] == "running" {
            return Ok(id);
        }
        anyhow::ensure!(Instant::now() < deadline, "never running: {w}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Prints `lines` lines `<ns> <marker> <n> <pad>` onto the notebook's standard output.
fn print_lines(container: &str, marker: &str, lines: usize) -> anyhow::Result<()> {
    let script = format!(
        "import os, sys, time\n\
         out = open('/proc/1/fd/1', 'w', buffering=1 << 16)\n\
         pad = 'x' * {PAD}\n\
         for i in range({lines}):\n    out.write(f'{{time.time_ns()}} {marker} {{i}} {{pad}}\\n')\n\
         out.flush()\n"
    );
    let done = Command::new("docker")
        .args(["exec", container, "python3", "-c", &script])
        .output()?;
    anyhow::ensure!(
        done.status.success(),
        "docker exec: {}",
        String::from_utf8_lossy(&done.stderr)
    );
    Ok(())
}

/// A line's print time (ns since the epoch), if it is one of `marker`'s.
fn printed_at(text: &str, marker: &str) -> Option<u128> {
    let mut words = text.split(' ');
    let ns = words.next()?.parse().ok()?;
    (words.next()? == marker).then_some(ns)
}

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// Tallies a line received now.
#[derive(Default)]
struct Tally {
    lines: usize,
    bytes: usize,
    delays: Vec<f64>,
    first_printed: Option<u128>,
    last_received: u128,
}

impl Tally {
    /// Counts `text` if it is one of `marker`'s lines; whether it was.
    fn line(&mut self, text: &str, marker: &str) -> bool {
        let Some(printed) = printed_at(text, marker) else {
            return false;
        };
        let now = now_ns();
        self.first_printed = Some(self.first_printed.map_or(printed, |f| f.min(printed)));
        self.lines += 1;
        self.bytes += text.len() + 1;
        self.delays.push(now.saturating_sub(printed) as f64 / 1e6);
        self.last_received = now;
        true
    }

    /// What came, from the first line's print to the last line's receipt.
    fn seen(mut self) -> Seen {
        self.delays.sort_by(f64::total_cmp);
        let span = self
            .last_received
            .saturating_sub(self.first_printed.unwrap_or(0));
        Seen {
            lines: self.lines,
            bytes: self.bytes,
            delays: self.delays,
            span: Duration::from_nanos(u64::try_from(span).unwrap_or(u64::MAX)),
        }
    }
}

/// `docker logs -f` on the container until `lines` of `marker`'s have come, or none for
/// [`QUIET`] (it loses lines when the container's log rotates under it).
fn docker_follow(container: &str, since: u64, marker: &str, lines: usize) -> anyhow::Result<Seen> {
    let mut child = Command::new("docker")
        .args(["logs", "-f", "--since", &since.to_string(), container])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let stdout = child.stdout.take().context("no stdout")?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let mut tally = Tally::default();
    let mut progress = Instant::now();
    while tally.lines < lines && progress.elapsed() < QUIET {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(500))
            && tally.line(&line, marker)
        {
            progress = Instant::now();
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    Ok(tally.seen())
}

/// The API's followed stream of the workload's output until `lines` of `marker`'s have come,
/// or none for [`QUIET`].
async fn einsora_follow(
    base: &str,
    token: &str,
    id: &str,
    marker: &str,
    lines: usize,
) -> anyhow::Result<Seen> {
    use http_body_util::BodyExt;
    let http: Http = Client::builder(TokioExecutor::new()).build_http();
    let request = hyper::Request::get(format!("{base}/v1/workloads/{id}/logs?follow=true&tail=1"))
        .header("authorization", format!("Bearer {token}"))
        .body(http_body_util::Full::new(hyper::body::Bytes::new()))?;
    let mut body = http.request(request).await?.into_body();
    let mut tally = Tally::default();
    let mut pending: Vec<u8> = Vec::new();
    let mut progress = Instant::now();
    while tally.lines < lines && progress.elapsed() < QUIET {
        let Ok(frame) = tokio::time::timeout(Duration::from_millis(500), body.frame()).await else {
            continue;
        };
        let frame = frame.context("the follow ended")??;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        pending.extend_from_slice(&data);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let page: Vec<u8> = pending.drain(..=end).collect();
            let page: Value = serde_json::from_slice(&page)?;
            anyhow::ensure!(page.get("error").is_none(), "{page}");
            for line in page["lines"].as_array().into_iter().flatten() {
                if tally.line(line["text"].as_str().unwrap_or_default(), marker) {
                    progress = Instant::now();
                }
            }
        }
    }
    Ok(tally.seen())
}

/// The `einsora agent` process `up` (`pid`) runs.
fn agent_pid(up: u32) -> Option<u32> {
    einsora_testkit::process::children_of(up)
        .into_iter()
        .find(|p| p.argument(1).as_deref() == Some("agent"))
        .map(|p| p.pid)
}
