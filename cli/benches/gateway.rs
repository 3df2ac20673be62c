//! The inference gateway's overhead against the engine's socket direct (issue 20), with a mock
//! engine on a Unix socket:
//! - small non-streamed chat completions at a fixed rate (open loop, `support::open_loop`,
//!   BENCH_RATE, default 1,000 a second): p50, p99 and p99.9 through the gateway and direct, and
//!   what the gateway adds (targets: ≤ 0.2 ms at p50, ≤ 1 ms at p99);
//! - streamed chat completions at 256 and 1,000 concurrent streams (BENCH_STREAMS), a token
//!   every 20 ms, 50 tokens each: the time to first token (the gateway's p99 at most 2 ms above
//!   direct's) and the tokens a second the clients receive (at least 0.95× direct's);
//! - 10,000 held streams through the gateway (BENCH_HELD), a token a second: none refused or
//!   broken, every one ended as its engine ended it, the proxy still up, and its RSS per stream.
//!
//! The engine is a hyper HTTP/1.1 server in this process on a Unix socket, shaped as llama.cpp
//! answers: `POST /v1/chat/completions` whole (a small JSON completion with `usage`), or streamed
//! (SSE chunks, the first token at once and one every `bench_token_ms` after it, up to the
//! request's `max_tokens`, then the finish chunk, a usage chunk when `stream_options.include_usage`
//! asks, and `data: [DONE]`; each chunk with llama.cpp's `timings` when `timings_per_token`
//! asks). Clients ask for usage as the OpenAI SDKs do when told to (`include_usage`), never for
//! timings: the gateway asks the engine for them and takes them out of every chunk, which is the
//! product's path for such clients. `direct` is the same client on the engine's socket with the
//! engine's own key; `gateway` is the one base URL (`<EINSORA_ACCESS_URL>/v1/chat/completions`,
//! routed by `model`) of the release binary's `einsora access` with `TOKIO_WORKER_THREADS=1`,
//! an API token, and the access tests' fakes (`services/access/tests/proxy/fakes.rs`) as the api
//! and the controller over mutual TLS from this process: each request authenticated with the
//! api (as the product does, every request, and every 2 s while a stream runs), the tenant's
//! served models asked of the controller (kept a second), a place in the endpoint's queue (the
//! endpoint's slots and `EINSORA_ENDPOINT_CONCURRENCY` set above every run's concurrency, so
//! none waits or is refused), a connection to the engine's socket kept from earlier requests,
//! and the usage counted.
//!
//! Every row is the median of BENCH_ROUNDS rounds; in each round direct and the gateway run
//! each test in turn, the order rotating by round, so both share the machine's load, and the
//! gateway's additions are each round's pair's differences (their median). The held streams
//! run on a fresh proxy each round, after the others.
//!
//! `cargo bench -p einsora --bench gateway` (BENCH_SECONDS per run, default 10; BENCH_ROUNDS,
//! default 3; BENCH_RATE, default 1000; BENCH_STREAMS, default "256,1000"; BENCH_TOKENS,
//! default 50; BENCH_TOKEN_MS, default 20; BENCH_HELD, default 10000, 0 to skip). Raises the
//! open-files limit, for itself and the proxy it starts, to two a stream and [`SPARE_FILES`]
//! more (the soft limit to the hard one, and the hard one where it may: root with
//! CAP_SYS_RESOURCE); where it can't, it holds as many streams as the limit allows, in hundreds,
//! and the report says so.

// A test harness: a failed unwrap is a failed test, and it reads its own environment.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod support;

#[path = "../../services/access/tests/proxy/fakes.rs"]
#[allow(dead_code)]
mod fakes;

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use einsora_proto::common::v1::WorkloadKind;
use einsora_runtime::grpc::{self, InternalTls};
use einsora_runtime::pki::{Role, RoleKind};
use einsora_runtime::shutdown::Shutdown;
use einsora_testkit::bench::{Report, Table, count, median, quantile, setting};
use einsora_testkit::spawn::Spawned;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Bytes, Frame, Incoming};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{AUTHORIZATION, CACHE_CONTROL, CONTENT_TYPE, HOST};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;
use tokio_stream::wrappers::ReceiverStream;

use support::{free_addr, open_loop, probe};

/// The name the endpoint serves its model under (the one base URL routes by it).
const MODEL: &str = "bench-model";
/// The engine's own key: the proxy sends it; direct clients send it too.
const WORKER_KEY: &str = "workerkey-bench";
const ENGINE_AUTHORIZATION: &str = "Bearer workerkey-bench";
/// The API token the fake api knows as alice's.
const API_TOKEN: &str = "tsk_bench";
/// What each streamed token's chunk says: counted by the clients, wherever it lies in the
/// chunk (the gateway rewrites chunks with serde_json, which may order keys otherwise).
const TOKEN_MARK: &[u8] = br#""content":" tok""#;
const WHOLE_REQUEST: &str = r#"{"model":"bench-model","messages":[{"role":"user","content":"Say hello."}],"max_tokens":16}"#;
/// The mock's whole answer, as llama.cpp's, with usage.
const WHOLE_ANSWER: &str = r#"{"id":"chatcmpl-bench","object":"chat.completion","created":1,"model":"bench-model","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there"},"finish_reason":"stop"}],"usage":{"prompt_tokens":11,"completion_tokens":2,"total_tokens":13}}"#;
/// Prompt tokens the mock says every request had.
const PROMPT_TOKENS: u64 = 11;
/// Streams opened at once while the held streams are opened.
const OPENING: usize = 256;
/// Open files kept spare beside two a stream (each process's own, and the proxy's while it
/// dials the engine's socket: `workload_socket` opens its path a component at a time).
const SPARE_FILES: u64 = 1024;
/// Requests sent one after another before each latency run (connections, the proxy's caches).
const WARM: usize = 100;

