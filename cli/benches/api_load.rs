//! Open-loop load through the gateway (`support::open_loop`): reads (get, list) at 1,000 req/s
//! and creates at 350 req/s, on SQLite and on Postgres, with p50/p99/p99.9 latency.
//!
//! `cargo bench -p einsora --bench api_load` (BENCH_SECONDS sets each phase's length; default 10).

// A test harness: a failed unwrap is a failed test, and it reads its own environment.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use hyper::Method;
use serde_json::json;

use einsora_testkit::bench::{Report, Table, setting};
use support::{Api, Stack, open_loop};

fn main() -> anyhow::Result<()> {
    let seconds: u64 = setting("BENCH_SECONDS", 10)?;
    let length = Duration::from_secs(seconds);
    let mut report = Report::start(
        "api_load",
        "Gateway open-loop load",
        "cargo bench -p einsora --bench api_load",
    );
    let mut table = Table::new(
        &[
            "engine", "op", "rate /s", "sent /s", "p50 ms", "p99 ms", "p99.9 ms", "failed",
        ],
        2,
    );
    let pg = einsora_testkit::TempPostgres::shared();
    let engines = [("SQLite", None), ("Postgres", Some(pg.fresh_database()?))];
    for (engine, url) in engines {
        let stack = Stack::start(url.as_deref(), &["api", "gateway"], &[])?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        rt.block_on(async {
            let api = stack.api().await?;
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
                table.row(self::phase(&api, &op, (engine, name, rate), length).await);
            }
            anyhow::Ok(())
        })?;
        drop(stack);
    }
    report.say(format!(
        "Open loop, latency from each request's send, {seconds} s a phase, one run:"
    ));
    report.table(&table);
    report.finish()?;
    Ok(())
}

enum Op {
    Get(String),
    Create,
}

/// Sends `op` at `rate` per second for `phase`; a row of the table.
async fn phase(
    api: &Arc<Api>,
    op: &Op,
    (engine, name, rate): (&str, &str, f64),
    phase: Duration,
) -> Vec<String> {
    let run = uuid::Uuid::now_v7().simple().to_string();
    let outcome = open_loop::run(rate, phase, |i| {
        let api = Arc::clone(api);
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
        async move {
            let answer = api.send(request.0, &request.1, request.2).await;
            matches!(answer, Ok((200 | 202, _)))
        }
    })
    .await;
    vec![
        engine.to_owned(),
        name.to_owned(),
        format!("{rate:.0}"),
        format!("{:.0}", outcome.sent_per_s),
        format!("{:.2}", outcome.at(0.5)),
        format!("{:.2}", outcome.at(0.99)),
        format!("{:.2}", outcome.at(0.999)),
        outcome.failed.to_string(),
    ]
}
