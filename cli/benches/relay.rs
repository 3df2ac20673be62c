//! The relay against the local path, with the same software behind both: `einsora up` (release
//! build, SQLite, dev auth, the agent backend with the docker driver, every other setting its
//! default) with its agents' port on loopback, and a second machine joined to it with a token,
//! whose agent runs beside it (a state directory of its own, the same Docker engine). A JupyterLab
//! notebook on the control host's machine is reached by the proxy on its Unix socket; one on the
//! joined machine through the relay: the proxy's stream to the leading controller, the agent's
//! tunnel on the mutual-TLS connection it dialled for Sync, and the agent's own connection to the
//! workload's socket. Both are opened as the dashboard's link does (ticket, session cookie); then,
//! for each path, wrk (one thread, closed loop, kept-alive connections to the proxy):
//! - `GET /api/status` (JupyterLab's status, about 100 bytes) at 1 and 32 connections: req/s,
//!   p50 and p99;
//! - `GET /files/big.txt` (1 MiB, written through the proxy first) at 1 and 32 connections: MB/s.
//!
//! Every figure is the median of BENCH_ROUNDS rounds (default 3) of BENCH_SECONDS (default 5),
//! both paths run in each round in turn, so both share the machine's load. JupyterLab (one
//! Python process per notebook) is the origin of both, and bounds both alike.
//!
//! `cargo bench -p einsora --bench relay`. Needs a Docker engine, the notebook image
//! (`images/dockerd start && images/build notebook`) and wrk (`apt-get install wrk`).

// A test harness: a failed unwrap is a failed test, and it reads its own environment.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod support;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use hyper::Method;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use einsora_testkit::bench::{Report, Table, median, setting};
use support::wrk::Wrk;
use support::{Api, Http, einsora, free_addr, get};

const CONNECTIONS: [u32; 2] = [1, 32];
const BIG: usize = 1 << 20;
const WAIT: Duration = Duration::from_secs(180);

/// A notebook opened through the proxy: what wrk sends to reach it.
struct Opened {
    path: &'static str,
    headers: Vec<String>,
}

fn main() -> anyhow::Result<()> {
    let seconds: u64 = setting("BENCH_SECONDS", 5)?;
    let rounds: usize = setting("BENCH_ROUNDS", 3)?;
    support::up::require_notebook_image()?;
    let wrk = support::wrk::find()?;
    let mut report = Report::start(
        "relay",
        "The relay against the local path",
        "cargo bench -p einsora --bench relay",
    );
    let agents_addr = free_addr();
    let catalog_dir = tempfile::tempdir()?;
    let catalog = einsora_testkit::catalog::with_small_disks(catalog_dir.path());
    let up = support::up::Up::start(&[
        ("EINSORA_AGENT_ADDR", agents_addr.as_str()),
        ("EINSORA_CATALOG", catalog.as_str()),
    ])?;
    let access = up.access_addr.clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let http: Http = Client::builder(TokioExecutor::new()).build_http();
    let base = format!("http://{}", up.http_addr);
    let session = rt.block_on(support::sign_in(&http, &base, &up.password))?;
    let token = rt.block_on(support::token(&http, &base, &up.password))?;
    let api = Api { http, base, token };

    let local = rt.block_on(running(&api, "local"))?;
    let remote_state = up.dir.path().join("remote-agent");
    let remote_machine = rt.block_on(join(&api, &session, &agents_addr, &remote_state))?;
    let mut agent = einsora(
        &["agent"],
        &[(
            "EINSORA_AGENT_STATE_DIR".to_owned(),
            remote_state.display().to_string(),
        )],
    );
    agent.stdout(Stdio::null()).stderr(Stdio::null());
    let agent = support::spawn(agent)?;
    rt.block_on(online(&api, &remote_machine))?;
    let mut made = vec![local.clone()];
    let bench = Bench {
        api: &api,
        access: &access,
        wrk: &wrk,
        seconds,
        rounds,
    };
    let measured = bench.measure(&rt, &local, &remote_machine, &mut made);
    // Whatever happened, the notebooks go, and their disks with them, before `up` stops.
    let data = [up.dir.path().join("agent/data"), remote_state.join("data")];
    for id in &made {
        if let Err(e) = rt.block_on(delete(&api, id, &data)) {
            eprintln!("{id} left behind: {e:#}");
        }
    }
    drop(agent);
    let runs = measured?;
    let paths = ["local", "relayed"];

    let med = |p: usize, c: usize, f: fn(&(Wrk, Wrk)) -> f64| median(runs[p][c].iter().map(f));
    let mut table = Table::new(
        &[
            "path",
            "connections",
            "small req/s",
            "small p50 ms",
            "small p99 ms",
            "1 MiB MB/s",
        ],
        2,
    );
    for (c, connections) in CONNECTIONS.iter().enumerate() {
        for (p, name) in paths.iter().enumerate() {
            table.row(vec![
                (*name).to_owned(),
                connections.to_string(),
                format!("{:.0}", med(p, c, |r| r.0.rate)),
                format!("{:.2}", med(p, c, |r| r.0.p50_us / 1e3)),
                format!("{:.2}", med(p, c, |r| r.0.p99_us / 1e3)),
                format!("{:.0}", med(p, c, |r| r.1.rate * BIG as f64 / 1e6)),
            ]);
        }
        table.row(vec![
            "relayed ÷ local".to_owned(),
            connections.to_string(),
            format!("{:.2}", med(1, c, |r| r.0.rate) / med(0, c, |r| r.0.rate)),
            format!(
                "{:+.2}",
                med(1, c, |r| r.0.p50_us / 1e3) - med(0, c, |r| r.0.p50_us / 1e3)
            ),
            format!(
                "{:+.2}",
                med(1, c, |r| r.0.p99_us / 1e3) - med(0, c, |r| r.0.p99_us / 1e3)
            ),
            format!("{:.2}", med(1, c, |r| r.1.rate) / med(0, c, |r| r.1.rate)),
        ]);
    }
    report.say(format!(
        "Through the access proxy to a JupyterLab notebook on the control host's machine (local) \
         and on a joined machine (relayed), medians of {rounds} rounds of {seconds} s; MB/s is \
         10^6 bytes of 1 MiB answers a second; the ratio rows say relayed against local, and \
         what the relay adds to p50 and p99:"
    ));
    report.table(&table);
    report.finish()?;
    Ok(())
}

