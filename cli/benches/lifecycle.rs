//! The controller's speed on the fake backend, on SQLite and on Postgres:
//! - create → running through the gateway with zero readiness delay: p50/p99 over 200
//!   sequential and 200 concurrent creates, each measured from just before its request to the
//!   `running` row of its timeline (the server's clock; same machine);
//! - admission throughput: 10,000 pending workloads in one region with capacity for all, seeded
//!   through the store; a controller then starts, and the rate is the admissions divided by the
//!   seconds from its start (process start and taking the lease included) to the last one.
//!
//! `cargo bench -p einsora --bench lifecycle` (BENCH_WORKLOADS sets the admission count).

// A test harness: a failed unwrap is a failed test, and it reads its own environment.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use einsora_core::ids::TenantId;
use einsora_store::{DatabaseUrl, NewTenant, QuotaClass};
use hyper::Method;
use serde_json::json;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use einsora_testkit::bench::{Report, Table, count, quantile, setting};
use support::{Api, Stack, created_by_bench, einsora, free_addr, install, notebook};

const CREATES: usize = 200;

fn main() -> anyhow::Result<()> {
    let workloads: usize = setting("BENCH_WORKLOADS", 10_000)?;
    let pg = einsora_testkit::TempPostgres::shared();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut report = Report::start(
        "lifecycle",
        "Controller lifecycle",
        "cargo bench -p einsora --bench lifecycle",
    );
    let mut creates = Table::new(
        &[
            "engine",
            "creates",
            "p50",
            "p99",
            "API p50",
            "API p99",
            "controller p50",
            "controller p99",
        ],
        2,
    );
    for (engine, url) in [("SQLite", None), ("Postgres", Some(pg.fresh_database()?))] {
        let capacity = format!("cpu-1c-2g={}", CREATES * 4);
        let settings = [
            ("EINSORA_CLUSTER_BACKEND", "fake"),
            ("EINSORA_FAKE_READY_DELAY", "0s"),
            ("EINSORA_FAKE_CAPACITY", capacity.as_str()),
        ];
        let stack = Stack::start(url.as_deref(), &["api", "gateway", "controller"], &settings)?;
        rt.block_on(async {
            let api = stack.api().await?;
            quotas_on(&api).await?;
            for concurrent in [false, true] {
                let all = create_to_running(&api, concurrent).await?;
                let mode = if concurrent {
                    format!("{CREATES} at once")
                } else {
                    format!("{CREATES} one after another")
                };
                let mut row = vec![engine.to_owned(), mode];
                for part in 0..3 {
                    let mut ms: Vec<f64> = all.iter().map(|m| m[part]).collect();
                    ms.sort_by(f64::total_cmp);
                    row.push(format!("{:.1}", quantile(&ms, 0.5)));
                    row.push(format!("{:.1}", quantile(&ms, 0.99)));
                }
                creates.row(row);
            }
            anyhow::Ok(())
        })?;
        drop(stack);
    }
    report.say(
        "create → running, ms from just before each request to its `running` row; the API's \
         part to its `pending` row, the controller's from there. The creator is in a team, and \
         the tenant, the team and the user each have a quota for the class (roomy), so every \
         create checks all three:",
    );
    report.table(&creates);
    let mut admitted = Table::new(&["engine", "admitted /s", "seconds from the start"], 1);
    for (engine, url) in [("SQLite", None), ("Postgres", Some(pg.fresh_database()?))] {
        let (rate, wall) = rt.block_on(admission(url.as_deref(), workloads))?;
        admitted.row(vec![
            engine.to_owned(),
            format!("{rate:.0}"),
            format!("{wall:.2}"),
        ]);
    }
    report.say(format!(
        "Admission of {} pending workloads, from the controller's process start:",
        count(workloads as u64)
    ));
    report.table(&admitted);
    report.finish()?;
    Ok(())
}

/// Puts the API's user in a team and gives the tenant, the team and the user a quota for the
/// benches' class, each roomy: every create then checks all three, as issue 19's burst asks.
async fn quotas_on(api: &Api) -> anyhow::Result<()> {
    let ok = |what: &str, (status, answer): (u16, serde_json::Value)| {
        anyhow::ensure!(status == 200, "{what} answered {status}: {answer}");
        Ok(answer)
    };
    let team = ok(
        "POST /v1/teams",
        api.send(Method::POST, "/v1/teams", Some(json!({ "name": "bench" })))
            .await?,
    )?;
    let me = ok("GET /v1/me", api.send(Method::GET, "/v1/me", None).await?)?;
    let (team, me) = (
        team["id"].as_str().unwrap_or_default(),
        me["user_id"].as_str().unwrap_or_default(),
    );
    let path = format!("/v1/users/{me}");
    ok(
        "PATCH /v1/users/{me}",
        api.send(Method::PATCH, &path, Some(json!({ "team_id": team })))
            .await?,
    )?;
    let limit = CREATES * 100;
    for (scope, subject) in [("tenant", ""), ("team", team), ("user", me)] {
        let body = json!({ "scope": scope, "subject_id": subject, "gpu_class": "cpu-1c-2g", "limit": limit });
        ok(
            "PUT /v1/quotas",
            api.send(Method::PUT, "/v1/quotas", Some(body)).await?,
        )?;
    }
    Ok(())
}

