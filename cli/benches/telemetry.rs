//! What metrics and traces cost: the gateway's open-loop load (as `api_load`: gets at 1,000
//! req/s, creates at 350 req/s, SQLite) with telemetry off; with metrics, each role serving
//! its own, scraped every second as Prometheus would; and with metrics and traces, each role
//! also exporting its spans over OTLP to a receiver — interleaved, two rounds, in one run; and
//! the scrapes' own latency and size.
//!
//! `cargo bench -p einsora --bench telemetry` (BENCH_SECONDS sets each phase; default 10).

// A test harness: a failed unwrap is a failed test, and it reads its own environment.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use einsora_testkit::bench::{Report, Table, quantile, setting};
use einsora_testkit::otlp::OtlpReceiver;
use hyper::Method;
use serde_json::json;
use support::{Stack, free_addr, open_loop};

const ROLES: [&str; 2] = ["api", "gateway"];

fn main() -> anyhow::Result<()> {
    let seconds: u64 = setting("BENCH_SECONDS", 10)?;
    let length = Duration::from_secs(seconds);
    let mut report = Report::start(
        "telemetry",
        "Telemetry cost",
        "cargo bench -p einsora --bench telemetry",
    );
    let mut load = Table::new(
        &[
            "telemetry",
            "round",
            "op",
            "rate /s",
            "p50 ms",
            "p99 ms",
            "p99.9 ms",
            "failed",
        ],
        3,
    );
    let receiver = OtlpReceiver::start()?;
    let scrapes: Arc<Mutex<Vec<(String, Duration, usize)>>> = Arc::default();
    for round in 1..=2 {
        for (config, on, traced) in [
            ("off", false, false),
            ("metrics", true, false),
            ("metrics + traces", true, true),
        ] {
            let metrics: Vec<(String, String)> = ROLES
                .iter()
                .map(|r| ((*r).to_owned(), free_addr()))
                .collect();
            let endpoint = receiver.endpoint();
            let stack = Stack::start_each(None, &ROLES, &[], |role| {
                if !on {
                    return Vec::new();
                }
                let addr = metrics.iter().find(|(r, _)| r == role).unwrap().1.clone();
                let mut own = vec![("EINSORA_METRICS_ADDR".into(), addr)];
                if traced {
                    own.push(("EINSORA_OTLP_ENDPOINT".into(), endpoint.clone()));
                }
                own
            })?;
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()?;
            rt.block_on(async {
                let api = stack.api().await?;
                let id = api.create("seed").await?;
                let scraping = Arc::new(AtomicBool::new(on));
                let scraper = on.then(|| {
                    tokio::spawn(scrape(metrics.clone(), Arc::clone(&scraping), Arc::clone(&scrapes)))
                });
                let get = format!("/v1/workloads/{id}");
                let run = uuid::Uuid::now_v7().simple().to_string();
                for (name, rate) in [("get", 1000.0), ("create", 350.0)] {
                    let outcome = open_loop::run(rate, length, |i| {
                        let api = Arc::clone(&api);
                        let (method, path, body) = match name {
                            "get" => (Method::GET, get.clone(), None),
                            _ => (
                                Method::POST,
                                "/v1/workloads".to_owned(),
                                Some(json!({ "kind": "notebook", "name": format!("t{}-{i}", &run[20..]), "gpu_class": "cpu-1c-2g", "image": "jupyterlab" })),
                            ),
                        };
                        async move { matches!(api.send(method, &path, body).await, Ok((200 | 202, _))) }
                    })
                    .await;
                    load.row(vec![
                        config.to_owned(),
                        round.to_string(),
                        name.to_owned(),
                        format!("{rate:.0}"),
                        format!("{:.2}", outcome.at(0.5)),
                        format!("{:.2}", outcome.at(0.99)),
                        format!("{:.2}", outcome.at(0.999)),
                        outcome.failed.to_string(),
                    ]);
                }
                scraping.store(false, Ordering::Release);
                if let Some(scraper) = scraper {
                    scraper.await?;
                }
                anyhow::Ok(())
            })?;
            drop(stack);
        }
    }
    let mut scrape_table = Table::new(&["role", "scrapes", "p50 ms", "p99 ms", "bytes"], 1);
    let scrapes = scrapes.lock().unwrap();
    for role in ROLES {
        let mut took: Vec<f64> = scrapes
            .iter()
            .filter(|(r, _, _)| r == role)
            .map(|(_, t, _)| t.as_secs_f64() * 1000.0)
            .collect();
        took.sort_by(f64::total_cmp);
        let bytes = scrapes
            .iter()
            .filter(|(r, _, _)| r == role)
            .map(|(_, _, b)| *b)
            .max()
            .unwrap_or(0);
        scrape_table.row(vec![
            role.to_owned(),
            took.len().to_string(),
            format!("{:.2}", quantile(&took, 0.5)),
            format!("{:.2}", quantile(&took, 0.99)),
            bytes.to_string(),
        ]);
    }
    let spans = receiver.spans().len();
    report.say(format!(
        "Open loop on SQLite, latency from each request's send, {seconds} s a phase; `metrics`: \
         each role's metrics served and scraped every second; `metrics + traces`: and its spans \
         exported over OTLP ({spans} spans received in all). The counting itself runs in all \
         three; `off` serves and exports nothing:"
    ));
    report.table(&load);
    report.say("Each scrape under that load (GET /metrics, Prometheus's text format), its time and its size:");
    report.table(&scrape_table);
    report.finish()?;
    Ok(())
}

/// Scrapes every role's `/metrics` once a second while `scraping`, recording each scrape.
async fn scrape(
    roles: Vec<(String, String)>,
    scraping: Arc<AtomicBool>,
    into: Arc<Mutex<Vec<(String, Duration, usize)>>>,
) {
    let http: support::Http =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build_http();
    while scraping.load(Ordering::Acquire) {
        for (role, addr) in &roles {
            let started = Instant::now();
            let request = hyper::Request::get(format!("http://{addr}/metrics"))
                .body(http_body_util::Full::new(hyper::body::Bytes::new()))
                .unwrap();
            let Ok(response) = http.request(request).await else {
                continue;
            };
            let Ok(body) = http_body_util::BodyExt::collect(response.into_body()).await else {
                continue;
            };
            let size = body.to_bytes().len();
            into.lock()
                .unwrap()
                .push((role.clone(), started.elapsed(), size));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