/// Rounds of (small, big) runs, by path (local, relayed) and by connections.
type Runs = Vec<Vec<Vec<(Wrk, Wrk)>>>;

struct Bench<'a> {
    api: &'a Api,
    access: &'a str,
    wrk: &'a Path,
    seconds: u64,
    rounds: usize,
}

impl Bench<'_> {
    /// A notebook placed on the joined machine beside `local`, both opened, and the rounds;
    /// every notebook made is in `made`, for the caller to delete whatever happens.
    fn measure(
        &self,
        rt: &tokio::runtime::Runtime,
        local: &str,
        remote_machine: &str,
        made: &mut Vec<String>,
    ) -> anyhow::Result<Runs> {
        // Placement takes the first machine with room: the control host's until it is full.
        let mut relayed = None;
        for n in 0..4 {
            let id = rt.block_on(running(self.api, &format!("nb{n}")))?;
            made.push(id.clone());
            let path = format!("/v1/workloads/{id}");
            let (_, w) = rt.block_on(self.api.send(Method::GET, &path, None))?;
            if w["machine_id"].as_str() == Some(remote_machine) {
                relayed = Some(id);
                break;
            }
        }
        let relayed = relayed.context("no notebook was placed on the joined machine")?;
        let paths = [
            ("local", rt.block_on(open(self.api, self.access, local))?),
            (
                "relayed",
                rt.block_on(open(self.api, self.access, &relayed))?,
            ),
        ];
        let url = |path: &str| format!("http://{}{path}", self.access);
        let mut runs: Runs = vec![vec![Vec::new(); CONNECTIONS.len()]; 2];
        for round in 0..self.rounds {
            for (c, &connections) in CONNECTIONS.iter().enumerate() {
                for (p, (name, opened)) in paths.iter().enumerate() {
                    let run = |path: &str, what: &str| {
                        Wrk::run(
                            self.wrk,
                            &opened.headers,
                            &url(path),
                            connections,
                            self.seconds,
                        )
                        .with_context(|| format!("{name}, {what}, {connections} connections"))
                    };
                    let small = run("/api/status", "small")?;
                    let big = run(opened.path, "1 MiB")?;
                    eprintln!(
                        "{name}, {connections} connections: {:.0} req/s, {:.0} MB/s",
                        small.rate,
                        big.rate * BIG as f64 / 1e6
                    );
                    runs[p][c].push((small, big));
                }
            }
            eprintln!("round {} of {} done", round + 1, self.rounds);
        }
        Ok(runs)
    }
}

