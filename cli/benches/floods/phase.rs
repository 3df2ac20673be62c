//! One phase: a flood (or none) against one process for a window, while every well-behaved
//! client runs beside it; the attacked process's CPU and memory before, during and after.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use time::OffsetDateTime;
use tokio::time::Instant;

use super::agent::{self, Agent};
use super::legit::{self, Seen};
use super::slow::{self, Group, Held, How};
use super::tally::Tally;
use super::world::{Enrolled, World};
use super::{enroll, sync};
use crate::support::probe::{self, Usage};

/// The quiet span before a phase (CPU "before") and after it (CPU "after").
const BEFORE: Duration = Duration::from_millis(1500);
const AFTER: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Controller,
    Gateway,
    Access,
}

impl Target {
    pub fn name(self) -> &'static str {
        match self {
            Target::Controller => "controller",
            Target::Gateway => "gateway",
            Target::Access => "access",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flood {
    None,
    EnrollKept,
    EnrollFresh,
    SyncReports,
    SyncStreams,
    /// 880 slow or silent handshakes from 29 addresses (40 of them from one).
    AgentsSlow,
    /// 1,152 silent connections from 36 addresses, past the port's cap.
    AgentsOverCap,
    /// 600 connections that finish TLS and HTTP/2 and send no request.
    AgentsIdleTls,
    /// 900 slow or silent request heads.
    HttpSlow,
    /// 1,100 silent connections, past the port's cap.
    HttpOverCap,
}

#[derive(Debug, Clone, Copy)]
pub struct Phase {
    pub name: &'static str,
    pub flood: Flood,
    pub target: Target,
    pub window: Duration,
    /// Every round, or the first only.
    pub every_round: bool,
}

/// What a phase measured in one round.
#[derive(Debug, Default, Clone)]
pub struct Measured {
    pub before: Usage,
    pub during: Usage,
    pub after: Usage,
    pub rss_before: u64,
    pub rss_peak: u64,
    pub rss_after: u64,
    pub log_bytes: u64,
    pub tally: Option<Tally>,
    pub held: Vec<Held>,
    pub push: Seen,
    pub report: Seen,
    pub enrol: Seen,
    pub gateway: Seen,
    pub proxy: Seen,
    /// How the well-behaved agent's stream ended during the phase, if it did.
    pub agent_ends: Vec<String>,
    /// The flooding machine's flag if it was flagged during the phase: its word, and its
    /// latest time from the phase's start.
    pub flag: Option<(String, f64)>,
    /// Notebooks left undeleted after the phase.
    pub left: usize,
    /// The log lines written during the phase, by role, level and message.
    pub log_lines: BTreeMap<String, u64>,
}

/// What a phase runs against.
pub struct Setup {
    pub world: Arc<World>,
    pub agent: Agent,
    pub flooder: Enrolled,
    pub csr_pem: Arc<str>,
    pub endpoint: uuid::Uuid,
    /// The floods run here, apart from the well-behaved clients.
    pub floods: tokio::runtime::Handle,
}

fn ip(a: u8, b: u8, c: u8) -> Ipv4Addr {
    Ipv4Addr::new(127, a, b, c)
}

fn addresses(run: u8, n: u8) -> Vec<Ipv4Addr> {
    (1..=n).map(|d| ip(10, run, d)).collect()
}

/// Runs `phase` (its `run`-th phase overall, which picks its addresses).
pub async fn run(setup: &Setup, phase: &Phase, run: u8) -> anyhow::Result<Measured> {
    let world = &setup.world;
    let pid = match phase.target {
        Target::Controller => world.pids.controller,
        Target::Gateway => world.pids.gateway,
        Target::Access => world.pids.access,
    };
    let log_size = || std::fs::metadata(&world.log).map(|m| m.len()).unwrap_or(0);
    let mut m = Measured {
        before: probe::usage_over(pid, BEFORE).await?,
        rss_before: probe::rss_kib(pid)?,
        ..Measured::default()
    };
    let log_before = log_size();
    let started = Instant::now();
    let started_wall = OffsetDateTime::now_utc();
    let until = started + phase.window;
    let meter = probe::Meter::start(pid)?;
    let peak = tokio::spawn(probe::peak_rss(pid, until));
    let floods = Floods {
        world: Arc::clone(world),
        flooder: setup.flooder.clone(),
        csr: Arc::clone(&setup.csr_pem),
    };
    let flood = setup.floods.spawn(flood(floods, *phase, run, until));

    let enrol_from = |i: usize| IpAddr::V4(ip(2, run, 1 + (i / 8).min(250) as u8));
    let (pushed, enrol, gateway, proxy) = tokio::join!(
        agent::pushes(world, &setup.agent, phase.window),
        legit::enrolments(Arc::clone(world), phase.window, enrol_from),
        legit::gateway(world, phase.window),
        legit::proxy(world, phase.window, setup.endpoint),
    );
    let flooded = tokio::time::timeout(phase.window + Duration::from_secs(60), flood)
        .await
        .with_context(|| format!("{}: the flood never ended", phase.name))?
        .with_context(|| format!("{}: the flood failed", phase.name))?
        .with_context(|| phase.name)?;
    m.during = meter.read()?;
    m.rss_peak = peak.await??;
    let pushed = pushed?;
    (m.push, m.report) = (pushed.push, pushed.report);
    (m.enrol, m.gateway, m.proxy) = (enrol?, gateway?, proxy?);
    (m.tally, m.held) = flooded;
    m.agent_ends = setup.agent.ended_since(started);

    m.after = probe::usage_over(pid, AFTER).await?;
    m.rss_after = probe::rss_kib(pid)?;
    m.rss_peak = m.rss_peak.max(m.rss_after);
    m.log_bytes = log_size().saturating_sub(log_before);
    m.log_lines = log_lines(&world.log, log_before)?;
    if matches!(phase.flood, Flood::SyncReports | Flood::SyncStreams) {
        let flag = world.store.machine_flag(setup.flooder.id).await?;
        m.flag = flag
            .map(|f| (f.what, (f.last - started_wall).as_seconds_f64()))
            .filter(|(_, at)| *at >= 0.0);
    }
    m.left = agent::clean_up(world, &pushed.ids).await?;
    Ok(m)
}

type Flooded = (Option<Tally>, Vec<Held>);

/// What a flood needs, owned (it runs on the floods' runtime).
struct Floods {
    world: Arc<World>,
    flooder: Enrolled,
    csr: Arc<str>,
}

async fn flood(floods: Floods, phase: Phase, run: u8, until: Instant) -> anyhow::Result<Flooded> {
    let Floods {
        world,
        flooder,
        csr,
    } = floods;
    let from = IpAddr::V4(ip(0, 9, run));
    let window = phase.window;
    let target = match phase.target {
        Target::Controller => world.agents,
        Target::Gateway => world.gateway,
        Target::Access => world.access,
    };
    let half = |how_a: How, n: u8| {
        vec![
            Group {
                label: "trickled head",
                addresses: addresses(run, n),
                per_address: 30,
                how: how_a,
            },
            Group {
                label: "silent",
                addresses: (1..=n).map(|d| ip(10, run, 100 + d)).collect(),
                per_address: 30,
                how: How::Silent,
            },
        ]
    };
    Ok(match phase.flood {
        Flood::None => {
            tokio::time::sleep_until(until).await;
            (None, vec![])
        }
        Flood::EnrollKept => (Some(enroll::kept(world, from, csr, window).await?), vec![]),
        Flood::EnrollFresh => (Some(enroll::fresh(world, from, csr, window).await?), vec![]),
        Flood::SyncReports => (
            Some(sync::reports(world, flooder, from, csr, window).await?),
            vec![],
        ),
        Flood::SyncStreams => (
            Some(sync::streams(world, flooder, from, window).await?),
            vec![],
        ),
        Flood::AgentsSlow => {
            let mut groups = half(How::Trickle(slow::TLS_HELLO), 14);
            groups[0].label = "trickled ClientHello";
            groups.push(Group {
                label: "40 from one address",
                addresses: vec![ip(10, run, 250)],
                per_address: 40,
                how: How::Silent,
            });
            (None, slow::hold(target, &groups, until).await?)
        }
        Flood::AgentsOverCap => {
            let groups = [Group {
                label: "silent, 36 addresses × 32",
                addresses: addresses(run, 36),
                per_address: 32,
                how: How::Silent,
            }];
            (None, slow::hold(target, &groups, until).await?)
        }
        Flood::AgentsIdleTls => {
            let held = slow::idle_h2(world, addresses(run, 20), 30, until).await?;
            (None, vec![held])
        }
        Flood::HttpSlow => (
            None,
            slow::hold(target, &half(How::Trickle(slow::HTTP_HEAD), 15), until).await?,
        ),
        Flood::HttpOverCap => {
            let groups = [Group {
                label: "silent, 1,100",
                addresses: addresses(run, 11),
                per_address: 100,
                how: How::Silent,
            }];
            (None, slow::hold(target, &groups, until).await?)
        }
    })
}

/// The JSON lines of `log` from byte `from`, counted by role, level and message.
fn log_lines(log: &std::path::Path, from: u64) -> anyhow::Result<BTreeMap<String, u64>> {
    let mut file = std::fs::File::open(log)?;
    file.seek(SeekFrom::Start(from))?;
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    let mut lines = BTreeMap::new();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap_or_default();
        let word = |field: &serde_json::Value| field.as_str().unwrap_or("?").to_owned();
        let key = format!(
            "{} {} \"{}\"",
            word(&v["role"]),
            word(&v["level"]),
            word(&v["fields"]["message"])
        );
        *lines.entry(key).or_default() += 1;
    }
    Ok(lines)
}