/// The two paths compared.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Direct,
    Gateway,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Direct => "direct",
            Side::Gateway => "gateway",
        }
    }
}

const SIDES: [Side; 2] = [Side::Direct, Side::Gateway];

struct Settings {
    seconds: u64,
    rounds: u64,
    rate: f64,
    streams: Vec<usize>,
    tokens: u64,
    token_ms: u64,
    held: usize,
}

fn main() -> anyhow::Result<()> {
    let streams: String = setting("BENCH_STREAMS", "256,1000".to_owned())?;
    let streams = streams
        .split(',')
        .map(|s| s.trim().parse::<usize>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| {
            anyhow::anyhow!("BENCH_STREAMS={streams:?}: not counts separated by commas")
        })?;
    let mut s = Settings {
        seconds: setting("BENCH_SECONDS", 10)?,
        rounds: setting("BENCH_ROUNDS", 3)?,
        rate: setting("BENCH_RATE", 1000.0)?,
        streams,
        tokens: setting("BENCH_TOKENS", 50)?,
        token_ms: setting("BENCH_TOKEN_MS", 20)?,
        held: setting("BENCH_HELD", 10_000)?,
    };
    anyhow::ensure!(
        s.tokens > 0 && s.token_ms > 0,
        "BENCH_TOKENS and BENCH_TOKEN_MS > 0"
    );
    let mut report = Report::start(
        "gateway",
        "Inference gateway overhead",
        "cargo bench -p einsora --bench gateway",
    );
    // Both ends of every stream are in this process (the client's connection and the engine's)
    // and both in the proxy: two open files a stream each, and room besides.
    let most = s.streams.iter().copied().max().unwrap_or(0).max(s.held);
    let limit = raise_open_files(2 * most as u64 + SPARE_FILES);
    let room = limit.map_or(usize::MAX, |l| {
        usize::try_from(l.saturating_sub(SPARE_FILES) / 2).unwrap_or(usize::MAX)
    });
    let streams_most = s.streams.iter().copied().max().unwrap_or(0);
    anyhow::ensure!(
        streams_most <= room,
        "{streams_most} streams need {} open files and the limit is {limit:?}: raise the hard \
         limit (ulimit -Hn) or set BENCH_STREAMS lower",
        2 * streams_most as u64 + SPARE_FILES
    );
    let asked = s.held;
    if s.held > room {
        // The most the limit allows, in hundreds.
        s.held = room / 100 * 100;
        eprintln!(
            "{asked} held streams need more open files than the limit {limit:?} allows: {}",
            s.held
        );
    }
    let open_files = limit.map_or_else(|| "unlimited".to_owned(), count);
    let most = s.streams.iter().copied().max().unwrap_or(0).max(s.held);

    let dir = tempfile::tempdir()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    // Above any run's concurrency: no request waits in the endpoint's queue.
    let slots = most + 1024;
    let world = rt.block_on(World::start(dir.path(), slots))?;
    let length = Duration::from_secs(s.seconds);

    let n = SIDES.len();
    let mut latency: Vec<Vec<Latency>> = vec![vec![]; n];
    // Per stream count, per path: one run per round.
    let mut streamed: Vec<Vec<Vec<Streaming>>> = vec![vec![vec![]; n]; s.streams.len()];
    let mut held: Vec<Held> = Vec::new();
    for round in 0..s.rounds as usize {
        eprintln!("round {}/{}", round + 1, s.rounds);
        let proxy = Proxy::start(&world, &rt, slots)?;
        let targets = [world.direct(), proxy.target()];
        let pids = [None, Some(proxy.pid)];
        // Interleaved: every test runs each path in turn, the order rotating by round.
        let order: Vec<usize> = (0..n).map(|i| (i + round) % n).collect();
        for &p in &order {
            let run = rt.block_on(latency_run(&targets[p], s.rate, length, pids[p]))?;
            latency[p].push(run);
        }
        for (c, &streams) in s.streams.iter().enumerate() {
            for &p in &order {
                eprintln!("  {streams} streams, {}", SIDES[p].name());
                let run = rt.block_on(streaming_run(&targets[p], streams, &s, pids[p]))?;
                streamed[c][p].push(run);
            }
        }
        drop(proxy);
        if s.held > 0 {
            // A fresh proxy, so what the runs above grew isn't counted.
            eprintln!("  {} held streams", s.held);
            let proxy = Proxy::start(&world, &rt, slots)?;
            held.push(rt.block_on(held_run(&world, &proxy, s.held, length))?);
        }
    }
    let (rounds, seconds, rate) = (s.rounds, s.seconds, s.rate);

    // Small chat completions at a fixed rate.
    let mut table = Table::new(
        &[
            "path",
            "offered /s",
            "sent /s",
            "p50 ms",
            "p99 ms",
            "p99.9 ms",
            "failed",
            "proxy CPU µs/req",
        ],
        1,
    );
    for (p, path) in SIDES.iter().enumerate() {
        let runs = &latency[p];
        let col = |f: fn(&Latency) -> f64| median(runs.iter().map(f));
        let cpu = match path {
            Side::Direct => String::new(),
            Side::Gateway => format!("{:.1}", col(|r| r.cpu_us)),
        };
        table.row(vec![
            path.name().to_owned(),
            format!("{rate:.0}"),
            format!("{:.0}", col(|r| r.sent_per_s)),
            format!("{:.3}", col(|r| r.p50)),
            format!("{:.3}", col(|r| r.p99)),
            format!("{:.3}", col(|r| r.p999)),
            format!("{:.0}", col(|r| r.failed as f64)),
            cpu,
        ]);
    }
    report.say(format!(
        "Small chat completions, not streamed: open loop at {rate:.0} requests a second, latency \
         from each request's send, kept-alive connections; medians of {rounds} rounds of \
         {seconds} s:"
    ));
    report.table(&table);

    let (direct, gateway) = (&latency[0], &latency[1]);
    let added = |f: fn(&Latency) -> f64| -> Vec<f64> {
        direct
            .iter()
            .zip(gateway)
            .map(|(d, g)| f(g) - f(d))
            .collect()
    };
    let mut table = Table::new(&["latency", "added ms", "target", "each round ms"], 1);
    for (name, target, diffs) in [
        ("p50", "≤ 0.2 ms", added(|r| r.p50)),
        ("p99", "≤ 1 ms", added(|r| r.p99)),
    ] {
        table.row(vec![
            name.to_owned(),
            format!("{:.3}", median(diffs.iter().copied())),
            target.to_owned(),
            joined(&diffs, 3),
        ]);
    }
    report.say(format!(
        "What the gateway adds at {rate:.0} requests a second (gateway − direct, each round's \
         pair; the median of rounds):"
    ));
    report.table(&table);

    // Streams.
    // A stream's tokens come over (tokens − 1) intervals (the first at once): the most a
    // client can receive, its streams back to back.
    let pace = s.tokens as f64 * 1000.0 / (s.token_ms * s.tokens.saturating_sub(1).max(1)) as f64;
    let mut table = Table::new(
        &[
            "streams",
            "path",
            "TTFT p50 ms",
            "TTFT p99 ms",
            "tokens/s",
            "engine's pace tokens/s",
            "streams measured",
            "failed",
            "proxy CPU %",
        ],
        2,
    );
    for (c, &streams) in s.streams.iter().enumerate() {
        for (p, path) in SIDES.iter().enumerate() {
            let runs = &streamed[c][p];
            let col = |f: fn(&Streaming) -> f64| median(runs.iter().map(f));
            let cpu = match path {
                Side::Direct => String::new(),
                Side::Gateway => format!("{:.0}", col(|r| r.cpu_pct)),
            };
            table.row(vec![
                count(streams as u64),
                path.name().to_owned(),
                format!("{:.2}", col(|r| r.ttft_p50)),
                format!("{:.2}", col(|r| r.ttft_p99)),
                format!("{:.0}", col(|r| r.tokens_per_s)),
                format!("{:.0}", streams as f64 * pace),
                format!("{:.0}", col(|r| r.measured as f64)),
                format!("{:.0}", col(|r| r.failed as f64)),
                cpu,
            ]);
        }
    }
    report.say(format!(
        "Streamed chat completions, {} tokens each, one every {} ms (the first at once), each \
         stream's client starting the next as one ends on its kept-alive connection, the starts \
         spread over one stream's length; time to first token (TTFT) from each request's send, \
         of the streams sent in the {seconds} s after that ramp, tokens a second received in \
         those {seconds} s; medians of {rounds} rounds:",
        s.tokens, s.token_ms
    ));
    report.table(&table);

    let mut table = Table::new(
        &[
            "streams",
            "added TTFT p99 ms",
            "target",
            "tokens/s, gateway ÷ direct",
            "target",
            "each round: added ms; ratio",
        ],
        1,
    );
    for (c, &streams) in s.streams.iter().enumerate() {
        let (direct, gateway) = (&streamed[c][0], &streamed[c][1]);
        let pairs: Vec<(f64, f64)> = direct
            .iter()
            .zip(gateway)
            .map(|(d, g)| (g.ttft_p99 - d.ttft_p99, g.tokens_per_s / d.tokens_per_s))
            .collect();
        let each: Vec<String> = pairs
            .iter()
            .map(|(a, r)| format!("{a:.2}; {r:.3}"))
            .collect();
        table.row(vec![
            count(streams as u64),
            format!("{:.2}", median(pairs.iter().map(|p| p.0))),
            "≤ 2 ms".to_owned(),
            format!("{:.3}", median(pairs.iter().map(|p| p.1))),
            "≥ 0.95".to_owned(),
            each.join(" / "),
        ]);
    }
    report.say(
        "What the gateway adds to streams (gateway against direct, each round's pair; the \
         median of rounds):",
    );
    report.table(&table);

    if !held.is_empty() {
        let mut table = Table::new(
            &[
                "streams",
                "opened in s",
                "RSS before MB",
                "RSS held MB",
                "RSS peak MB",
                "per stream KiB",
                "served, worst round",
                "proxy up after",
                "each round KiB",
            ],
            0,
        );
        let col = |f: fn(&Held) -> f64| median(held.iter().map(f));
        let worst = held.iter().map(|h| h.served).min().unwrap_or(0);
        let down = held.iter().filter(|h| !h.up_after).count();
        let up = match down {
            0 => "yes".to_owned(),
            d => format!("no, {d} of {rounds} rounds"),
        };
        let per: Vec<f64> = held.iter().map(|h| h.per_kib).collect();
        table.row(vec![
            count(s.held as u64),
            format!("{:.1}", col(|h| h.opened_s)),
            format!("{:.1}", col(|h| h.before_kib / 1024.0)),
            format!("{:.1}", col(|h| h.held_kib / 1024.0)),
            format!("{:.1}", col(|h| h.peak_kib / 1024.0)),
            format!("{:.1}", col(|h| h.per_kib)),
            format!("{} of {}", count(worst as u64), count(s.held as u64)),
            up,
            joined(&per, 1),
        ]);
        report.say(format!(
            "{} streams held through the gateway at once, a token a second each (a fresh proxy; \
             its RSS before the first was opened, 2 s after the last was, and the most seen while \
             they were held {seconds} s more); served: streams answered 200 whose every token, \
             usage chunk and `[DONE]` arrived once the engine ended them; medians of {rounds} \
             rounds:",
            count(s.held as u64)
        ));
        report.table(&table);
    }
    if s.held < asked {
        report.say(format!(
            "Held streams: {} rather than {}: each holds two open files in the proxy (the \
             client's connection and the engine's) and two in this process, and the open-files \
             limit here is {open_files}, which only root with CAP_SYS_RESOURCE may raise.",
            count(s.held as u64),
            count(asked as u64)
        ));
    }
    report.say(format!(
        "Targets (issue 20): the gateway adds ≤ 0.2 ms at p50 and ≤ 1 ms at p99 at 1,000 requests \
         a second; ≤ 2 ms to the time to first token's p99 and ≥ 0.95× direct's tokens a second \
         at 256 and 1,000 streams; 10,000 held streams without a crash, all served. Open-files \
         limit {open_files} (this process and the proxy)."
    ));
    drop(world);
    report.finish()?;
    Ok(())
}