/// A new notebook of this bench's, once running.
async fn running(api: &Api, name: &str) -> anyhow::Result<String> {
    let id = api.create(name).await?;
    let deadline = Instant::now() + WAIT;
    loop {
        let (_, w) = api
            .send(Method::GET, &format!("/v1/workloads/{id}"), None)
            .await?;
        match w["state"].as_str() {
            Some("running") => return Ok(id),
            Some("failed") => anyhow::bail!("{id} failed: {w}"),
            _ => {}
        }
        anyhow::ensure!(Instant::now() < deadline, "{id} never ran: {w}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Joins a machine with a fresh enrolment token (which only a person signed in may make), its
/// state in `state`; its ID.
async fn join(
    api: &Api,
    session: &support::Session,
    agents: &str,
    state: &Path,
) -> anyhow::Result<String> {
    let body = json!({ "name": "remote" });
    let path = "/v1/enrolment-tokens";
    let (status, made) = session.post(&api.http, &api.base, path, body).await?;
    anyhow::ensure!(status == 200, "enrolment answered {status}: {made}");
    let token = made["token"].as_str().context("a token")?;
    let controller = format!("https://{agents}");
    let env = [(
        "EINSORA_AGENT_STATE_DIR".to_owned(),
        state.display().to_string(),
    )];
    let args = [
        "agent",
        "join",
        "--token",
        token,
        "--controller",
        &controller,
    ];
    let out = einsora(&args, &env).stdin(Stdio::null()).output()?;
    anyhow::ensure!(
        out.status.success(),
        "join: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(std::fs::read_to_string(state.join("machine-id"))?
        .trim()
        .to_owned())
}

async fn online(api: &Api, machine: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + WAIT;
    loop {
        let (_, m) = api
            .send(Method::GET, &format!("/v1/machines/{machine}"), None)
            .await?;
        if m["status"] == "online" && m["drivers"].as_array().is_some_and(|d| !d.is_empty()) {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the joined machine never came online: {m}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Opens the notebook with a ticket, waits for JupyterLab to answer through the proxy, and
/// writes the 1 MiB file the big answers are.
async fn open(api: &Api, access: &str, id: &str) -> anyhow::Result<Opened> {
    let (host, cookie) = support::open_notebook(api, access, id).await?;
    let headers = vec![format!("Host: {host}"), format!("Cookie: {cookie}")];
    let deadline = Instant::now() + WAIT;
    loop {
        let (status, _) = get(access, &host, "/api/status", &headers[1..]).await?;
        if status == 200 {
            break;
        }
        anyhow::ensure!(Instant::now() < deadline, "/api/status answered {status}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let body = json!({ "type": "file", "format": "text", "content": "x".repeat(BIG) }).to_string();
    let status = put(access, &headers, "/api/contents/big.txt", &body).await?;
    anyhow::ensure!(
        status == 200 || status == 201,
        "writing the file answered {status}"
    );
    let (status, _) = get(access, &host, "/files/big.txt", &headers[1..]).await?;
    anyhow::ensure!(status == 200, "reading the file answered {status}");
    Ok(Opened {
        path: "/files/big.txt",
        headers,
    })
}

async fn put(access: &str, headers: &[String], path: &str, body: &str) -> anyhow::Result<u16> {
    let mut stream = tokio::net::TcpStream::connect(access).await?;
    let mut request = format!(
        "PUT {path} HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n",
        body.len()
    );
    for h in headers {
        request.push_str(&format!("{h}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await?;
    let text = String::from_utf8_lossy(&raw);
    text.split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("not an answer: {text}"))
}

/// Deletes the notebook and waits until it is gone: its container, and its disk from the
/// machine's `data` directories.
async fn delete(api: &Api, id: &str, data: &[std::path::PathBuf]) -> anyhow::Result<()> {
    let (status, answer) = api
        .send(Method::DELETE, &format!("/v1/workloads/{id}"), None)
        .await?;
    anyhow::ensure!(status < 300, "delete answered {status}: {answer}");
    let deadline = Instant::now() + WAIT;
    loop {
        let path = format!("/v1/workloads/{id}?include_deleted=true");
        let (_, w): (u16, Value) = api.send(Method::GET, &path, None).await?;
        if w["state"] == "deleted"
            && einsora_testkit::docker::containers_of(id).is_empty()
            && data.iter().all(|d| !d.join(id).exists())
        {
            return Ok(());
        }
        anyhow::ensure!(Instant::now() < deadline, "{id} never went");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