/// Creates `CREATES` notebooks (one after another, or all at once) and returns each one's
/// milliseconds from its request to its `running` row, and the two parts of that: to its
/// `pending` row (the API's create), and from there to `running` (the controller).
async fn create_to_running(api: &Arc<Api>, concurrent: bool) -> anyhow::Result<Vec<[f64; 3]>> {
    let run = uuid::Uuid::now_v7().simple().to_string();
    let mut started = Vec::with_capacity(CREATES);
    if concurrent {
        let mut tasks = Vec::new();
        for i in 0..CREATES {
            let api = Arc::clone(api);
            let name = format!("c{}-{i}", &run[20..]);
            tasks.push(tokio::spawn(async move {
                let at = OffsetDateTime::now_utc();
                api.create(&name).await.map(|id| (id, at))
            }));
        }
        for task in tasks {
            started.push(task.await??);
        }
    } else {
        for i in 0..CREATES {
            let at = OffsetDateTime::now_utc();
            let id = api.create(&format!("s{}-{i}", &run[20..])).await?;
            started.push((id, at));
            wait_running(api, &started[i].0).await?;
        }
    }
    let mut ms = Vec::with_capacity(CREATES);
    for (id, at) in &started {
        let (created, running) = wait_running(api, id).await?;
        let millis = |d: time::Duration| d.as_seconds_f64() * 1000.0;
        ms.push([
            millis(running - *at),
            millis(created - *at),
            millis(running - created),
        ]);
    }
    Ok(ms)
}

/// Waits for the workload's `running` row; returns when the server wrote its `pending` row (the
/// create) and that one.
async fn wait_running(api: &Api, id: &str) -> anyhow::Result<(OffsetDateTime, OffsetDateTime)> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, events) = api
            .send(Method::GET, &format!("/v1/workloads/{id}/events"), None)
            .await?;
        anyhow::ensure!(status == 200, "events answered {status}: {events}");
        let row = |state: &str| {
            events["events"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|e| e["to_state"] == state && e["note"] != true)
                .and_then(|e| e["at"].as_str())
                .map(|at| OffsetDateTime::parse(at, &Rfc3339))
        };
        if let (Some(created), Some(running)) = (row("pending"), row("running")) {
            return Ok((created?, running?));
        }
        anyhow::ensure!(Instant::now() < deadline, "{id} never ran");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Seeds `n` pending workloads, starts a controller with room for all, and returns the
/// admission rate and the seconds from its start to the last admission.
async fn admission(database: Option<&str>, n: usize) -> anyhow::Result<(f64, f64)> {
    let dir = tempfile::tempdir()?;
    let url = database.map_or_else(
        || format!("sqlite:{}/einsora.db", dir.path().display()),
        str::to_owned,
    );
    let env: Vec<(String, String)> = [
        ("EINSORA_DATA_DIR", dir.path().display().to_string()),
        ("EINSORA_DATABASE_URL", url.clone()),
        ("EINSORA_CONTROLLER_ADDR", free_addr()),
        ("EINSORA_AGENT_ADDR", free_addr()),
        ("EINSORA_CLUSTER_BACKEND", "fake".into()),
        ("EINSORA_FAKE_CAPACITY", format!("cpu-1c-2g={n}")),
        // Admission only: nothing becomes ready during the run.
        ("EINSORA_FAKE_READY_DELAY", "1h".into()),
        ("EINSORA_LOG", "warn".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    install(&env)?;
    let (store, _) = einsora_store::migrate(&DatabaseUrl::parse(&url)?).await?;
    let tenant = TenantId::new();
    store
        .create_tenant(&NewTenant {
            id: tenant,
            slug: "bench".into(),
            name: "Bench".into(),
            trusted: false,
        })
        .await?;
    store.set_quota(tenant, &QuotaClass::Default, None).await?;
    let region = einsora_core::region::Region::new("local")?;
    let by = created_by_bench();
    for i in 0..n {
        let w = notebook(tenant, None, &format!("w{i}"));
        store.create_workload(&w, &by).await?;
    }
    let started = Instant::now();
    let controller = support::spawn(einsora(&["controller"], &env))?;
    let deadline = started + Duration::from_secs(300);
    let wall = loop {
        let held = store.capacity_held(&region).await?;
        if held.get("cpu-1c-2g").copied().unwrap_or(0) >= n as u64 {
            break started.elapsed().as_secs_f64();
        }
        anyhow::ensure!(Instant::now() < deadline, "admission never finished");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    drop(controller);
    Ok((n as f64 / wall, wall))
}
