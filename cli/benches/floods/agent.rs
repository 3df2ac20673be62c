//! The well-behaved agent: a machine of its own, its Sync stream from its own address, held
//! for the whole bench and reopened if it ends. It is pushed the notebooks the bench creates
//! for it through the store, 5 a second, and reports each one ready: push = the
//! `provisioning` row to the desired state arriving; report = the ready report sent to the
//! `running` row. Between phases its notebooks are deleted.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use einsora_core::ids::WorkloadId;
use einsora_core::lifecycle::State;
use einsora_core::reasons::{Actor, Credential, Reason, UserAction};
use einsora_proto::agent::v1 as pb;
use einsora_store::Transition;
use time::OffsetDateTime;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::legit::{Seen, io_word, open_loop};
use super::world::{Enrolled, PATIENCE, World, code};
use crate::support::agents::inventory;
use crate::support::{created_by_bench, notebook};

/// What the well-behaved agent saw, by workload.
#[derive(Debug, Default)]
struct AgentLog {
    /// When the desired state first told it to run the workload.
    received: HashMap<String, OffsetDateTime>,
    /// When it first reported the workload ready.
    ready_sent: HashMap<String, OffsetDateTime>,
    /// When and how its streams ended.
    ended: Vec<(Instant, String)>,
}

/// The well-behaved agent: its stream held for the whole bench, reopened when it ends.
pub struct Agent {
    log: Arc<Mutex<AgentLog>>,
    task: tokio::task::JoinHandle<()>,
}

type Opened = (
    mpsc::Sender<pb::AgentReport>,
    tonic::Streaming<pb::DesiredState>,
);

impl Agent {
    /// Its first stream opens here (an error if it can't), then it runs on its own.
    pub async fn start(
        world: Arc<World>,
        machine: Enrolled,
        from: IpAddr,
    ) -> anyhow::Result<Agent> {
        let opened = open(&world, &machine, from).await?;
        let log: Arc<Mutex<AgentLog>> = Arc::default();
        let task = tokio::spawn(run(world, machine, from, opened, Arc::clone(&log)));
        Ok(Agent { log, task })
    }

    /// How its streams ended since `since`.
    pub fn ended_since(&self, since: Instant) -> Vec<String> {
        let log = self.log.lock().unwrap_or_else(PoisonError::into_inner);
        log.ended
            .iter()
            .filter(|(at, _)| *at >= since)
            .map(|(_, why)| why.clone())
            .collect()
    }

