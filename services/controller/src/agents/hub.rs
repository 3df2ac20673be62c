//! What the controller knows of its machines right now, from their streams: connected or not,
//! when each was last heard from, and the workload statuses it reported. In memory: a
//! restarted controller learns it again as machines reconnect.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use einsora_core::agent::{Mode, StatusCode};
use einsora_core::ids::{MachineId, WorkloadId};
pub use einsora_proto::convert::AccessTarget;
use tokio::sync::{Notify, watch};

/// Agents' Sync streams open on this controller.
static STREAMS: std::sync::LazyLock<einsora_runtime::metrics::Gauge> =
    std::sync::LazyLock::new(|| {
        einsora_runtime::metrics::register(
            "einsora_agent_streams",
            "Agents' Sync streams open on this controller.",
            Default::default(),
        )
    });

/// A workload's status as its machine reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reported {
    pub attempt: u32,
    pub mode: Mode,
    pub code: StatusCode,
    /// Where a ready notebook or endpoint listens, as its agent said (SECRET: its token).
    pub target: Option<AccessTarget>,
}

#[derive(Debug)]
pub struct Hub {
    machines: Mutex<HashMap<MachineId, Live>>,
    /// Whether this controller leads its region: only then does it serve agents' streams and
    /// the access proxy (a standby's view of machines would be empty).
    leading: watch::Sender<bool>,
    /// When this controller started leading (or, before it leads, started): no machine's
    /// silence counts from earlier, so no offline clock runs on the controller's or the store's
    /// own downtime, nor on the time it stood by while another led (its agents were the
    /// leader's).
    started: Mutex<Instant>,
    /// Notified when a machine reports changed statuses, so a pass sees them at once.
    reported: Notify,
    /// Silent this long, a machine is offline: connected or not (a partitioned machine's
    /// stream stays open until keepalive gives up on it), since agents heartbeat.
    offline_after: Duration,
}

#[derive(Debug)]
struct Live {
    streams: u32,
    heard: Instant,
    statuses: HashMap<WorkloadId, Reported>,
    wake: Arc<Notify>,
    /// Its latest inventory didn't fit a machine: not offered for placement until one does
    /// (kept across its reconnects; each stream opens with an inventory).
    inventory_refused: bool,
}

impl Hub {
    pub fn new(offline_after: Duration) -> Hub {
        Hub {
            machines: Mutex::new(HashMap::new()),
            leading: watch::Sender::new(false),
            started: Mutex::new(Instant::now()),
            reported: Notify::new(),
            offline_after,
        }
    }

    /// This controller leads from now: it serves agents' streams, and machines' silence, and
    /// the reconnect window after which admission stops waiting for them, count from here.
    pub fn leading_from_now(&self) {
        *self.started.lock().unwrap_or_else(PoisonError::into_inner) = Instant::now();
        self.leading.send_replace(true);
    }

    /// This controller no longer leads: every agent's stream on it ends, so each agent
    /// reconnects until it reaches the one that leads now.
    pub fn stand_by(&self) {
        self.leading.send_replace(false);
    }

    pub fn leading(&self) -> bool {
        *self.leading.borrow()
    }

    /// Completes once this controller doesn't lead (at once if it doesn't now).
    pub async fn standing_by(&self) {
        let mut leading = self.leading.subscribe();
        // The sender lives as long as the hub, which `&self` outlives this wait.
        let _ = leading.wait_for(|leads| !leads).await;
    }

