//! The access proxy against nginx, one worker each, in front of the same origin on a Unix socket:
//! - small answers (100 bytes): req/s at 1, 32 and 256 connections (wrk, closed loop), with the
//!   origin direct (wrk to the same server on TCP, kept alive) as the floor;
//! - small answers' latency at the same offered load for every peer (`support::open_loop`, a
//!   fixed rate, BENCH_RATE, over kept-alive connections);
//! - 1 MiB answers: throughput at 1 and 32 connections;
//! - memory per idle WebSocket: the proxy's RSS before and after 1,000 upgraded connections
//!   through it to an origin that accepts the upgrade and idles (fresh processes).
//!
//! nginx runs as its users run it: `proxy_buffering on` (its default) for answers, and with
//! `proxy_buffering off` (as in front of Jupyter, for streams and WebSockets) beside it, both
//! reported; and a third nginx with an upstream `keepalive` block (its documented way to reuse
//! upstream connections, as the proxy now does), since keeping connections is what the proxy
//! was changed to do. Every row is the median of BENCH_ROUNDS rounds of BENCH_SECONDS, every peer run in
//! each round in turn, so all share the machine's load. A wrk run with socket errors or non-2xx
//! answers fails the bench.
//!
//! The proxy is the release binary's `einsora access` with `TOKIO_WORKER_THREADS=1`; the api and
//! the controller are the access tests' fakes (`services/access/tests/proxy/fakes.rs`) served over
//! mutual TLS from this process, answering from memory. The measured path is the product's: a
//! notebook's host, its session cookie looked up, the workload's target (asked of the controller,
//! kept for a second) and a Unix-socket connection to the workload kept from the run's earlier
//! requests (`services/access/src/kept.rs`). The first two nginx make a new upstream connection
//! per request, as Jupyter's documented configuration does (`proxy_pass` to a socket, no
//! `keepalive` upstream block); the third keeps up to 64 idle ones.
//!
//! `cargo bench -p einsora --bench access` (BENCH_SECONDS per run, default 10; BENCH_ROUNDS,
//! default 3; BENCH_RATE, default 2000; BENCH_SOCKETS, default 1000). Needs `wrk`
//! (`apt-get install wrk`); fetches nginx with `apt-get download` into target/peers when it
//! isn't there.

// A test harness: a failed unwrap is a failed test, and it reads its own environment.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod support;

#[path = "../../services/access/tests/proxy/fakes.rs"]
#[allow(dead_code)]
mod fakes;

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use einsora_proto::common::v1::WorkloadKind;
use einsora_runtime::grpc::{self, InternalTls};
use einsora_runtime::pki::{Role, RoleKind};
use einsora_runtime::shutdown::Shutdown;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONTENT_TYPE, UPGRADE};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixListener};

use einsora_testkit::bench::{Report, Table, count, median, setting};
use einsora_testkit::spawn::Spawned;
use support::wrk::Wrk;
use support::{free_addr, get, open_loop, probe};

const SMALL: &[u8; 100] = b"{\"version\":\"2.21.0\",\"started\":\"2026-11-29T00:00:00Z\",\"kernels\":0,\"connections\":0,\"pad\":\"xxxxxxxxxx\"}";
const BIG: usize = 1 << 20;
const SMALL_CONNECTIONS: [u32; 3] = [1, 32, 256];
const BIG_CONNECTIONS: [u32; 2] = [1, 32];
const TOKEN: &str = "nbtoken-bench";

/// The peers, in the order they are started.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Direct,
    NginxBuffered,
    NginxUnbuffered,
    NginxKeepalive,
    Einsora,
    Candidate,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Direct => "direct",
            Kind::NginxBuffered => "nginx, buffering on",
            Kind::NginxUnbuffered => "nginx, buffering off",
            Kind::NginxKeepalive => "nginx, upstream keepalive",
            Kind::Einsora => "einsora",
            Kind::Candidate => "candidate",
        }
    }
}

/// Per test, per peer: one entry per round.
type Rounds<T> = Vec<Vec<Vec<T>>>;

