//! Hollow agents: many machine identities in this one process, each enrolled with its own
//! token (the real Enroll RPC, TLS to the installation's CA, a CSR) from a loopback address
//! of its own (eight to an address), and holding its own Sync stream over mutual
//! TLS, against one real controller on the agent backend. Reports the controller's RSS per
//! held stream, its CPU at steady state, and the latency from a workload's admission (its
//! `provisioning` row) to its machine receiving the desired state that runs it, over every push.
//!
//! It checks itself: at the end, every agent's stream must still be open on both sides (the
//! bench's task alive, the controller's ESTABLISHED connection on its port in /proc/net/tcp) and
//! the controller must have heard from every machine (its `last_seen_at` in the store); every
//! push must have arrived. Otherwise the run fails rather than print a figure.
//!
//! `cargo bench -p einsora --bench agents` (BENCH_AGENTS=1000,5000,10000 by default;
//! BENCH_PUSHES, 200, notebooks placed at each size).

// A test harness: a failed unwrap is a failed test, and it reads its own environment.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod support;

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use einsora_core::lifecycle::State;
use einsora_proto::agent::v1 as pb;
use einsora_store::DatabaseUrl;
use einsora_testkit::bench::{Report, Table, count, quantile, setting};
use time::OffsetDateTime;

use support::agents::{AgentsPort, Enrolled, enrolment_tokens, inventory, owner};
use support::{created_by_bench, einsora, free_addr, install, notebook, probe};

/// When each workload's desired state reached its machine.
type Received = Arc<Mutex<HashMap<String, OffsetDateTime>>>;

