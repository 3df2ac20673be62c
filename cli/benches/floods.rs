//! Floods against the hardened ports, each for a bounded time while well-behaved clients keep
//! working, against real processes of the release binary on loopback (the api, the
//! controller on the agent backend, the gateway and the access proxy, SQLite):
//! - Enroll with bad tokens from one address, on kept connections and on a new connection
//!   each (the per-address Enroll limit, the per-address connection cap);
//! - one machine's Sync stream flooding statuses and renewals, and the same machine reopening
//!   streams as fast as they open (the per-machine report budgets, one live stream per
//!   machine; the machine should be flagged);
//! - slow and silent connections against the agents' port (TLS handshake timeout, the first
//!   request's header timeout, the caps per address and in all), the gateway and the proxy
//!   (their header-read timeout and connection cap).
//!
//! For each: the attacked process's CPU (`/proc/<pid>/stat` utime + stime over wall time) and
//! `VmRSS` before, at the peak and after; the flood's own counts; and what the well-behaved
//! clients saw (successes, p50/p99), beside the same clients with no flood in the same run.
//! Prints Markdown and writes it to target/bench-results/floods.md.
//!
//! `cargo bench -p einsora --bench floods` (BENCH_SECONDS per flood, default 10; BENCH_ROUNDS,
//! default 3; the slow-connection phases last as long as the timeouts they wait for; the
//! phases past the caps and the idle-after-TLS one run in the first round only; BENCH_PHASES
//! keeps only the phases whose names contain one of its comma-separated words).

// A test harness: a failed unwrap is a failed test, and it reads its own environment.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod support;

#[path = "floods/agent.rs"]
mod agent;
#[path = "floods/enroll.rs"]
mod enroll;
#[path = "floods/legit.rs"]
mod legit;
#[path = "floods/phase.rs"]
mod phase;
#[path = "floods/report.rs"]
mod report;
#[path = "floods/slow.rs"]
mod slow;
#[path = "floods/sync.rs"]
mod sync;
#[path = "floods/tally.rs"]
mod tally;
#[path = "floods/world.rs"]
mod world;

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use einsora_testkit::bench::{Report, setting};
use phase::{Flood, Measured, Phase, Setup, Target};

fn main() -> anyhow::Result<()> {
    let seconds = setting::<u64>("BENCH_SECONDS", 10)?.clamp(1, 120);
    let rounds = setting::<usize>("BENCH_ROUNDS", 3)?.clamp(1, 10);
    let mut report = Report::start("floods", "Floods", "cargo bench -p einsora --bench floods");
    let began = std::time::Instant::now();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let floods = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("flood")
        .enable_all()
        .build()?;
    let ran = rt.block_on(bench(
        floods.handle().clone(),
        Duration::from_secs(seconds),
        rounds,
    ));
    floods.shutdown_timeout(Duration::from_secs(1));
    let (phases, mut footer) = ran?;
    footer.push(format!(
        "The whole bench took {:.0} s.",
        began.elapsed().as_secs_f64()
    ));
    report.markdown(&report::render(&phases, &footer));
    report.finish()?;
    Ok(())
}

fn phases(seconds: Duration) -> Vec<Phase> {
    let phase = |name, flood, target, window, every_round| Phase {
        name,
        flood,
        target,
        window,
        every_round,
    };
    let s = Duration::from_secs;
    use Target::{Access, Controller, Gateway};
    vec![
        phase("quiet (no flood)", Flood::None, Controller, seconds, true),
        phase(
            "enroll: bad tokens, kept connections",
            Flood::EnrollKept,
            Controller,
            seconds,
            true,
        ),
        phase(
            "enroll: bad tokens, a connection each",
            Flood::EnrollFresh,
            Controller,
            seconds,
            true,
        ),
        phase(
            "sync: reports and renewals",
            Flood::SyncReports,
            Controller,
            seconds,
            true,
        ),
        phase(
            "sync: streams reopened",
            Flood::SyncStreams,
            Controller,
            seconds,
            true,
        ),
        phase(
            "agents' port: 880 slow handshakes",
            Flood::AgentsSlow,
            Controller,
            s(13),
            true,
        ),
        phase(
            "gateway: 900 slow heads",
            Flood::HttpSlow,
            Gateway,
            s(13),
            true,
        ),
        phase(
            "proxy: 900 slow heads",
            Flood::HttpSlow,
            Access,
            s(13),
            true,
        ),
        phase(
            "agents' port: 600 idle after TLS",
            Flood::AgentsIdleTls,
            Controller,
            s(34),
            false,
        ),
        phase(
            "agents' port: 1,152 past the cap",
            Flood::AgentsOverCap,
            Controller,
            s(22),
            false,
        ),
        phase(
            "gateway: 1,100 past the cap",
            Flood::HttpOverCap,
            Gateway,
            s(22),
            false,
        ),
    ]
}