fn main() -> anyhow::Result<()> {
    let seconds: u64 = setting("BENCH_SECONDS", 10)?;
    let rounds: u64 = setting("BENCH_ROUNDS", 3)?;
    let rate: f64 = setting("BENCH_RATE", 2000.0)?;
    let sockets: usize = setting("BENCH_SOCKETS", 1000)?;
    let mut report = Report::start(
        "access",
        "Access proxy",
        "cargo bench -p einsora --bench access",
    );
    let wrk = support::wrk::find()?;
    let nginx = nginx()?;
    let dir = tempfile::tempdir()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let world = rt.block_on(World::start(dir.path()))?;

    // BENCH_CANDIDATE names another build of `einsora`, measured beside the release one.
    let candidate = std::env::var_os("BENCH_CANDIDATE").map(PathBuf::from);
    let mut kinds = vec![
        Kind::Direct,
        Kind::NginxBuffered,
        Kind::NginxUnbuffered,
        Kind::NginxKeepalive,
        Kind::Einsora,
    ];
    if candidate.is_some() {
        kinds.push(Kind::Candidate);
    }
    let start = |kind: Kind| match kind {
        Kind::Direct => Ok(Peer::direct(&world)),
        Kind::NginxBuffered => Peer::nginx(&world, &nginx, Upstream::Buffered),
        Kind::NginxUnbuffered => Peer::nginx(&world, &nginx, Upstream::Unbuffered),
        Kind::NginxKeepalive => Peer::nginx(&world, &nginx, Upstream::KeptAlive),
        Kind::Einsora => Peer::einsora(&world, &rt, Path::new(support::EINSORA)),
        Kind::Candidate => {
            Peer::einsora(&world, &rt, candidate.as_deref().unwrap_or(Path::new("")))
        }
    };
    let n = kinds.len();
    let mut small: Rounds<Wrk> = vec![vec![vec![]; n]; SMALL_CONNECTIONS.len()];
    let mut big: Rounds<Wrk> = vec![vec![vec![]; n]; BIG_CONNECTIONS.len()];
    let mut latency: Vec<Vec<[f64; 5]>> = vec![vec![]; n];
    let mut idle: Vec<Vec<Idle>> = vec![vec![]; n];
    let length = Duration::from_secs(seconds);
    for round in 0..rounds as usize {
        eprintln!("round {}/{rounds}", round + 1);
        let peers = kinds
            .iter()
            .map(|&k| start(k))
            .collect::<anyhow::Result<Vec<_>>>()?;
        // Interleaved: every test runs each peer in turn, the order rotating by round.
        let order: Vec<usize> = (0..n).map(|i| (i + round) % n).collect();
        for (t, &c) in SMALL_CONNECTIONS.iter().enumerate() {
            for &p in &order {
                small[t][p].push(peers[p].wrk(&wrk, "/small", c, seconds)?);
            }
        }
        for &p in &order {
            latency[p].push(rt.block_on(peers[p].open_loop(rate, length))?);
        }
        for (t, &c) in BIG_CONNECTIONS.iter().enumerate() {
            for &p in &order {
                big[t][p].push(peers[p].wrk(&wrk, "/1m", c, seconds)?);
            }
        }
        drop(peers);
        // Fresh processes, so what the runs above grew isn't counted; WebSockets go through
        // the unbuffered nginx, as in front of Jupyter (buffering doesn't touch an upgraded
        // connection).
        for &p in order.iter().filter(|&&p| {
            !matches!(
                kinds[p],
                Kind::Direct | Kind::NginxBuffered | Kind::NginxKeepalive
            )
        }) {
            let peer = start(kinds[p])?;
            idle[p].push(rt.block_on(peer.websockets(&world, sockets))?);
        }
    }
    let med = |runs: &[Wrk], f: fn(&Wrk) -> f64| median(runs.iter().map(f));
    let nginx_peers = [1, 2];
    let kept_alive = 3;
    let einsora = 4;

    let mut head = vec!["conns"];
    head.extend(kinds.iter().map(|k| k.name()));
    head.extend([
        "einsora ÷ the faster nginx on / off",
        "einsora ÷ nginx keepalive",
        "CPU µs/req: nginx on / off / keepalive — einsora",
    ]);
    let mut table = Table::new(&head, 0);
    for (t, &c) in SMALL_CONNECTIONS.iter().enumerate() {
        let runs = &small[t];
        let mut row = vec![c.to_string()];
        row.extend(runs.iter().map(|r| thousands(med(r, |w| w.rate))));
        let best = nginx_peers
            .iter()
            .map(|&p| med(&runs[p], |w| w.rate))
            .fold(0.0, f64::max);
        let ours = med(&runs[einsora], |w| w.rate);
        row.push(format!("{:.2}", ours / best));
        row.push(format!("{:.2}", ours / med(&runs[kept_alive], |w| w.rate)));
        row.push(format!(
            "{:.1} / {:.1} / {:.1} — {:.1}",
            med(&runs[1], |w| w.cpu_us_per_request),
            med(&runs[2], |w| w.cpu_us_per_request),
            med(&runs[kept_alive], |w| w.cpu_us_per_request),
            med(&runs[einsora], |w| w.cpu_us_per_request),
        ));
        table.row(row);
    }
    report.say(format!(
        "Small answers (100 bytes), req/s, wrk closed loop, one thread; medians of {rounds} rounds \
         of {seconds} s:"
    ));
    report.table(&table);

    let mut table = Table::new(
        &[
            "peer",
            "offered /s",
            "sent /s",
            "p50 ms",
            "p99 ms",
            "p99.9 ms",
            "failed",
        ],
        1,
    );
    for (p, kind) in kinds.iter().enumerate() {
        let col = |i: usize| median(latency[p].iter().map(|r| r[i]));
        table.row(vec![
            kind.name().to_owned(),
            format!("{rate:.0}"),
            format!("{:.0}", col(0)),
            format!("{:.2}", col(1)),
            format!("{:.2}", col(2)),
            format!("{:.2}", col(3)),
            format!("{:.0}", col(4)),
        ]);
    }
    report.say(format!(
        "Small answers' latency at the same offered load: open loop, from each request's send, \
         kept-alive connections; medians of {rounds} rounds of {seconds} s:"
    ));
    report.table(&table);

    let mut head = vec!["conns"];
    head.extend(kinds.iter().map(|k| k.name()));
    head.push("p99 ms: nginx on / off / keepalive — einsora");
    let mut table = Table::new(&head, 0);
    for (t, &c) in BIG_CONNECTIONS.iter().enumerate() {
        let runs = &big[t];
        let mut row = vec![c.to_string()];
        row.extend(
            runs.iter()
                .map(|r| format!("{:.2}", med(r, |w| w.rate * BIG as f64 / 1e9))),
        );
        row.push(format!(
            "{:.1} / {:.1} / {:.1} — {:.1}",
            med(&runs[1], |w| w.p99_us / 1000.0),
            med(&runs[2], |w| w.p99_us / 1000.0),
            med(&runs[kept_alive], |w| w.p99_us / 1000.0),
            med(&runs[einsora], |w| w.p99_us / 1000.0),
        ));
        table.row(row);
    }
    report.say(format!(
        "1 MiB answers, GB/s (decimal), wrk closed loop; medians of {rounds} rounds of {seconds} s:"
    ));
    report.table(&table);

    let mut table = Table::new(
        &[
            "peer",
            "RSS before MB",
            "RSS after MB",
            "per WebSocket KiB",
            "rounds KiB",
        ],
        1,
    );
    for (p, kind) in kinds.iter().enumerate() {
        let runs = &idle[p];
        if runs.is_empty() {
            continue;
        }
        let per: Vec<String> = runs.iter().map(|r| format!("{:.1}", r.per_kib)).collect();
        table.row(vec![
            kind.name().to_owned(),
            format!("{:.1}", median(runs.iter().map(|r| r.before_kib / 1024.0))),
            format!("{:.1}", median(runs.iter().map(|r| r.after_kib / 1024.0))),
            format!("{:.1}", median(runs.iter().map(|r| r.per_kib))),
            per.join(" / "),
        ]);
    }
    report.say(format!(
        "{} idle WebSockets (the proxy's RSS; nginx: its worker's), medians of {rounds} rounds:",
        count(sockets as u64)
    ));
    report.table(&table);
    drop(world);
    report.finish()?;
    Ok(())
}

