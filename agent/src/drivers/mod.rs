//! Drivers: how a machine runs workloads. `docker` runs notebooks and endpoints as containers;
//! `process` is the supervisor the native drivers build on; `sim` runs nothing, for development
//! and tests.

pub mod docker;
pub mod process;
pub mod sim;

use einsora_core::agent::{Mode, StatusCode};
use einsora_core::driver::Isolation;
use einsora_proto::agent::v1 as pb;
use einsora_proto::convert::ProtoEnum;
use std::sync::Arc;
use tokio::sync::Notify;

/// The drivers this agent has, and what it last was told to run.
#[derive(Debug)]
pub struct Drivers {
    docker: Option<docker::Docker>,
    /// Notified when a driver's statuses changed between the sync loop's checks.
    changed: Arc<Notify>,
    sim: Option<sim::Sim>,
    /// Workloads no driver takes here, and why.
    refused: Vec<(String, u32, Mode, StatusCode)>,
}

impl Drivers {
    /// `docker` when its engine answers; `sim` only when asked for (development and tests).
    pub async fn start(
        state_dir: &std::path::Path,
        docker: Option<docker::DockerConfig>,
        sim: bool,
    ) -> Drivers {
        let changed = Arc::new(Notify::new());
        let docker = match docker {
            Some(config) => docker::Docker::detect(config, Arc::clone(&changed)).await,
            None => None,
        };
        Drivers {
            docker,
            changed,
            sim: sim.then(|| sim::Sim::open(state_dir.join("sim.json"))),
            refused: Vec::new(),
        }
    }

    pub fn names(&self) -> Vec<String> {
        let docker = self.docker.iter().map(|_| docker::NAME);
        let sim = self.sim.iter().map(|_| sim::NAME);
        docker.chain(sim).map(str::to_owned).collect()
    }

    /// Notified when statuses changed (the sync loop also checks every few seconds).
    pub fn changed(&self) -> Arc<Notify> {
        Arc::clone(&self.changed)
    }

    /// The model files endpoints can be started with here, sorted by path.
    pub async fn model_files(&self) -> Vec<einsora_core::machine::ModelFile> {
        match &self.docker {
            Some(docker) => docker.model_files().await,
            None => Vec::new(),
        }
    }

    /// Whether NVIDIA GPUs can be given to workloads here (a driver that can use them).
    pub fn nvidia(&self) -> bool {
        self.docker.as_ref().is_some_and(docker::Docker::nvidia)
    }

    /// Applies a complete desired state: each listed workload to its driver; a workload it
    /// wasn't told about is stopped and kept, never removed.
    pub fn apply(&mut self, desired: &[pb::DesiredWorkload]) {
        self.refused.clear();
        let listed: Vec<&str> = desired.iter().map(|d| d.workload_id.as_str()).collect();
        let mut on_docker = Vec::new();
        for d in desired {
            let Ok(mode) = Mode::from_field("mode", d.mode) else {
                continue;
            };
            let driver = d.spec.as_ref().map_or("", |s| s.driver.as_str());
            if let Some(code) = refusal(d, mode) {
                self.refused
                    .push((d.workload_id.clone(), d.attempt, mode, code));
                continue;
            }
            match (&mut self.sim, &self.docker, driver) {
                (Some(sim), _, sim::NAME) => sim.apply(&d.workload_id, d.attempt, mode),
                (_, Some(_), docker::NAME) => on_docker.push(docker::Wanted {
                    workload: d.workload_id.clone(),
                    attempt: d.attempt,
                    mode,
                    spec: d.spec.clone().unwrap_or_default(),
                }),
                _ => {
                    let code = StatusCode::DriverMissing;
                    self.refused
                        .push((d.workload_id.clone(), d.attempt, mode, code));
                }
            }
        }
        if let Some(docker) = &self.docker {
            docker.apply(on_docker);
        }
        if let Some(sim) = &mut self.sim {
            sim.park_unlisted(&listed);
            sim.forget_removed(&listed);
        }
    }

    /// Every workload's status, for the controller.
    pub fn statuses(&mut self) -> pb::WorkloadStatuses {
        let status = |workload: String, attempt, mode: Mode, code: StatusCode, driver: &str| {
            pb::WorkloadStatus {
                workload_id: workload,
                attempt,
                mode: pb::Mode::from(mode).into(),
                code: pb::StatusCode::from(code).into(),
                driver: driver.to_owned(),
                access_target: None,
            }
        };
        let mut workloads: Vec<pb::WorkloadStatus> = self
            .sim
            .iter_mut()
            .flat_map(|sim| sim.statuses())
            .map(|s| status(s.workload, s.attempt, s.mode, s.code, sim::NAME))
            .collect();
        for (id, seen) in self.docker.iter().flat_map(docker::Docker::statuses) {
            let mut s = status(id, seen.attempt, seen.mode, seen.code, docker::NAME);
            s.access_target = seen
                .target
                .map(|(socket_path, token)| pb::AccessTarget { socket_path, token });
            workloads.push(s);
        }
        workloads.extend(
            self.refused
                .iter()
                .map(|(id, attempt, mode, code)| status(id.clone(), *attempt, *mode, *code, "")),
        );
        let driver_restarts = self.docker.iter().map(docker::Docker::restarts).sum();
        pb::WorkloadStatuses {
            workloads,
            driver_restarts,
        }
    }
}

/// A weak-isolation driver refuses a workload that needs strong isolation: it never runs, so
/// stopping it is done and removing it leaves nothing.
fn refusal(d: &pb::DesiredWorkload, mode: Mode) -> Option<StatusCode> {
    let spec = d.spec.as_ref()?;
    let weak =
        einsora_core::driver::lookup(&spec.driver).is_some_and(|i| i.isolation == Isolation::Weak);
    if !(spec.requires_strong_isolation && weak) {
        return None;
    }
    Some(match mode {
        Mode::Run => StatusCode::IsolationRefused,
        Mode::Park => StatusCode::Stopped,
        Mode::Remove => StatusCode::Removed,
    })
}
