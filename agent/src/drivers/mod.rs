//! Drivers: how a machine runs workloads. `process` is the supervisor the native drivers build
//! on; `sim` runs nothing, for development and tests.

pub mod process;
pub mod sim;

use einsora_core::agent::{Mode, StatusCode};
use einsora_proto::agent::v1 as pb;
use einsora_proto::convert::ProtoEnum;

/// The drivers this agent has, and what it last was told to run.
#[derive(Debug)]
pub struct Drivers {
    sim: Option<sim::Sim>,
    /// Workloads whose driver this agent doesn't have: reported as such.
    missing: Vec<(String, u32, Mode)>,
}

impl Drivers {
    /// `sim` is offered only when asked for (development and tests).
    pub fn new(state_dir: &std::path::Path, sim: bool) -> Drivers {
        Drivers {
            sim: sim.then(|| sim::Sim::open(state_dir.join("sim.json"))),
            missing: Vec::new(),
        }
    }

    pub fn names(&self) -> Vec<String> {
        self.sim.iter().map(|_| sim::NAME.to_owned()).collect()
    }

    /// Applies a complete desired state: each listed workload to its driver; a workload it
    /// wasn't told about is stopped and kept, never removed.
    pub fn apply(&mut self, desired: &[pb::DesiredWorkload]) {
        self.missing.clear();
        let listed: Vec<&str> = desired.iter().map(|d| d.workload_id.as_str()).collect();
        for d in desired {
            let Ok(mode) = Mode::from_field("mode", d.mode) else {
                continue;
            };
            let driver = d.spec.as_ref().map_or("", |s| s.driver.as_str());
            match (&mut self.sim, driver) {
                (Some(sim), sim::NAME) => sim.apply(&d.workload_id, d.attempt, mode),
                _ => self.missing.push((d.workload_id.clone(), d.attempt, mode)),
            }
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
        workloads.extend(self.missing.iter().map(|(id, attempt, mode)| {
            status(id.clone(), *attempt, *mode, StatusCode::DriverMissing, "")
        }));
        pb::WorkloadStatuses { workloads }
    }
}