/// 12345.6 → "12.3k".
fn thousands(v: f64) -> String {
    if v >= 1000.0 {
        format!("{:.1}k", v / 1000.0)
    } else {
        format!("{v:.0}")
    }
}

/// The origin and the fakes, served from this process for the whole run.
struct World {
    dir: PathBuf,
    socket: PathBuf,
    origin_tcp: String,
    upgraded: Arc<AtomicUsize>,
    api: Arc<fakes::Api>,
    api_addr: String,
    controller_addr: String,
    workload: uuid::Uuid,
    shutdown: Shutdown,
}

impl World {
    async fn start(dir: &Path) -> anyhow::Result<World> {
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

        let socket = dir.join("origin.sock");
        let upgraded = Arc::new(AtomicUsize::new(0));
        let unix = UnixListener::bind(&socket)?;
        let tcp = TcpListener::bind("127.0.0.1:0").await?;
        let origin_tcp = tcp.local_addr()?.to_string();
        let big = Bytes::from(vec![b'x'; BIG]);
        let (b, u) = (big.clone(), Arc::clone(&upgraded));
        tokio::spawn(async move {
            while let Ok((stream, _)) = unix.accept().await {
                tokio::spawn(origin_connection(
                    TokioIo::new(stream),
                    b.clone(),
                    u.clone(),
                ));
            }
        });
        let u = Arc::clone(&upgraded);
        tokio::spawn(async move {
            while let Ok((stream, _)) = tcp.accept().await {
                let _ = stream.set_nodelay(true);
                tokio::spawn(origin_connection(
                    TokioIo::new(stream),
                    big.clone(),
                    u.clone(),
                ));
            }
        });

        let workload = uuid::Uuid::now_v7();
        let socket_text = socket.to_str().context("a UTF-8 path")?;
        controller.run(
            &workload.to_string(),
            &fakes::ALICE,
            WorkloadKind::Notebook,
            socket_text,
            TOKEN,
        );
        Ok(World {
            dir: dir.to_owned(),
            socket,
            origin_tcp,
            upgraded,
            api,
            api_addr,
            controller_addr,
            workload,
            shutdown,
        })
    }
}