/// Values joined with " / ", `places` decimals each.
fn joined(values: &[f64], places: usize) -> String {
    let each: Vec<String> = values.iter().map(|v| format!("{v:.places$}")).collect();
    each.join(" / ")
}

/// Raises this process's open-files limit (inherited by the proxy it starts) to at least
/// `need` where it may: the soft one to the hard one, and the hard one too where it is below
/// and this process may (root with CAP_SYS_RESOURCE). The soft limit it ends with (`None`:
/// unlimited).
fn raise_open_files(need: u64) -> Option<u64> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let enough = |l: Option<u64>| l.is_none_or(|l| l >= need);
    let hard = getrlimit(Resource::Nofile).maximum;
    let raised = if enough(hard) {
        hard
    } else {
        let ceiling = std::fs::read_to_string("/proc/sys/fs/nr_open")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(need);
        Some(need.min(ceiling))
    };
    let to = |l: Option<u64>| Rlimit {
        current: l,
        maximum: l,
    };
    if setrlimit(Resource::Nofile, to(raised)).is_err() {
        // Not allowed to raise the hard limit: the soft one up to it.
        let _ = setrlimit(Resource::Nofile, to(hard));
    }
    getrlimit(Resource::Nofile).current
}

/// The engine, the fakes and the endpoint, served from this process for the whole run.
struct World {
    dir: PathBuf,
    socket: PathBuf,
    engine: Arc<Engine>,
    api_addr: String,
    controller_addr: String,
    shutdown: Shutdown,
}