    fn started(&self) -> Instant {
        *self.started.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn machines(&self) -> MutexGuard<'_, HashMap<MachineId, Live>> {
        self.machines.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A stream opened; what wakes it when the machine's desired state may have changed.
    /// (Counted in `einsora_agent_streams`.)
    pub fn connected(&self, machine: MachineId) -> Arc<Notify> {
        let mut machines = self.machines();
        let live = machines.entry(machine).or_insert_with(|| Live {
            streams: 0,
            heard: Instant::now(),
            statuses: HashMap::new(),
            wake: Arc::new(Notify::new()),
            inventory_refused: false,
        });
        live.streams += 1;
        live.heard = Instant::now();
        STREAMS.inc();
        Arc::clone(&live.wake)
    }

    /// How many streams of the machine are open.
    #[cfg(test)]
    pub fn streams(&self, machine: MachineId) -> u32 {
        self.machines().get(&machine).map_or(0, |l| l.streams)
    }

    pub fn disconnected(&self, machine: MachineId) {
        if let Some(live) = self.machines().get_mut(&machine)
            && live.streams > 0
        {
            live.streams -= 1;
            STREAMS.dec();
        }
    }

    /// The machine's complete list of statuses (a workload missing from it, it doesn't have).
    pub fn report(&self, machine: MachineId, statuses: HashMap<WorkloadId, Reported>) {
        let mut machines = self.machines();
        let Some(live) = machines.get_mut(&machine) else {
            return;
        };
        live.heard = Instant::now();
        if live.statuses != statuses {
            live.statuses = statuses;
            self.reported.notify_one();
        }
    }

    /// Completes once a machine reported changed statuses.
    pub async fn reported(&self) {
        self.reported.notified().await;
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

    /// Heard from within the offline threshold.
    pub fn online(&self, machine: MachineId) -> bool {
        self.offline_for(machine).is_none()
    }

    /// Whether the machine's latest inventory was recorded (`true`) or refused (`false`).
    pub fn inventory(&self, machine: MachineId, recorded: bool) {
        if let Some(live) = self.machines().get_mut(&machine)
            && live.inventory_refused == recorded
        {
            live.inventory_refused = !recorded;
            // What placement may use changed: a pass sees it at once.
            self.reported.notify_one();
        }
    }

    /// Offered for placement: online, and its latest inventory wasn't refused.
    pub fn offered(&self, machine: MachineId) -> bool {
        self.online(machine)
            && !self
                .machines()
                .get(&machine)
                .is_some_and(|live| live.inventory_refused)
    }

    /// How long the machine has been silent, if it is offline.
    pub fn offline_for(&self, machine: MachineId) -> Option<Duration> {
        let started = self.started();
        let silent = match self.machines().get(&machine) {
            Some(live) => live.heard.max(started).elapsed(),
            None => started.elapsed(),
        };
        (silent >= self.offline_after).then_some(silent)
    }

    /// After a restart, until every one of `machines` reconnected (at most `offline_after`):
    /// admission waits, so nothing is placed on a partial view.
    pub fn settling(&self, mut machines: impl Iterator<Item = MachineId>) -> bool {
        let connected = |m| self.machines().get(&m).is_some_and(|l| l.streams > 0);
        self.started().elapsed() < self.offline_after && machines.any(|m| !connected(m))
    }

    /// The workload's reported status (`None`: none reported); `Err` with how long its machine
    /// has been offline.
    pub fn status(
        &self,
        machine: MachineId,
        workload: WorkloadId,
    ) -> Result<Option<Reported>, Duration> {
        if let Some(offline) = self.offline_for(machine) {
            return Err(offline);
        }
        Ok(self
            .machines()
            .get(&machine)
            .and_then(|l| l.statuses.get(&workload).cloned()))
    }

    /// Where the workload's `attempt` listens, if its machine is online and reported it ready
    /// and running.
    pub fn target(
        &self,
        machine: MachineId,
        workload: WorkloadId,
        attempt: u32,
    ) -> Option<AccessTarget> {
        let reported = self.status(machine, workload).ok()??;
        let ready = reported.attempt == attempt
            && reported.mode == Mode::Run
            && reported.code == StatusCode::Ready;
        ready.then_some(reported.target).flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connected_machine_that_falls_silent_is_offline_and_back_once_heard() {
        let hub = Hub::new(Duration::from_millis(50));
        let machine = MachineId::new();
        hub.connected(machine);
        assert!(hub.online(machine));
        std::thread::sleep(Duration::from_millis(80));
        // Its stream is still open (a partition leaves it so until keepalive gives up).
        let silent = hub.offline_for(machine).expect("offline while silent");
        assert!(silent >= Duration::from_millis(50), "{silent:?}");
        hub.heard(machine);
        assert!(hub.online(machine));
    }

    /// A standby that waited longer than the offline thresholds takes over: machines it heard
    /// from long ago (theirs were the leader's streams since) and machines it never heard from
    /// are silent only from when it leads, and admission waits for them from then.
    #[test]
    fn silence_counts_only_from_when_this_controller_leads() {
        let hub = Hub::new(Duration::from_millis(50));
        let (once, never) = (MachineId::new(), MachineId::new());
        hub.connected(once);
        hub.disconnected(once);
        std::thread::sleep(Duration::from_millis(80));
        assert!(hub.offline_for(once).is_some() && hub.offline_for(never).is_some());
        assert!(
            !hub.settling([never].into_iter()),
            "the window after its start is over"
        );
        hub.leading_from_now();
        assert_eq!(hub.offline_for(once), None);
        assert_eq!(hub.offline_for(never), None);
        assert!(
            hub.settling([never].into_iter()),
            "waiting for them to reconnect"
        );
        std::thread::sleep(Duration::from_millis(80));
        assert!(hub.offline_for(once).is_some() && hub.offline_for(never).is_some());
    }
}
