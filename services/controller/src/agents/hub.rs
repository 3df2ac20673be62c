//! What the controller knows of its machines right now, from their streams: connected or not,
//! when each was last heard from, and the workload statuses it reported. In memory: a
//! restarted controller learns it again as machines reconnect.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use einsora_core::agent::{Mode, StatusCode};
use einsora_core::ids::{MachineId, WorkloadId};
use tokio::sync::Notify;

/// A machine silent for this long is offline: not offered, its workloads' status unknown.
pub const OFFLINE_AFTER: Duration = Duration::from_secs(45);

/// A workload's status as its machine reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reported {
    pub attempt: u32,
    pub mode: Mode,
    pub code: StatusCode,
}

#[derive(Debug, Default)]
pub struct Hub {
    machines: Mutex<HashMap<MachineId, Live>>,
}

#[derive(Debug)]
struct Live {
    streams: u32,
    heard: Instant,
    statuses: HashMap<WorkloadId, Reported>,
    wake: Arc<Notify>,
}

impl Hub {
    fn machines(&self) -> MutexGuard<'_, HashMap<MachineId, Live>> {
        self.machines.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A stream opened; what wakes it when the machine's desired state may have changed.
    pub fn connected(&self, machine: MachineId) -> Arc<Notify> {
        let mut machines = self.machines();
        let live = machines.entry(machine).or_insert_with(|| Live {
            streams: 0,
            heard: Instant::now(),
            statuses: HashMap::new(),
            wake: Arc::new(Notify::new()),
        });
        live.streams += 1;
        live.heard = Instant::now();
        Arc::clone(&live.wake)
    }

    pub fn disconnected(&self, machine: MachineId) {
        if let Some(live) = self.machines().get_mut(&machine) {
            live.streams = live.streams.saturating_sub(1);
        }
    }

    /// The machine's complete list of statuses (a workload missing from it, it doesn't have).
    pub fn report(&self, machine: MachineId, statuses: HashMap<WorkloadId, Reported>) {
        if let Some(live) = self.machines().get_mut(&machine) {
            live.statuses = statuses;
            live.heard = Instant::now();
        }
    }

    pub fn heard(&self, machine: MachineId) {
        if let Some(live) = self.machines().get_mut(&machine) {
            live.heard = Instant::now();
        }
    }

    /// Wakes the machine's stream (only that machine's) to send its desired state now.
    pub fn wake(&self, machine: MachineId) {
        if let Some(live) = self.machines().get(&machine) {
            live.wake.notify_one();
        }
    }

    /// Connected and heard from within `OFFLINE_AFTER`.
    pub fn online(&self, machine: MachineId) -> bool {
        self.machines()
            .get(&machine)
            .is_some_and(|l| l.streams > 0 && l.heard.elapsed() < OFFLINE_AFTER)
    }

    /// The workload's reported status, if its machine is online (`None` inside: none reported).
    pub fn status(&self, machine: MachineId, workload: WorkloadId) -> Option<Option<Reported>> {
        let machines = self.machines();
        let live = machines.get(&machine)?;
        (live.streams > 0 && live.heard.elapsed() < OFFLINE_AFTER)
            .then(|| live.statuses.get(&workload).copied())
    }
}
