//! Open-loop load through the gateway: reads (get, list) at 1,000 req/s and creates at
//! 350 req/s, on SQLite and on Postgres, with p50/p99/p99.9 latency. Requests are sent on a fixed
//! schedule whatever the answers do, and latency is measured from each request's scheduled
//! time, so a slow answer can't hide the requests queued behind it (no coordinated omission).
//!
//! `cargo bench -p einsora --bench api_load` (BENCH_SECONDS sets each phase's length; default 10).

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Request};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

type Http = Client<HttpConnector, Full<Bytes>>;

fn main() -> anyhow::Result<()> {
    let seconds: u64 = std::env::var("BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let phase = Duration::from_secs(seconds);
    println!(
        "{:<9} {:<7} {:>6} {:>8} {:>8} {:>9} {:>9} {:>7}",
        "engine", "op", "req/s", "sent/s", "p50 ms", "p99 ms", "p99.9 ms", "errors"
    );
    let pg = einsora_testkit::TempPostgres::shared();
    let engines = [("sqlite", None), ("postgres", Some(pg.fresh_database()?))];
    for (engine, url) in engines {
        let mut stack = Stack::start(url.as_deref())?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        rt.block_on(async {
            let http: Http = Client::builder(TokioExecutor::new())
                .pool_max_idle_per_host(256)
                .build_http();
            let token = stack.token(&http).await?;
            let api = Arc::new(Api {
                http,
                base: stack.base.clone(),
                token,
            });
            let mut ids = Vec::new();
            for i in 0..20 {
                ids.push(api.create(&format!("seed-{i}")).await?);
            }
            let id = ids[0].clone();
            let get = format!("/v1/workloads/{id}");
            let phases: [(&str, f64, Op); 3] = [
                ("get", 1000.0, Op::Get(get)),
                ("list", 1000.0, Op::Get("/v1/workloads".into())),
                ("create", 350.0, Op::Create),
            ];
            for (name, rate, op) in phases {
                let result = open_loop(&api, &op, rate, phase).await;
                result.print(engine, name, rate, phase);
            }
            anyhow::Ok(())
        })?;
        drop(stack);
    }
    Ok(())
}

enum Op {
    Get(String),
    Create,
}

struct Api {
    http: Http,
    base: String,
    token: String,
}

impl Api {
    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<(u16, Value)> {
        let mut request = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header("authorization", format!("Bearer {}", self.token));
        let payload = match body {
            Some(b) => {
                request = request.header("content-type", "application/json");
                Bytes::from(b.to_string())
            }
            None => Bytes::new(),
        };
        let response = self.http.request(request.body(Full::new(payload))?).await?;
        let status = response.status().as_u16();
        let bytes = response.into_body().collect().await?.to_bytes();
        Ok((
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        ))
    }

    async fn create(&self, name: &str) -> anyhow::Result<String> {
        let body = json!({ "kind": "notebook", "name": name, "gpu_class": "cpu-1c-2g", "image": "jupyterlab" });
        let (status, answer) = self.send(Method::POST, "/v1/workloads", Some(body)).await?;
        anyhow::ensure!(status == 202, "create answered {status}: {answer}");
        Ok(answer["id"].as_str().unwrap_or_default().to_owned())
    }
}

struct Outcome {
    latencies: Vec<Duration>,
    errors: usize,
    sent: usize,
    took: Duration,
}

impl Outcome {
    fn print(mut self, engine: &str, op: &str, rate: f64, phase: Duration) {
        self.latencies.sort();
        let at = |q: f64| {
            let i = ((self.latencies.len() as f64 * q).ceil() as usize).saturating_sub(1);
            self.latencies
                .get(i)
                .map_or(f64::NAN, |d| d.as_secs_f64() * 1000.0)
        };
        let sent = self.sent as f64 / self.took.as_secs_f64().max(phase.as_secs_f64());
        println!(
            "{engine:<9} {op:<7} {rate:>6.0} {sent:>8.0} {:>8.2} {:>9.2} {:>9.2} {:>7}",
            at(0.5),
            at(0.99),
            at(0.999),
            self.errors
        );
    }
}

/// Sends `op` at `rate` per second for `phase`, each request on its own task at its scheduled
/// time; latency counts from that time.
async fn open_loop(api: &Arc<Api>, op: &Op, rate: f64, phase: Duration) -> Outcome {
    let total = (rate * phase.as_secs_f64()) as usize;
    let interval = Duration::from_secs_f64(1.0 / rate);
    let start = tokio::time::Instant::now() + Duration::from_millis(50);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let run = uuid::Uuid::now_v7().simple().to_string();
    for i in 0..total {
        let scheduled = start + interval * i as u32;
        tokio::time::sleep_until(scheduled).await;
        let api = Arc::clone(api);
        let tx = tx.clone();
        let request = match op {
            Op::Get(path) => (Method::GET, path.clone(), None),
            Op::Create => (
                Method::POST,
                "/v1/workloads".to_owned(),
                Some(
                    json!({ "kind": "notebook", "name": format!("l{}-{i}", &run[20..]), "gpu_class": "cpu-1c-2g", "image": "jupyterlab" }),
                ),
            ),
        };
        tokio::spawn(async move {
            let answer = api.send(request.0, &request.1, request.2).await;
            let ok = matches!(answer, Ok((200 | 202, _)));
            let _ = tx.send((scheduled.elapsed(), ok));
        });
    }
    drop(tx);
    let mut outcome = Outcome {
        latencies: Vec::with_capacity(total),
        errors: 0,
        sent: total,
        took: Duration::ZERO,
    };
    while let Some((latency, ok)) = rx.recv().await {
        outcome.latencies.push(latency);
        outcome.errors += usize::from(!ok);
    }
    outcome.took = start.elapsed();
    outcome
}

/// The api (dev mode) and the gateway as real processes of the release binary.
struct Stack {
    /// Kept until the processes using it are gone.
    _dir: tempfile::TempDir,
    base: String,
    children: Vec<Child>,
    api_out: Option<std::process::ChildStdout>,
}

impl Stack {
    fn start(database: Option<&str>) -> anyhow::Result<Stack> {
        let dir = tempfile::tempdir()?;
        let api_addr = free_addr()?;
        let http_addr = free_addr()?;
        let run = |args: &[&str]| -> anyhow::Result<Command> {
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_einsora"));
            cmd.args(args)
                .env("EINSORA_DATA_DIR", dir.path())
                .env("EINSORA_API_ADDR", &api_addr)
                .env("EINSORA_HTTP_ADDR", &http_addr)
                .env("EINSORA_AUTH_MODE", "dev")
                .env("EINSORA_LOG", "warn")
                .stdin(Stdio::null());
            if let Some(url) = database {
                cmd.env("EINSORA_DATABASE_URL", url);
            }
            Ok(cmd)
        };
        for args in [&["migrate"][..], &["pki", "init"]] {
            anyhow::ensure!(
                run(args)?.stderr(Stdio::null()).status()?.success(),
                "{args:?} failed"
            );
        }
        let mut api = run(&["api"])?
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let api_out = api.stdout.take();
        let gateway = run(&["gateway"])?
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        Ok(Stack {
            _dir: dir,
            base: format!("http://{http_addr}"),
            children: vec![api, gateway],
            api_out,
        })
    }

    /// Logs in as dev@acme (its password is on the api's standard output) and makes a token.
    async fn token(&mut self, http: &Http) -> anyhow::Result<String> {
        use std::io::BufRead;
        let stdout = self
            .api_out
            .take()
            .ok_or_else(|| anyhow::anyhow!("no api output"))?;
        // Read all of it, always: the api must never write to a closed pipe.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if line.contains("email dev@acme ") {
                    let _ = tx.send(line.split_whitespace().last().map(str::to_owned));
                }
            }
        });
        let password = rx.recv_timeout(Duration::from_secs(30)).ok().flatten();
        let password = password.ok_or_else(|| anyhow::anyhow!("no dev password"))?;
        let deadline = Instant::now() + Duration::from_secs(30);
        let login = loop {
            let body = json!({ "email": "dev@acme", "password": password }).to_string();
            let request = Request::post(format!("{}/v1/sessions", self.base))
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(body)))?;
            match http.request(request).await {
                Ok(r) if r.status() == 200 => break r,
                _ if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(100)).await
                }
                other => anyhow::bail!("login failed: {other:?}"),
            }
        };
        let cookie = login
            .headers()
            .get("set-cookie")
            .and_then(|c| c.to_str().ok())
            .and_then(|c| c.split(';').next())
            .unwrap_or_default()
            .to_owned();
        let session: Value =
            serde_json::from_slice(&login.into_body().collect().await?.to_bytes())?;
        let request = Request::post(format!("{}/v1/tokens", self.base))
            .header("content-type", "application/json")
            .header("cookie", cookie)
            .header(
                "x-csrf-token",
                session["csrf_token"].as_str().unwrap_or_default(),
            )
            .body(Full::new(Bytes::from(
                json!({ "name": "load" }).to_string(),
            )))?;
        let made: Value = serde_json::from_slice(
            &http
                .request(request)
                .await?
                .into_body()
                .collect()
                .await?
                .to_bytes(),
        )?;
        Ok(made["token"].as_str().unwrap_or_default().to_owned())
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let _ = child.wait();
        }
    }
}

fn free_addr() -> anyhow::Result<String> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .to_string())
}