impl Drop for World {
    fn drop(&mut self) {
        self.shutdown.trigger();
    }
}

async fn origin_connection<I>(io: TokioIo<I>, big: Bytes, upgraded: Arc<AtomicUsize>)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |request| origin(request, big.clone(), Arc::clone(&upgraded)));
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(io, service)
        .with_upgrades()
        .await;
}

/// 100 bytes at any path, 1 MiB at `/1m`; a WebSocket handshake is accepted and then idles
/// until the other side closes.
async fn origin(
    mut request: Request<Incoming>,
    big: Bytes,
    upgraded: Arc<AtomicUsize>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let websocket = request
        .headers()
        .get(UPGRADE)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"websocket"));
    if websocket {
        let upgrade = hyper::upgrade::on(&mut request);
        tokio::spawn(async move {
            let Ok(io) = upgrade.await else { return };
            upgraded.fetch_add(1, Ordering::SeqCst);
            let mut io = TokioIo::new(io);
            let mut buf = [0u8; 64];
            while let Ok(1..) = io.read(&mut buf).await {}
            upgraded.fetch_sub(1, Ordering::SeqCst);
        });
        let answer = Response::builder()
            .status(StatusCode::SWITCHING_PROTOCOLS)
            .header(UPGRADE, "websocket")
            .header("connection", "Upgrade")
            .header("sec-websocket-accept", "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
            .body(Full::new(Bytes::new()));
        return Ok(answer.expect("a valid answer"));
    }
    let body = if request.uri().path() == "/1m" {
        big
    } else {
        Bytes::from_static(SMALL)
    };
    let answer = Response::builder()
        .header(CONTENT_TYPE, "application/json")
        .body(Full::new(body));
    Ok(answer.expect("a valid answer"))
}

/// One side of the comparison: where wrk sends, with which headers, and the process whose CPU
/// and memory count.
struct Peer {
    addr: String,
    headers: Vec<String>,
    /// The process that serves (nginx: its one worker); none for the origin direct.
    pid: Option<u32>,
    /// Stopped with SIGTERM when the peer is dropped.
    _child: Option<Spawned>,
}

impl Peer {
    fn direct(world: &World) -> Peer {
        Peer {
            addr: world.origin_tcp.clone(),
            headers: vec![],
            pid: None,
            _child: None,
        }
    }

    fn nginx(world: &World, bin: &Path, upstream: Upstream) -> anyhow::Result<Peer> {
        let prefix = world
            .dir
            .join(format!("nginx-{}", uuid::Uuid::now_v7().simple()));
        std::fs::create_dir(&prefix)?;
        let addr = free_addr();
        let conf = prefix.join("nginx.conf");
        std::fs::write(&conf, nginx_conf(&prefix, &addr, &world.socket, upstream))?;
        let mut cmd = Command::new(bin);
        cmd.arg("-p")
            .arg(&prefix)
            .arg("-c")
            .arg(&conf)
            .arg("-e")
            .arg("stderr")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        let child = support::spawn(cmd)?;
        wait_listening(&addr)?;
        let master = child.pid();
        let deadline = Instant::now() + Duration::from_secs(10);
        let worker = loop {
            if let Some(pid) = probe::children_of(master).into_iter().next() {
                break pid;
            }
            anyhow::ensure!(Instant::now() < deadline, "nginx started no worker");
            std::thread::sleep(Duration::from_millis(20));
        };
        Ok(Peer {
            addr,
            headers: vec![],
            pid: Some(worker),
            _child: Some(child),
        })
    }

