//! `sim`: runs nothing. For development and tests only: an agent offers it only when
//! EINSORA_AGENT_SIM is true, never in a normal install, so a user's notebook can't "run" on
//! it. It follows its desired state like a real driver (starting, then ready; stopped; removed)
//! and keeps which attempt it started in its state directory, so an attempt is started at most
//! once across agent restarts.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use einsora_core::agent::{Mode, StatusCode};
use serde::{Deserialize, Serialize};

pub const NAME: &str = "sim";
/// How long a sim workload takes to become ready.
const READY_AFTER: Duration = Duration::from_millis(200);

/// One workload as the sim driver keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Entry {
    attempt: u32,
    /// The mode's word (`run`, `park`, `remove`).
    mode: String,
    /// When its current mode was applied (seconds since the epoch, as f64).
    since: f64,
}

impl Entry {
    fn mode(&self) -> Mode {
        self.mode.parse().unwrap_or(Mode::Park)
    }
}

#[derive(Debug)]
pub struct Sim {
    path: PathBuf,
    entries: BTreeMap<String, Entry>,
}

/// A workload's status as the sim driver reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimStatus {
    pub workload: String,
    pub attempt: u32,
    pub mode: Mode,
    pub code: StatusCode,
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl Sim {
    /// The sim driver's state kept in `path` (none yet is fine; an unreadable file starts empty).
    pub fn open(path: PathBuf) -> Sim {
        let entries = std::fs::read(&path)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default();
        Sim { path, entries }
    }

    /// Whether `attempt` of `workload` was started (or parked) here already.
    pub fn has_attempt(&self, workload: &str, attempt: u32) -> bool {
        self.entries
            .get(workload)
            .is_some_and(|e| e.attempt == attempt)
    }

    /// Applies a workload's desired mode for an attempt.
    pub fn apply(&mut self, workload: &str, attempt: u32, mode: Mode) {
        let current = self.entries.get(workload);
        if current.is_some_and(|e| e.attempt == attempt && e.mode() == mode) {
            return;
        }
        self.entries.insert(
            workload.to_owned(),
            Entry {
                attempt,
                mode: mode.as_str().to_owned(),
                since: now(),
            },
        );
        self.save();
    }

    /// A workload it wasn't told about is stopped and kept, never removed.
    pub fn park_unlisted(&mut self, listed: &[&str]) {
        let unlisted: Vec<(String, u32)> = self
            .entries
            .iter()
            .filter(|(id, e)| !listed.contains(&id.as_str()) && e.mode() == Mode::Run)
            .map(|(id, e)| (id.clone(), e.attempt))
            .collect();
        for (id, attempt) in unlisted {
            self.apply(&id, attempt, Mode::Park);
        }
    }

    /// Every workload's status now. A removed one is reported once more, then forgotten.
    pub fn statuses(&mut self) -> Vec<SimStatus> {
        let now = now();
        let statuses: Vec<SimStatus> = self
            .entries
            .iter()
            .map(|(id, e)| SimStatus {
                workload: id.clone(),
                attempt: e.attempt,
                mode: e.mode(),
                code: match e.mode() {
                    Mode::Run if now - e.since < READY_AFTER.as_secs_f64() => StatusCode::Starting,
                    Mode::Run => StatusCode::Ready,
                    Mode::Park => StatusCode::Stopped,
                    Mode::Remove => StatusCode::Removed,
                },
            })
            .collect();
        statuses
    }

    /// Forgets removed workloads the controller was told about.
    pub fn forget_removed(&mut self, listed: &[&str]) {
        let before = self.entries.len();
        self.entries
            .retain(|id, e| e.mode() != Mode::Remove || listed.contains(&id.as_str()));
        if self.entries.len() != before {
            self.save();
        }
    }

    fn save(&self) {
        let tmp = self.path.with_extension("tmp");
        let written = serde_json::to_vec(&self.entries)
            .map_err(std::io::Error::other)
            .and_then(|bytes| std::fs::write(&tmp, bytes))
            .and_then(|()| std::fs::rename(&tmp, &self.path));
        if let Err(e) = written {
            tracing::warn!(path = %self.path.display(), error = %e, "can't save the sim driver's state");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_starts_then_is_ready_stops_and_removes_and_remembers_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sim.json");
        let mut sim = Sim::open(path.clone());
        sim.apply("w1", 1, Mode::Run);
        assert_eq!(sim.statuses()[0].code, StatusCode::Starting);
        std::thread::sleep(READY_AFTER + Duration::from_millis(50));
        assert_eq!(sim.statuses()[0].code, StatusCode::Ready);
        let mut restarted = Sim::open(path.clone());
        assert_eq!(
            restarted.statuses()[0].code,
            StatusCode::Ready,
            "attempts survive restarts"
        );
        restarted.park_unlisted(&[]);
        assert_eq!(
            restarted.statuses()[0].code,
            StatusCode::Stopped,
            "unlisted: stopped, kept"
        );
        restarted.apply("w1", 1, Mode::Remove);
        assert_eq!(restarted.statuses()[0].code, StatusCode::Removed);
        restarted.forget_removed(&[]);
        assert!(restarted.statuses().is_empty());
    }
}
