//! A notebook from create to its first page: `einsora up` (release build, SQLite, dev auth, the
//! agent backend with the docker driver, every other setting its default) on a fresh data
//! directory; then, BENCH_RUNS times (default 10), one after another: create a JupyterLab notebook
//! through the API, poll it every 10 ms until `running`, ask for access, trade the ticket at the
//! proxy for the session cookie, and poll `GET /api/status` through the proxy every 10 ms until it
//! answers 200. Each notebook is deleted (its container gone) before the next.
//!
//! Where the time goes, from the same run: the container's start (`docker inspect`), the
//! moment JupyterLab first answered on its Unix socket (this bench polls the socket itself every
//! 10 ms with the workload's token), and the moment the API first said `running`.
//!
//! `cargo bench -p einsora --bench notebook` (BENCH_CANDIDATE names another build of `einsora`
//! to run instead). Needs a Docker engine and the images:
//! `images/dockerd start && images/build notebook`.

// A test harness: a failed unwrap is a failed test, and it reads its own environment.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod support;

use std::path::Path;
use std::process::Command;

use std::time::{Duration, Instant};

use anyhow::Context as _;
use hyper::Method;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

use einsora_testkit::bench::{Report, Table, median, setting};
use support::{Api, Http, get};

const POLL: Duration = Duration::from_millis(10);

/// Seconds from the create request to each step, for one notebook.
#[derive(Debug, Default, Clone)]
struct Steps {
    container_started: f64,
    socket_answers: f64,
    running: f64,
    first_200: f64,
}

fn main() -> anyhow::Result<()> {
    let runs: usize = setting("BENCH_RUNS", 10)?;
    support::up::require_notebook_image()?;
    let mut report = Report::start(
        "notebook",
        "Notebook create to first page",
        "cargo bench -p einsora --bench notebook",
    );
    let up = support::up::Up::start(&[])?;
    let (dir, http_addr, access_addr) = (&up.dir, up.http_addr.clone(), up.access_addr.clone());
    let password = up.password.clone();

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let all = rt.block_on(async {
        let http: Http = Client::builder(TokioExecutor::new()).build_http();
        let base = format!("http://{http_addr}");
        let token = support::token(&http, &base, &password).await?;
        let api = Api { http, base, token };
        let mut all = Vec::new();
        for run in 0..runs {
            let steps = once(&api, dir.path(), &access_addr, run).await?;
            eprintln!("run {}: first 200 at {:.2} s", run + 1, steps.first_200);
            all.push(steps);
        }
        anyhow::Ok(all)
    })?;
    let mut table = Table::new(
        &[
            "run",
            "container started",
            "JupyterLab answers on its socket",
            "API says running",
            "first 200 through the proxy",
        ],
        1,
    );
    for (i, s) in all.iter().enumerate() {
        table.row(vec![
            (i + 1).to_string(),
            format!("{:.2}", s.container_started),
            format!("{:.2}", s.socket_answers),
            format!("{:.2}", s.running),
            format!("{:.2}", s.first_200),
        ]);
    }
    let summary = |name: &str, of: fn(&[f64]) -> f64| {
        let column = |f: fn(&Steps) -> f64| {
            let mut v: Vec<f64> = all.iter().map(f).collect();
            v.sort_by(f64::total_cmp);
            format!("{:.2}", of(&v))
        };
        vec![
            name.to_owned(),
            column(|s| s.container_started),
            column(|s| s.socket_answers),
            column(|s| s.running),
            column(|s| s.first_200),
        ]
    };
    table.row(summary("**median**", |v| median(v.iter().copied())));
    table.row(summary("min", |v| v.first().copied().unwrap_or(f64::NAN)));
    table.row(summary("max", |v| v.last().copied().unwrap_or(f64::NAN)));
    report.say(format!(
        "Seconds from the create request, {runs} notebooks one after another:"
    ));
    report.table(&table);
    report.finish()?;
    Ok(())
}

async fn once(api: &Api, dir: &Path, access: &str, run: usize) -> anyhow::Result<Steps> {
    let started = Instant::now();
    let wall = OffsetDateTime::now_utc();
    let id = api.create(&format!("nb{run}")).await?;
    let state = einsora_core::run_dirs::default_state_dir(dir);
    let socket = tokio::spawn(socket_answers(state, id.clone(), started));
    let deadline = started + Duration::from_secs(120);
    api.wait_running(&id, POLL, deadline).await?;
    let running = started.elapsed();
    let (host, cookie) = support::open_notebook(api, access, &id).await?;
    loop {
        let (status, _) = get(access, &host, "/api/status", &[format!("Cookie: {cookie}")]).await?;
        if status == 200 {
            break;
        }
        anyhow::ensure!(Instant::now() < deadline, "/api/status answered {status}");
        tokio::time::sleep(POLL).await;
    }
    let first_200 = started.elapsed();
    let socket = socket.await??;
    let container_started = container_started(&id)? - wall;

    let (status, _) = api
        .send(Method::DELETE, &format!("/v1/workloads/{id}"), None)
        .await?;
    anyhow::ensure!(status < 300, "delete answered {status}");
    loop {
        let path = format!("/v1/workloads/{id}?include_deleted=true");
        let (_, w) = api.send(Method::GET, &path, None).await?;
        if w["state"] == "deleted" && einsora_testkit::docker::containers_of(&id).is_empty() {
            break;
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(180),
            "{id} never went"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(Steps {
        container_started: container_started.as_seconds_f64(),
        socket_answers: socket.as_secs_f64(),
        running: running.as_secs_f64(),
        first_200: first_200.as_secs_f64(),
    })
}

/// When JupyterLab first answers `/api/status` on its socket with its token (the one the agent
/// keeps for it, outside what the workload can write).
async fn socket_answers(
    state: std::path::PathBuf,
    id: String,
    started: Instant,
) -> anyhow::Result<Duration> {
    let deadline = started + Duration::from_secs(120);
    let token_file = state.join("secrets").join(&id).join("token");
    let socket =
        einsora_core::run_dirs::run_dir(&state, &id).join(einsora_core::run_dirs::NOTEBOOK_SOCKET);
    loop {
        if let Ok(token) = std::fs::read_to_string(&token_file)
            && let Ok(mut stream) = UnixStream::connect(&socket).await
        {
            let token = token.lines().next().unwrap_or_default();
            let request = format!(
                "GET /api/status HTTP/1.1\r\nHost: localhost\r\nAuthorization: token {token}\r\n\
                 Connection: close\r\n\r\n"
            );
            let mut answer = Vec::new();
            if stream.write_all(request.as_bytes()).await.is_ok()
                && stream.read_to_end(&mut answer).await.is_ok()
                && answer.starts_with(b"HTTP/1.1 200")
            {
                return Ok(started.elapsed());
            }
        }
        anyhow::ensure!(Instant::now() < deadline, "the socket never answered");
        tokio::time::sleep(POLL).await;
    }
}

/// When the workload's container started, by the engine's clock (this machine's).
fn container_started(id: &str) -> anyhow::Result<OffsetDateTime> {
    let ids = einsora_testkit::docker::containers_of(id);
    let container = ids.first().context("no container")?;
    let out = Command::new("docker")
        .args(["inspect", "--format", "{{.State.StartedAt}}", container])
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    OffsetDateTime::parse(&text, &Rfc3339).with_context(|| format!("StartedAt {text:?}"))
}