type Results = (Vec<(Phase, Vec<Measured>)>, Vec<String>);

async fn bench(
    floods: tokio::runtime::Handle,
    seconds: Duration,
    rounds: usize,
) -> anyhow::Result<Results> {
    eprintln!("starting the installation");
    let world = Arc::new(world::World::start().await?);
    let legit_ip = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
    let legit_machine = world.enrol(legit_ip, "legit").await?;
    let flooder = world
        .enrol(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3)), "flooder")
        .await?;
    let agent = agent::Agent::start(Arc::clone(&world), legit_machine.clone(), legit_ip).await?;
    let (csr_pem, _key) = einsora_runtime::pki::csr()?;
    let csr_pem: Arc<str> = csr_pem.into();
    let setup = Setup {
        world: Arc::clone(&world),
        agent,
        flooder,
        csr_pem,
        endpoint: uuid::Uuid::now_v7(),
        floods,
    };

    let waited = agent::placing(&world).await?;
    eprintln!("the controller placed the first notebook after {waited:.1?}");
    // A short warm-up, not counted: every well-behaved client must work before any flood.
    let warm = Phase {
        name: "warm-up",
        flood: Flood::None,
        target: Target::Controller,
        window: Duration::from_secs(3),
        every_round: true,
    };
    let w = phase::run(&setup, &warm, 1).await?;
    let log_tail = || {
        let log = std::fs::read_to_string(&world.log).unwrap_or_default();
        let lines: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("\"role\":\"controller\""))
            .collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    };
    for (name, seen) in [
        ("agent push", &w.push),
        ("agent report", &w.report),
        ("enrolment", &w.enrol),
        ("gateway GET", &w.gateway),
        ("proxy GET", &w.proxy),
    ] {
        anyhow::ensure!(
            seen.sent > 0 && seen.ok == seen.sent,
            "warm-up: {name} {} of {} ({:?}); the log ends:\n{}",
            seen.ok,
            seen.sent,
            seen.failures,
            log_tail()
        );
    }

    // BENCH_PHASES: only the phases whose names contain one of these (comma-separated).
    let only: Vec<String> = std::env::var("BENCH_PHASES")
        .map(|v| {
            v.split(',')
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .collect()
        })
        .unwrap_or_default();
    let list: Vec<Phase> = phases(seconds)
        .into_iter()
        .filter(|p| only.is_empty() || only.iter().any(|o| p.name.contains(o.as_str())))
        .collect();
    let mut results: Vec<(Phase, Vec<Measured>)> = list.iter().map(|p| (*p, Vec::new())).collect();
    let mut run: u8 = 1;
    for round in 0..rounds {
        for (i, p) in list.iter().enumerate() {
            if !p.every_round && round > 0 {
                continue;
            }
            run = run
                .checked_add(1)
                .ok_or_else(|| anyhow::anyhow!("too many phases"))?;
            eprintln!("round {}/{rounds}: {}", round + 1, p.name);
            let m = phase::run(&setup, p, run)
                .await
                .map_err(|e| e.context(format!("round {}: {}", round + 1, p.name)))?;
            results[i].1.push(m);
        }
    }

    let mut footer = Vec::new();
    let flag = |f: Option<einsora_store::MachineFlag>| match f {
        Some(f) => format!(
            "flagged for {} (first {}, latest {})",
            f.what, f.since, f.last
        ),
        None => "not flagged".to_owned(),
    };
    footer.push(format!(
        "The flooding machine: {}. The well-behaved agent's machine: {}.",
        flag(world.store.machine_flag(setup.flooder.id).await?),
        flag(world.store.machine_flag(legit_machine.id).await?),
    ));
    drop(setup);
    Ok((results, footer))
}