impl World {
    async fn start(dir: &Path, slots: usize) -> anyhow::Result<World> {
        let settings = einsora_testkit::settings_in(dir, &[]);
        let tls = InternalTls::from_settings(&settings)?;
        tls.init()?;
        let shutdown = Shutdown::new();
        let api = Arc::new(fakes::Api::default());
        let controller = Arc::new(fakes::Controller::default());
        let serve = async |role: Role, routes: tonic::service::Routes| -> anyhow::Result<String> {
            let listener = TcpListener::bind("127.0.0.1:0").await?;
            let addr = listener.local_addr()?.to_string();
            let server_tls = tls.server(role, &[RoleKind::Access])?;
            tokio::spawn(grpc::serve(listener, server_tls, routes, shutdown.clone()));
            Ok(addr)
        };
        let api_addr = serve(Role::Api, fakes::api_routes(&api)).await?;
        let controller_addr =
            serve(Role::Controller, fakes::controller_routes(&controller)).await?;

        let socket = dir.join("engine.sock");
        let engine = Arc::new(Engine::default());
        let listener = UnixListener::bind(&socket)?;
        let e = Arc::clone(&engine);
        tokio::spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((stream, _)) => {
                        tokio::spawn(engine_connection(stream, Arc::clone(&e)));
                    }
                    // Out of file descriptors, say: the bench's counts say so; the engine
                    // goes on.
                    Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                }
            }
        });

        // A running endpoint of alice's on the engine's socket, serving MODEL, with slots
        // enough for every run; her API token.
        let endpoint = uuid::Uuid::now_v7().to_string();
        let socket_text = socket
            .to_str()
            .ok_or_else(|| anyhow::anyhow!("not a UTF-8 path"))?;
        controller.run(
            &endpoint,
            &fakes::ALICE,
            WorkloadKind::Endpoint,
            socket_text,
            WORKER_KEY,
        );
        controller.change(&endpoint, |t| {
            t.slots = u32::try_from(slots).unwrap_or(u32::MAX);
        });
        controller.serve_as(&endpoint, MODEL, false);
        api.add_token(API_TOKEN, fakes::ALICE);
        Ok(World {
            dir: dir.to_owned(),
            socket,
            engine,
            api_addr,
            controller_addr,
            shutdown,
        })
    }

    /// The engine's socket, as a client on the host reaches it.
    fn direct(&self) -> Arc<Target> {
        Arc::new(Target {
            to: To::Unix(self.socket.clone()),
            host: "localhost".to_owned(),
            authorization: ENGINE_AUTHORIZATION.to_owned(),
        })
    }
}

impl Drop for World {
    fn drop(&mut self) {
        self.shutdown.trigger();
    }
}