    fn seen(&self, id: &str) -> (Option<OffsetDateTime>, Option<OffsetDateTime>) {
        let log = self.log.lock().unwrap_or_else(PoisonError::into_inner);
        (
            log.received.get(id).copied(),
            log.ready_sent.get(id).copied(),
        )
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn open(world: &World, machine: &Enrolled, from: IpAddr) -> anyhow::Result<Opened> {
    let inventory = inventory("legit", 4096, 16 << 40);
    world.port.open_stream(from, machine, inventory, 16).await
}

/// Serves streams until the bench aborts it (or, at the latest, after an hour).
async fn run(
    world: Arc<World>,
    machine: Enrolled,
    from: IpAddr,
    first: Opened,
    log: Arc<Mutex<AgentLog>>,
) {
    let until = Instant::now() + Duration::from_secs(3600);
    let mut opened = Some(first);
    while Instant::now() < until {
        let why = match opened.take() {
            Some(o) => serve(o, &log).await,
            None => match open(&world, &machine, from).await {
                Ok(o) => serve(o, &log).await,
                Err(e) => format!("reopening: {}", io_word(&e)),
            },
        };
        log.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .ended
            .push((Instant::now(), why));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Takes desired states and reports every workload in them; heartbeats every 10 s. Returns
/// how the stream ended.
async fn serve((tx, mut desired): Opened, log: &Mutex<AgentLog>) -> String {
    let mut current: Vec<pb::DesiredWorkload> = Vec::new();
    let mut heartbeat = tokio::time::interval(Duration::from_secs(10));
    loop {
        tokio::select! {
            state = desired.message() => match state {
                Ok(Some(state)) => {
                    let now = OffsetDateTime::now_utc();
                    current = state.workloads;
                    let mut log = log.lock().unwrap_or_else(PoisonError::into_inner);
                    for w in current.iter().filter(|w| w.mode == pb::Mode::Run as i32) {
                        log.received.entry(w.workload_id.clone()).or_insert(now);
                        log.ready_sent.entry(w.workload_id.clone()).or_insert(now);
                    }
                }
                Ok(None) => return "closed".into(),
                Err(status) => return code(status.code()),
            },
            _ = heartbeat.tick() => {}
        }
        let report = statuses(&current);
        match tokio::time::timeout(PATIENCE, tx.send(report)).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return "closed".into(),
            Err(_) => return "its reports weren't taken".into(),
        }
    }
}

/// Every workload of the desired state as done: run → ready, park → stopped, remove → removed.
fn statuses(workloads: &[pb::DesiredWorkload]) -> pb::AgentReport {
    let workloads = workloads
        .iter()
        .map(|w| {
            let code = match pb::Mode::try_from(w.mode) {
                Ok(pb::Mode::Run) => pb::StatusCode::Ready,
                Ok(pb::Mode::Park) => pb::StatusCode::Stopped,
                _ => pb::StatusCode::Removed,
            };
            pb::WorkloadStatus {
                workload_id: w.workload_id.clone(),
                attempt: w.attempt,
                mode: w.mode,
                code: code as i32,
                driver: "sim".into(),
                access_target: None,
            }
        })
        .collect();
    pb::AgentReport {
        report: Some(pb::agent_report::Report::Statuses(pb::WorkloadStatuses {
            workloads,
            ..Default::default()
        })),
    }
}

/// What the agent saw of the notebooks created for it: pushes and reports.
pub struct Pushed {
    pub push: Seen,
    pub report: Seen,
    pub ids: Vec<WorkloadId>,
}

/// Creates notebooks for the agent's machine, 5 a second for `window`, then waits up to 8 s
/// for them to run and reads their timelines.
pub async fn pushes(world: &Arc<World>, agent: &Agent, window: Duration) -> anyhow::Result<Pushed> {
    let ids: Arc<Mutex<Vec<WorkloadId>>> = Arc::default();
    let created = open_loop(5.0, window, |i| {
        let (world, ids) = (Arc::clone(world), Arc::clone(&ids));
        async move {
            let w = notebook(
                world.tenant,
                Some(world.owner),
                &format!("p{}-{i}", &uuid::Uuid::now_v7().simple().to_string()[20..]),
            );
            match world.store.create_workload(&w, &created_by_bench()).await {
                Ok(_) => {
                    ids.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(w.id);
                    Ok(())
                }
                Err(_) => Err("create failed".to_owned()),
            }
        }
    })
    .await?;
    let ids = std::mem::take(&mut *ids.lock().unwrap_or_else(PoisonError::into_inner));
    let deadline = Instant::now() + Duration::from_secs(8);
    for id in &ids {
        loop {
            let state = world.store.workload(*id).await?.map(|w| w.state);
            if state == Some(State::Running) || Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let mut push = Seen::default();
    for (why, n) in &created.failures {
        push.sent += n;
        *push.failures.entry(why.clone()).or_default() += n;
    }
    let mut report = Seen::default();
    for id in &ids {
        let events = world.store.events(*id).await?;
        let at = |to: State| {
            events
                .iter()
                .find(|e| e.to == to && !e.is_note())
                .map(|e| e.at)
        };
        let (admitted, running) = (at(State::Provisioning), at(State::Running));
        let (received, ready) = agent.seen(&id.to_string());
        let waiting = match admitted {
            Some(_) => String::new(),
            None => world
                .store
                .workload(*id)
                .await?
                .map(|w| w.reason)
                .unwrap_or_default(),
        };
        let ms = |from: OffsetDateTime, to: OffsetDateTime| {
            Duration::from_secs_f64((to - from).as_seconds_f64().max(0.0))
        };
        push.record(
            match (admitted, received) {
                (Some(a), Some(r)) => ms(a, r),
                _ => Duration::ZERO,
            },
            match (admitted, received) {
                (Some(_), Some(_)) => Ok(()),
                (None, _) => Err(format!("not admitted in 8 s ({waiting})")),
                (Some(_), None) => Err("not pushed in 8 s".to_owned()),
            },
        );
        if let Some(sent) = ready {
            report.record(
                running.map_or(Duration::ZERO, |r| ms(sent, r)),
                running
                    .map(|_| ())
                    .ok_or_else(|| "not running in 8 s".to_owned()),
            );
        }
    }
    Ok(Pushed { push, report, ids })
}

/// Deletes the notebooks (as their owner would) and waits, up to 20 s, for them to be gone.
/// Returns how many weren't.
pub async fn clean_up(world: &World, ids: &[WorkloadId]) -> anyhow::Result<usize> {
    let reason = Reason::Requested {
        action: UserAction::Delete,
        by: Actor {
            subject: "bench".into(),
            credential: Credential::Dev,
        },
    };
    for id in ids {
        // A lost race with the controller is tried again on a fresh read.
        for _ in 0..3 {
            let Some(w) = world.store.workload(*id).await? else {
                break;
            };
            if matches!(w.state, State::Deleting | State::Deleted) {
                break;
            }
            let change = Transition {
                workload: &w,
                to: State::Deleting,
                reason: &reason,
                admission: None,
                fence: None,
            };
            if world.store.transition(&change).await.is_ok() {
                break;
            }
        }
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut left = ids.len();
    while Instant::now() < deadline {
        left = 0;
        for id in ids {
            if world
                .store
                .workload(*id)
                .await?
                .is_some_and(|w| w.state != State::Deleted)
            {
                left += 1;
            }
        }
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Ok(left)
}

/// Waits (up to 70 s) until a notebook created for the agent runs: after its start the
/// controller places nothing until every machine of the region reconnected or 45 s passed.
pub async fn placing(world: &World) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let w = notebook(world.tenant, Some(world.owner), "first");
    world.store.create_workload(&w, &created_by_bench()).await?;
    let deadline = started + Duration::from_secs(70);
    loop {
        let state = world.store.workload(w.id).await?.map(|w| w.state);
        if state == Some(State::Running) {
            break;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the agent's first notebook never ran ({state:?})"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let waited = started.elapsed();
    let left = clean_up(world, &[w.id]).await?;
    anyhow::ensure!(left == 0, "the agent's first notebook was never deleted");
    Ok(waited)
}