fn main() -> anyhow::Result<()> {
    let counts = setting("BENCH_AGENTS", "1000,5000,10000".to_owned())?
        .split(',')
        .map(|n| n.trim().parse::<usize>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::anyhow!("BENCH_AGENTS: {e} (counts between commas)"))?;
    let pushes: usize = setting("BENCH_PUSHES", 200)?;
    let mut report = Report::start(
        "agents",
        "Hollow agents",
        "cargo bench -p einsora --bench agents",
    );
    let mut table = Table::new(
        &[
            "agents",
            "streams held at the end",
            "controller RSS MB",
            "per held stream KiB",
            "controller CPU (one core) %",
            "pushes",
            "push p50 ms",
            "push p99 ms",
            "push max ms",
        ],
        0,
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    for n in counts {
        table.row(rt.block_on(run(n, pushes))?);
    }
    report.say(
        "The controller's RSS less its RSS before any agent connected, per held stream; CPU over \
         10 s of steady state; push: a workload's `provisioning` row to its desired state reaching \
         the hollow agent:",
    );
    report.table(&table);
    report.finish()?;
    Ok(())
}

async fn run(n: usize, pushes: usize) -> anyhow::Result<Vec<String>> {
    let started_at = OffsetDateTime::now_utc();
    let dir = tempfile::tempdir()?;
    let url = format!("sqlite:{}/einsora.db", dir.path().display());
    let agents_addr = free_addr();
    let env: Vec<(String, String)> = [
        ("EINSORA_DATA_DIR", dir.path().display().to_string()),
        ("EINSORA_DATABASE_URL", url.clone()),
        ("EINSORA_CONTROLLER_ADDR", free_addr()),
        ("EINSORA_AGENT_ADDR", agents_addr.clone()),
        ("EINSORA_CLUSTER_BACKEND", "agent".into()),
        ("EINSORA_CONTROLLER_INTERVAL", "1s".into()),
        ("EINSORA_LOG", "warn".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    install(&env)?;
    let (store, _) = einsora_store::migrate(&DatabaseUrl::parse(&url)?).await?;
    let (tenant, user) = owner(&*store, "owner").await?;
    let ca_pem = std::fs::read_to_string(dir.path().join("pki/ca.pem"))?;
    let tokens = enrolment_tokens(&*store, (tenant, user), &ca_pem, n, "bench").await?;
    let controller = support::spawn(einsora(&["controller"], &env))?;
    let pid = controller.pid();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let baseline = probe::rss_kib(pid)?;

    let port = Arc::new(AgentsPort::new(agents_addr.parse()?, ca_pem));
    let received: Received = Arc::default();
    let mut streams = Vec::with_capacity(n);
    for (i, token) in tokens.into_iter().enumerate() {
        let from = address(i);
        let machine = port.enrol(from, token, &format!("hollow-{i}")).await?;
        streams.push(tokio::spawn(hollow(
            Arc::clone(&port),
            from,
            machine,
            Arc::clone(&received),
        )));
    }
    // Let every stream settle into steady state, then measure.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let rss = probe::rss_kib(pid)?;
    let cpu = probe::usage_over(pid, Duration::from_secs(10))
        .await?
        .process;

    let mut ids = Vec::with_capacity(pushes);
    let by = created_by_bench();
    for i in 0..pushes {
        let w = notebook(tenant, Some(user), &format!("push-{i}"));
        store.create_workload(&w, &by).await?;
        ids.push(w.id);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut ms = Vec::with_capacity(pushes);
    let deadline = Instant::now() + Duration::from_secs(30);
    for id in &ids {
        loop {
            let admitted = store
                .events(*id)
                .await?
                .into_iter()
                .find(|e| e.to == State::Provisioning && !e.is_note())
                .map(|e| e.at);
            let got = received.lock().unwrap().get(&id.to_string()).copied();
            if let (Some(admitted), Some(got)) = (admitted, got) {
                ms.push((got - admitted).as_seconds_f64() * 1000.0);
                break;
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "{n} agents: {} of {pushes} pushes arrived within 30 s",
                ms.len()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    ms.sort_by(f64::total_cmp);

    // Every stream still held, seen from both ends, and every machine heard from.
    let alive = streams.iter().filter(|s| !s.is_finished()).count();
    let port: u16 = agents_addr
        .rsplit_once(':')
        .map_or(Ok(0), |(_, p)| p.parse())?;
    let server_side = probe::established(port, |_| true)?;
    let heard = store
        .machines_of(tenant)
        .await?
        .into_iter()
        .filter(|m| m.last_seen_at.is_some_and(|at| at >= started_at))
        .count();
    let mut ended = Vec::new();
    for s in streams {
        if s.is_finished() {
            match s.await {
                Ok(Ok(())) => ended.push("ended by the controller".to_owned()),
                Ok(Err(e)) => ended.push(format!("{e:#}")),
                Err(e) => ended.push(e.to_string()),
            }
        } else {
            s.abort();
        }
    }
    ended.sort();
    ended.dedup();
    let held = alive.min(server_side);
    anyhow::ensure!(
        held >= n && heard >= n,
        "{n} agents: {alive} streams alive in the bench, {server_side} connections held by the \
         controller, {heard} machines heard from; the streams that ended: {}",
        ended.join("; ")
    );
    let per_stream = rss.saturating_sub(baseline) as f64 / held as f64;
    drop(controller);
    Ok(vec![
        count(n as u64),
        count(held as u64),
        format!("{:.1}", rss as f64 / 1024.0),
        format!("{per_stream:.1}"),
        format!("{cpu:.1}"),
        count(ms.len() as u64),
        format!("{:.1}", quantile(&ms, 0.5)),
        format!("{:.1}", quantile(&ms, 0.99)),
        format!("{:.1}", quantile(&ms, 1.0)),
    ])
}

/// Where agent `i` comes from: eight machines to a loopback address, within the port's limits
/// per address (enrolments a minute, connections at once), as a lab's machines would each have
/// their own.
fn address(i: usize) -> IpAddr {
    let k = i / 8 + 1;
    IpAddr::V4(Ipv4Addr::new(127, 20, (k >> 8) as u8, (k & 0xff) as u8))
}

/// One hollow agent: its inventory, then heartbeats; notes when each workload's desired state
/// first arrives.
async fn hollow(
    port: Arc<AgentsPort>,
    from: IpAddr,
    machine: Enrolled,
    received: Received,
) -> anyhow::Result<()> {
    let (tx, mut desired) = port
        .open_stream(from, &machine, inventory("hollow", 4, 8 << 30), 4)
        .await?;
    let mut heartbeat = tokio::time::interval(Duration::from_secs(10));
    loop {
        tokio::select! {
            state = desired.message() => {
                let Some(state) = state? else { return Ok(()) };
                let now = OffsetDateTime::now_utc();
                let mut seen = received.lock().unwrap();
                for w in state.workloads {
                    seen.entry(w.workload_id).or_insert(now);
                }
            }
            _ = heartbeat.tick() => {
                let statuses = pb::AgentReport { report: Some(pb::agent_report::Report::Statuses(pb::WorkloadStatuses::default())) };
                tx.send(statuses).await?;
            }
        }
    }
}
