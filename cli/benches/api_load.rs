//! Open-loop load through the gateway: reads (get, list) at 1,000 req/s and creates at
//! 350 req/s, on SQLite and on Postgres, with p50/p99/p99.9 latency. Requests are sent on a fixed
//! schedule whatever the answers do, and latency is measured from each request's scheduled
//! time, so a slow answer can't hide the requests queued behind it (no coordinated omission).
//!
//! `cargo bench -p einsora --bench api_load` (BENCH_SECONDS sets each phase's length; default 10).

mod support;

use std::sync::Arc;
use std::time::Duration;

use hyper::Method;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::json;

use support::{Api, Http, Stack};

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
        let mut stack = Stack::start(url.as_deref(), &["api", "gateway"], &[])?;
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