    /// `einsora access` on one worker, and a session opened at the notebook's host.
    fn einsora(world: &World, rt: &tokio::runtime::Runtime, bin: &Path) -> anyhow::Result<Peer> {
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
        ];
        let mut cmd = Command::new(bin);
        cmd.arg("access")
            .envs(env)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        let child = support::spawn(cmd)?;
        let pid = child.pid();
        let mut peer = Peer {
            addr,
            headers: vec![],
            pid: Some(pid),
            _child: Some(child),
        };
        wait_listening(&peer.addr)?;
        let host = format!("w-{}.localhost:{port}", world.workload);
        let ticket = format!("tkt-{}", uuid::Uuid::now_v7().simple());
        world
            .api
            .add_ticket(&ticket, &world.workload.to_string(), fakes::ALICE);
        let path = format!("/_einsora/open?ticket={ticket}");
        let opened = rt.block_on(get(&peer.addr, &host, &path, &[]))?;
        anyhow::ensure!(opened.0 == 200, "opening answered {}", opened.0);
        let cookie = opened
            .1
            .lines()
            .find_map(|l| l.strip_prefix("set-cookie: "))
            .and_then(|c| c.split(';').next())
            .context("no session cookie")?
            .to_owned();
        peer.headers = vec![format!("Host: {host}"), format!("Cookie: {cookie}")];
        let through = rt.block_on(get(&peer.addr, &host, "/small", &peer.headers[1..]))?;
        anyhow::ensure!(through.0 == 200, "a request answered {}", through.0);
        Ok(peer)
    }

    fn wrk(&self, wrk: &Path, path: &str, connections: u32, seconds: u64) -> anyhow::Result<Wrk> {
        let cpu_before = self.pid.map(probe::cpu_seconds).transpose()?;
        let url = format!("http://{}{path}", self.addr);
        let mut result = Wrk::run(wrk, &self.headers, &url, connections, seconds)?;
        if let (Some(before), Some(pid)) = (cpu_before, self.pid) {
            result.cpu_us_per_request = (probe::cpu_seconds(pid)? - before) * 1e6 / result.requests;
        }
        Ok(result)
    }

    /// Small answers at `rate` a second for `length`, open loop over kept-alive connections:
    /// sent a second, p50, p99 and p99.9 in ms, and the requests not answered 200.
    async fn open_loop(&self, rate: f64, length: Duration) -> anyhow::Result<[f64; 5]> {
        let client: support::Http =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .pool_max_idle_per_host(256)
                .build_http();
        let uri: hyper::Uri = format!("http://{}/small", self.addr).parse()?;
        let headers: Vec<(String, String)> = self
            .headers
            .iter()
            .filter_map(|h| h.split_once(": "))
            .map(|(n, v)| (n.to_owned(), v.to_owned()))
            .collect();
        let outcome = open_loop::run(rate, length, |_| {
            let mut request = Request::get(uri.clone());
            for (n, v) in &headers {
                request = request.header(n, v);
            }
            let request = request.body(Full::new(Bytes::new()));
            let client = client.clone();
            async move {
                let Ok(request) = request else { return false };
                match client.request(request).await {
                    Ok(answer) if answer.status() == StatusCode::OK => {
                        http_body_util::BodyExt::collect(answer.into_body())
                            .await
                            .is_ok()
                    }
                    _ => false,
                }
            }
        })
        .await;
        Ok([
            outcome.sent_per_s,
            outcome.at(0.5),
            outcome.at(0.99),
            outcome.at(0.999),
            outcome.failed as f64,
        ])
    }

    /// RSS before and after `n` WebSockets opened through this peer, idle.
    async fn websockets(&self, world: &World, n: usize) -> anyhow::Result<Idle> {
        let pid = self.pid.context("a proxy")?;
        let host = self
            .headers
            .first()
            .and_then(|h| h.strip_prefix("Host: "))
            .unwrap_or("localhost")
            .to_owned();
        let extra = self.headers.get(1..).unwrap_or_default().to_vec();
        for _ in 0..20 {
            let answer = get(&self.addr, &host, "/small", &extra).await?;
            anyhow::ensure!(answer.0 == 200, "a request answered {}", answer.0);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        let before_kib = probe::rss_kib(pid)? as f64;
        let base = world.upgraded.load(Ordering::SeqCst);
        let mut open = Vec::with_capacity(n);
        for _ in 0..n {
            open.push(websocket(&self.addr, &host, &extra).await?);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while world.upgraded.load(Ordering::SeqCst) < base + n {
            anyhow::ensure!(
                Instant::now() < deadline,
                "the origin never saw every upgrade"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        let after_kib = probe::rss_kib(pid)? as f64;
        drop(open);
        Ok(Idle {
            before_kib,
            after_kib,
            per_kib: (after_kib - before_kib) / n as f64,
        })
    }
}

/// How an nginx peer reaches the origin.
#[derive(Clone, Copy)]
enum Upstream {
    /// A new connection per request, `proxy_buffering on` (its default).
    Buffered,
    /// A new connection per request, `proxy_buffering off` (Jupyter's docs, for streams).
    Unbuffered,
    /// Up to 64 idle upstream connections kept (`keepalive` in an `upstream` block, which
    /// needs the Connection header cleared for requests that aren't upgrades), buffering on.
    KeptAlive,
}

/// nginx as in front of a notebook server.
fn nginx_conf(prefix: &Path, addr: &str, socket: &Path, upstream: Upstream) -> String {
    let p = prefix.display();
    let s = socket.display();
    let buffering = match upstream {
        Upstream::Unbuffered => "off",
        Upstream::Buffered | Upstream::KeptAlive => "on",
    };
    let (pass, idle_connection, keepalive) = match upstream {
        Upstream::KeptAlive => (
            "http://origin".to_owned(),
            "''",
            format!("upstream origin {{ server unix:{s}; keepalive 64; }}"),
        ),
        Upstream::Buffered | Upstream::Unbuffered => {
            (format!("http://unix:{s}:"), "close", String::new())
        }
    };
    format!(
        r#"daemon off;
master_process on;
worker_processes 1;
user root;
pid {p}/nginx.pid;
error_log stderr warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  client_body_temp_path {p}/body;
  proxy_temp_path {p}/proxy;
  fastcgi_temp_path {p}/fastcgi;
  uwsgi_temp_path {p}/uwsgi;
  scgi_temp_path {p}/scgi;
  map $http_upgrade $connection_upgrade {{ default upgrade; '' {idle_connection}; }}
  {keepalive}
  server {{
    listen {addr};
    location / {{
      proxy_pass {pass};
      proxy_http_version 1.1;
      proxy_set_header Host localhost;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection $connection_upgrade;
      proxy_buffering {buffering};
    }}
  }}
}}
"#
    )
}

#[derive(Debug, Clone)]
struct Idle {
    before_kib: f64,
    after_kib: f64,
    per_kib: f64,
}

/// A WebSocket handshake answered 101; the connection, left open and idle.
async fn websocket(addr: &str, host: &str, headers: &[String]) -> anyhow::Result<TcpStream> {
    let mut stream = TcpStream::connect(addr).await?;
    let mut request = format!(
        "GET /ws HTTP/1.1\r\nHost: {host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
    );
    for h in headers {
        request.push_str(&format!("{h}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        anyhow::ensure!(
            stream.read(&mut byte).await? == 1,
            "closed in the handshake"
        );
        head.push(byte[0]);
    }
    anyhow::ensure!(
        head.starts_with(b"HTTP/1.1 101"),
        "the handshake answered {}",
        String::from_utf8_lossy(&head)
    );
    Ok(stream)
}

fn wait_listening(addr: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(addr).is_err() {
        anyhow::ensure!(Instant::now() < deadline, "nothing listens on {addr}");
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

/// Debian's nginx, unpacked into target/peers (fetched with `apt-get download` if missing).
fn nginx() -> anyhow::Result<PathBuf> {
    let peers = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/peers");
    let bin = peers.join("root/usr/sbin/nginx");
    if !bin.is_file() {
        std::fs::create_dir_all(&peers)?;
        let got = Command::new("apt-get")
            .args(["download", "nginx"])
            .current_dir(&peers)
            .status()?;
        anyhow::ensure!(got.success(), "apt-get download nginx failed");
        for entry in std::fs::read_dir(&peers)? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "deb") {
                let unpacked = Command::new("dpkg")
                    .arg("-x")
                    .arg(&path)
                    .arg(peers.join("root"))
                    .status()?;
                anyhow::ensure!(unpacked.success(), "dpkg -x failed");
            }
        }
    }
    Ok(bin)
}