/// The mock engine's state: whether held streams are to end now.
#[derive(Default)]
struct Engine {
    released: AtomicBool,
}

async fn engine_connection(stream: UnixStream, engine: Arc<Engine>) {
    let service = service_fn(move |request| answer(request, Arc::clone(&engine)));
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

type Answer = Response<UnsyncBoxBody<Bytes, Infallible>>;

fn whole(status: StatusCode, content_type: &'static str, body: Bytes) -> Answer {
    let answer = Response::builder()
        .status(status)
        .header(CONTENT_TYPE, content_type)
        .body(Full::new(body).boxed_unsync());
    answer.expect("a valid answer")
}

/// As llama.cpp answers `POST /v1/chat/completions` with the engine's key; anything else is
/// refused.
async fn answer(request: Request<Incoming>, engine: Arc<Engine>) -> Result<Answer, Infallible> {
    let authorized = request
        .headers()
        .get(AUTHORIZATION)
        .is_some_and(|v| v.as_bytes() == ENGINE_AUTHORIZATION.as_bytes());
    let routed = request.method() == Method::POST && request.uri().path() == "/v1/chat/completions";
    let body = match request.into_body().collect().await {
        Ok(body) => body.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let refuse = |status, message: &'static str| {
        Ok(whole(
            status,
            "application/json",
            Bytes::from(format!(r#"{{"error":{{"message":"{message}"}}}}"#)),
        ))
    };
    if !authorized {
        return refuse(StatusCode::UNAUTHORIZED, "not the engine's key");
    }
    if !routed {
        return refuse(StatusCode::NOT_FOUND, "no such route");
    }
    let Ok(sent) = serde_json::from_slice::<Value>(&body) else {
        return refuse(StatusCode::BAD_REQUEST, "not JSON");
    };
    if sent["stream"] != true {
        return Ok(whole(
            StatusCode::OK,
            "application/json",
            Bytes::from_static(WHOLE_ANSWER.as_bytes()),
        ));
    }
    let plan = Plan {
        tokens: sent["max_tokens"].as_u64().unwrap_or(16).max(1),
        every: Duration::from_millis(sent["bench_token_ms"].as_u64().unwrap_or(20)),
        hold: sent["bench_hold"] == true,
        usage: sent["stream_options"]["include_usage"] == true,
        timings: sent["timings_per_token"] == true,
    };
    let (tx, rx) = mpsc::channel(4);
    tokio::spawn(plan.run(tx, engine));
    let answer = Response::builder()
        .header(CONTENT_TYPE, "text/event-stream")
        .header(CACHE_CONTROL, "no-cache")
        .body(StreamBody::new(ReceiverStream::new(rx)).boxed_unsync());
    Ok(answer.expect("a valid answer"))
}

/// One streamed answer: its tokens at their pace, then its end.
struct Plan {
    tokens: u64,
    every: Duration,
    /// Held: tokens until the engine is released (or `tokens` of them).
    hold: bool,
    usage: bool,
    timings: bool,
}

type Frames = mpsc::Sender<Result<Frame<Bytes>, Infallible>>;

impl Plan {
    /// Sends the first token at once and the next every `every`; stops if the client leaves.
    async fn run(self, tx: Frames, engine: Arc<Engine>) {
        let start = tokio::time::Instant::now();
        let mut sent = 0;
        loop {
            sent += 1;
            if tx.send(Ok(Frame::data(self.token(sent)))).await.is_err() {
                return;
            }
            let ended =
                sent >= self.tokens || (self.hold && engine.released.load(Ordering::SeqCst));
            if ended {
                break;
            }
            let next = u32::try_from(sent).unwrap_or(u32::MAX);
            tokio::time::sleep_until(start + self.every * next).await;
        }
        let _ = tx.send(Ok(Frame::data(self.end(sent)))).await;
    }

    fn timings(&self, predicted: u64) -> String {
        if self.timings {
            format!(
                r#","timings":{{"cache_n":0,"prompt_n":{PROMPT_TOKENS},"predicted_n":{predicted}}}"#
            )
        } else {
            String::new()
        }
    }

    /// The `n`th token's chunk (the first with the assistant's role).
    fn token(&self, n: u64) -> Bytes {
        let role = if n == 1 { r#""role":"assistant","# } else { "" };
        Bytes::from(format!(
            "data: {{\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1,\
             \"model\":\"{MODEL}\",\"choices\":[{{\"index\":0,\"delta\":{{{role}\"content\":\" tok\"}},\
             \"finish_reason\":null}}]{}}}\n\n",
            self.timings(n)
        ))
    }

    /// The finish chunk, the usage chunk when asked, `[DONE]`.
    fn end(&self, tokens: u64) -> Bytes {
        let mut end = format!(
            "data: {{\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1,\
             \"model\":\"{MODEL}\",\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\
             \"stop\"}}]{}}}\n\n",
            self.timings(tokens)
        );
        if self.usage {
            end += &format!(
                "data: {{\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\
                 \"created\":1,\"model\":\"{MODEL}\",\"choices\":[],\"usage\":{{\"prompt_tokens\":\
                 {PROMPT_TOKENS},\"completion_tokens\":{tokens},\"total_tokens\":{}}}}}\n\n",
                PROMPT_TOKENS + tokens
            );
        }
        end += "data: [DONE]\n\n";
        Bytes::from(end)
    }
}

/// Where a client sends: the engine's socket or the proxy's port, with the Host and the key
/// each takes.
struct Target {
    to: To,
    host: String,
    authorization: String,
}

enum To {
    Unix(PathBuf),
    Tcp(String),
}

type Sender = SendRequest<Full<Bytes>>;

impl Target {
    /// A new HTTP/1.1 connection.
    async fn connect(&self) -> anyhow::Result<Sender> {
        match &self.to {
            To::Unix(path) => handshake(UnixStream::connect(path).await?).await,
            To::Tcp(addr) => {
                let stream = TcpStream::connect(addr).await?;
                stream.set_nodelay(true)?;
                handshake(stream).await
            }
        }
    }

    fn request(&self, body: &Bytes) -> Request<Full<Bytes>> {
        let request = Request::post("/v1/chat/completions")
            .header(HOST, &self.host)
            .header(AUTHORIZATION, &self.authorization)
            .header(CONTENT_TYPE, "application/json")
            .body(Full::new(body.clone()));
        request.expect("a valid request")
    }
}

async fn handshake<S>(stream: S) -> anyhow::Result<Sender>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(sender)
}

/// Kept-alive connections to a target, one request on each at a time.
struct Pool {
    target: Arc<Target>,
    idle: Mutex<Vec<Sender>>,
}

impl Pool {
    fn new(target: &Arc<Target>) -> Arc<Pool> {
        Arc::new(Pool {
            target: Arc::clone(target),
            idle: Mutex::new(Vec::new()),
        })
    }

    /// A whole answer to `body`: its status and body.
    async fn send(&self, body: &Bytes) -> anyhow::Result<(StatusCode, Bytes)> {
        let mut sender = loop {
            let kept = self.idle.lock().unwrap().pop();
            match kept {
                Some(mut s) => {
                    if !s.is_closed() && s.ready().await.is_ok() {
                        break s;
                    }
                }
                None => break self.target.connect().await?,
            }
        };
        let answer = sender.send_request(self.target.request(body)).await?;
        let status = answer.status();
        let bytes = answer.into_body().collect().await?.to_bytes();
        self.idle.lock().unwrap().push(sender);
        Ok((status, bytes))
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// `einsora access` on one worker, in front of the engine for the fake controller's endpoint.
struct Proxy {
    addr: String,
    port: String,
    pid: u32,
    /// Stopped with SIGTERM when the proxy is dropped.
    _child: Spawned,
}

impl Proxy {
    fn start(world: &World, rt: &tokio::runtime::Runtime, slots: usize) -> anyhow::Result<Proxy> {
        let addr = free_addr();
        let port = addr
            .rsplit_once(':')
            .map(|(_, p)| p.to_owned())
            .unwrap_or_default();
        let env = [
            ("EINSORA_DATA_DIR", world.dir.display().to_string()),
            ("EINSORA_ACCESS_ADDR", addr.clone()),
            ("EINSORA_ACCESS_URL", format!("http://localhost:{port}")),
            ("EINSORA_API_ADDR", world.api_addr.clone()),
            ("EINSORA_CONTROLLER_ADDR", world.controller_addr.clone()),
            ("TOKIO_WORKER_THREADS", "1".to_owned()),
            // Every held stream is a connection; none is to wait for a place in the queue.
            ("EINSORA_HTTP_MAX_CONNECTIONS", slots.to_string()),
            ("EINSORA_ENDPOINT_CONCURRENCY", slots.to_string()),
        ];
        let mut cmd = Command::new(support::EINSORA);
        cmd.arg("access")
            .envs(env)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        let child = support::spawn(cmd)?;
        let pid = child.pid();
        let proxy = Proxy {
            addr,
            port,
            pid,
            _child: child,
        };
        // Up once a chat completion comes back through it (its api and controller dialled).
        let pool = Pool::new(&proxy.target());
        let body = Bytes::from_static(WHOLE_REQUEST.as_bytes());
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let answered = rt.block_on(pool.send(&body));
            match answered {
                Ok((StatusCode::OK, _)) => break,
                _ if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
                Ok((status, body)) => anyhow::bail!(
                    "the gateway answered {status}: {}",
                    String::from_utf8_lossy(&body)
                ),
                Err(e) => anyhow::bail!("the gateway didn't answer: {e}"),
            }
        }
        Ok(proxy)
    }

    /// The one base URL.
    fn target(&self) -> Arc<Target> {
        Arc::new(Target {
            to: To::Tcp(self.addr.clone()),
            host: format!("localhost:{}", self.port),
            authorization: format!("Bearer {API_TOKEN}"),
        })
    }
}

/// An open-loop run of small chat completions.
#[derive(Clone)]
struct Latency {
    sent_per_s: f64,
    p50: f64,
    p99: f64,
    p999: f64,
    failed: usize,
    /// The proxy's CPU per request (gateway only).
    cpu_us: f64,
}

async fn latency_run(
    target: &Arc<Target>,
    rate: f64,
    length: Duration,
    pid: Option<u32>,
) -> anyhow::Result<Latency> {
    let pool = Pool::new(target);
    let body = Bytes::from_static(WHOLE_REQUEST.as_bytes());
    for _ in 0..WARM {
        let (status, answer) = pool.send(&body).await?;
        anyhow::ensure!(
            status == StatusCode::OK,
            "a warm-up request answered {status}: {}",
            String::from_utf8_lossy(&answer)
        );
    }
    let cpu_before = pid.map(probe::cpu_seconds).transpose()?;
    let outcome = open_loop::run(rate, length, |_| {
        let (pool, body) = (Arc::clone(&pool), body.clone());
        async move {
            matches!(pool.send(&body).await,
                Ok((StatusCode::OK, answer)) if contains(&answer, br#""usage""#))
        }
    })
    .await;
    let cpu_us = match (pid, cpu_before) {
        (Some(pid), Some(before)) => {
            let requests = (rate * length.as_secs_f64()).max(1.0);
            (probe::cpu_seconds(pid)? - before) * 1e6 / requests
        }
        _ => f64::NAN,
    };
    Ok(Latency {
        sent_per_s: outcome.sent_per_s,
        p50: outcome.at(0.5),
        p99: outcome.at(0.99),
        p999: outcome.at(0.999),
        failed: outcome.failed,
        cpu_us,
    })
}

/// A streamed request's body: `tokens` tokens, one every `token_ms` (held: until released).
fn stream_body(tokens: u64, token_ms: u64, hold: bool) -> Bytes {
    let hold = if hold { r#","bench_hold":true"# } else { "" };
    Bytes::from(format!(
        r#"{{"model":"{MODEL}","messages":[{{"role":"user","content":"Tell me a story."}}],"max_tokens":{tokens},"stream":true,"stream_options":{{"include_usage":true}},"bench_token_ms":{token_ms}{hold}}}"#
    ))
}

/// What one streamed answer brought.
#[derive(Default)]
struct Streamed {
    status: u16,
    /// From the send to the first token's chunk.
    ttft: Option<Duration>,
    tokens: u64,
    /// Tokens that arrived within the measured window.
    in_window: u64,
    usage: bool,
    done: bool,
}

impl Streamed {
    /// Answered 200 with every token, the usage chunk and `[DONE]`.
    fn whole(&self, tokens: Option<u64>) -> bool {
        self.status == 200
            && self.usage
            && self.done
            && tokens.is_none_or(|t| self.tokens == t)
            && self.tokens > 0
    }
}

/// Sends one streamed request on `sender` and reads its answer to the end, counting the tokens
/// that arrive in `window`; `first_token` is called when the first arrives.
async fn stream_once(
    sender: &mut Sender,
    target: &Target,
    body: &Bytes,
    window: (Instant, Instant),
    mut first_token: impl FnMut(),
) -> anyhow::Result<Streamed> {
    sender.ready().await?;
    let sent = Instant::now();
    let answer = sender.send_request(target.request(body)).await?;
    let mut seen = Streamed {
        status: answer.status().as_u16(),
        ..Streamed::default()
    };
    let mut answer = answer.into_body();
    let mut buffer: Vec<u8> = Vec::with_capacity(1024);
    while let Some(frame) = answer.frame().await {
        let Ok(data) = frame?.into_data() else {
            continue;
        };
        buffer.extend_from_slice(&data);
        let now = Instant::now();
        let mut from = 0;
        while let Some(end) = buffer[from..].windows(2).position(|w| w == b"\n\n") {
            let event = &buffer[from..from + end];
            if contains(event, TOKEN_MARK) {
                seen.tokens += 1;
                if seen.ttft.is_none() {
                    seen.ttft = Some(now - sent);
                    first_token();
                }
                if now >= window.0 && now < window.1 {
                    seen.in_window += 1;
                }
            } else if contains(event, br#""usage":{"#) {
                seen.usage = true;
            } else if event.trim_ascii() == b"data: [DONE]" {
                seen.done = true;
            }
            from += end + 2;
        }
        buffer.drain(..from);
    }
    Ok(seen)
}

/// A run of concurrent streams.
#[derive(Clone)]
struct Streaming {
    ttft_p50: f64,
    ttft_p99: f64,
    tokens_per_s: f64,
    /// Streams sent in the window (their TTFT counted).
    measured: usize,
    /// Streams that failed or came incomplete, in the whole run.
    failed: usize,
    /// The proxy's CPU over the run, % of one core (gateway only).
    cpu_pct: f64,
}

/// One client's streams, one after another on its connection.
struct Worked {
    ttft_ms: Vec<f64>,
    in_window: u64,
    measured: usize,
    failed: usize,
}

async fn streaming_run(
    target: &Arc<Target>,
    streams: usize,
    s: &Settings,
    pid: Option<u32>,
) -> anyhow::Result<Streaming> {
    let body = stream_body(s.tokens, s.token_ms, false);
    let mut senders = Vec::with_capacity(streams);
    for _ in 0..streams {
        senders.push(target.connect().await?);
    }
    // One stream's length of ramp (the starts spread over it), then the window measured.
    let length = Duration::from_millis(s.token_ms * s.tokens);
    let start = Instant::now() + Duration::from_millis(200);
    let window = (
        start + length,
        start + length + Duration::from_secs(s.seconds),
    );
    let cpu_before = pid.map(probe::cpu_seconds).transpose()?;
    let began = Instant::now();
    let mut clients = JoinSet::new();
    for (k, sender) in senders.into_iter().enumerate() {
        let first = start + length.mul_f64(k as f64 / streams as f64);
        let (target, body, tokens) = (Arc::clone(target), body.clone(), s.tokens);
        clients.spawn(client(sender, target, body, tokens, first, window));
    }
    let mut ttft = Vec::new();
    let (mut in_window, mut measured, mut failed) = (0, 0, 0);
    while let Some(worked) = clients.join_next().await {
        let worked = worked?;
        ttft.extend(worked.ttft_ms);
        in_window += worked.in_window;
        measured += worked.measured;
        failed += worked.failed;
    }
    let cpu_pct = match (pid, cpu_before) {
        (Some(pid), Some(before)) => {
            (probe::cpu_seconds(pid)? - before) * 100.0 / began.elapsed().as_secs_f64()
        }
        _ => f64::NAN,
    };
    ttft.sort_by(f64::total_cmp);
    Ok(Streaming {
        ttft_p50: quantile(&ttft, 0.5),
        ttft_p99: quantile(&ttft, 0.99),
        tokens_per_s: in_window as f64 / s.seconds.max(1) as f64,
        measured,
        failed,
        cpu_pct,
    })
}

/// Streams one after another from `first` until the window ends, reconnecting after a failure.
async fn client(
    mut sender: Sender,
    target: Arc<Target>,
    body: Bytes,
    tokens: u64,
    first: Instant,
    window: (Instant, Instant),
) -> Worked {
    let mut worked = Worked {
        ttft_ms: Vec::new(),
        in_window: 0,
        measured: 0,
        failed: 0,
    };
    tokio::time::sleep_until(first.into()).await;
    loop {
        let sent = Instant::now();
        if sent >= window.1 {
            break;
        }
        let measured = sent >= window.0;
        match stream_once(&mut sender, &target, &body, window, || {}).await {
            Ok(seen) => {
                worked.in_window += seen.in_window;
                if measured {
                    worked.measured += 1;
                    worked.ttft_ms.extend(seen.ttft.map(ms));
                }
                if !seen.whole(Some(tokens)) {
                    worked.failed += 1;
                }
            }
            Err(_) => {
                worked.failed += 1;
                match target.connect().await {
                    Ok(fresh) => sender = fresh,
                    Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                }
            }
        }
    }
    worked
}

/// Held streams on a fresh proxy.
struct Held {
    opened_s: f64,
    before_kib: f64,
    held_kib: f64,
    peak_kib: f64,
    per_kib: f64,
    served: usize,
    up_after: bool,
}

async fn held_run(world: &World, proxy: &Proxy, n: usize, hold: Duration) -> anyhow::Result<Held> {
    let target = proxy.target();
    let pool = Pool::new(&target);
    let whole = Bytes::from_static(WHOLE_REQUEST.as_bytes());
    for _ in 0..20 {
        let (status, _) = pool.send(&whole).await?;
        anyhow::ensure!(status == StatusCode::OK, "a request answered {status}");
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before_kib = probe::rss_kib(proxy.pid)? as f64;
    world.engine.released.store(false, Ordering::SeqCst);

    // Tokens for as long as anyone might hold them: each ends when the engine is released.
    let body = stream_body(4096, 1000, true);
    let opening = Arc::new(Semaphore::new(OPENING));
    let opened = Arc::new(AtomicUsize::new(0));
    let refused = Arc::new(AtomicUsize::new(0));
    let began = Instant::now();
    let far = (began, began + Duration::from_secs(86_400));
    let mut streams = JoinSet::new();
    for _ in 0..n {
        let (target, body) = (Arc::clone(&target), body.clone());
        let (opening, opened, refused) = (
            Arc::clone(&opening),
            Arc::clone(&opened),
            Arc::clone(&refused),
        );
        streams.spawn(async move {
            let mut permit = opening.acquire_owned().await.ok();
            let mut sender = match target.connect().await {
                Ok(sender) => sender,
                Err(e) => {
                    refused.fetch_add(1, Ordering::SeqCst);
                    return Err(e);
                }
            };
            let seen = stream_once(&mut sender, &target, &body, far, || {
                drop(permit.take());
                opened.fetch_add(1, Ordering::SeqCst);
            })
            .await;
            if !matches!(&seen, Ok(s) if s.ttft.is_some()) {
                refused.fetch_add(1, Ordering::SeqCst);
            }
            seen
        });
    }
    // Every stream open (its first token in) or refused.
    let deadline = Instant::now() + Duration::from_secs(120 + n as u64 / 50);
    while opened.load(Ordering::SeqCst) + refused.load(Ordering::SeqCst) < n
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let opened_s = began.elapsed().as_secs_f64();
    eprintln!(
        "    {} of {n} open in {opened_s:.1} s",
        opened.load(Ordering::SeqCst)
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let held_kib = probe::rss_kib(proxy.pid).map_or(f64::NAN, |k| k as f64);
    let peak_kib = probe::peak_rss(proxy.pid, tokio::time::Instant::now() + hold)
        .await
        .map_or(f64::NAN, |k| k as f64);
    world.engine.released.store(true, Ordering::SeqCst);
    // Each ends at its next token (a second at most), then the proxy passes the end on.
    let ending = Duration::from_secs(30 + n as u64 / 500);
    let least = hold.as_secs();
    let mut served = 0;
    let ended = tokio::time::timeout(ending, async {
        while let Some(seen) = streams.join_next().await {
            if let Ok(Ok(seen)) = seen
                && seen.whole(None)
                && seen.tokens >= least
            {
                served += 1;
            }
        }
    })
    .await;
    if ended.is_err() {
        eprintln!(
            "    {} streams hadn't ended {ending:?} after the release",
            streams.len()
        );
        streams.abort_all();
    }
    // Still up: alive and answering, on a new connection (the proxy closed the warm-up's,
    // idle past its header timeout), given three tries.
    let mut child_up = false;
    for _ in 0..3 {
        if !proxy.child_running() {
            break;
        }
        let fresh = Pool::new(&target);
        if let Ok((StatusCode::OK, _)) = fresh.send(&whole).await {
            child_up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(Held {
        opened_s,
        before_kib,
        held_kib,
        peak_kib,
        per_kib: (held_kib - before_kib) / n as f64,
        served,
        up_after: child_up,
    })
}

impl Proxy {
    /// Whether the process is still running (not exited, nor a zombie).
    fn child_running(&self) -> bool {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid));
        stat.ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().next().map(|st| st != "Z"))
            })
            .unwrap_or(false)
    }
}
