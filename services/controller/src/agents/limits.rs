//! What a machine's stream may send. Every message is bounded by the port's decoding limit
//! (`MAX_MESSAGE`); within it, each report by its counts and the length of each string
//! (`bounded`), and each kind of report by its rate, per machine across reconnects
//! (`Budgets`). A report over a bound is dropped whole (nothing it says is used) and the
//! machine is flagged for it (`Excess`).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use einsora_core::ids::MachineId;
use einsora_proto::agent::v1 as pb;
use einsora_proto::convert::bounds::*;

use crate::enrol::MAX_CSR;

/// The largest message the agents' Sync decodes; larger ones end the stream.
pub const MAX_MESSAGE: usize = 1 << 20;
/// Why a report was dropped; a machine is flagged with its word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum Excess {
    #[error("a report over the size bounds")]
    Oversized,
    #[error("reports of one kind faster than allowed")]
    TooFrequent,
    #[error("streams opened faster than allowed")]
    StreamsTooFrequent,
}

impl Excess {
    /// What the store records the machine flagged for.
    pub fn word(self) -> &'static str {
        match self {
            Excess::Oversized => "oversized_report",
            Excess::TooFrequent => "report_flood",
            Excess::StreamsTooFrequent => "stream_flood",
        }
    }
}

/// `Err` if any count or string of the report is over its bound.
pub fn bounded(report: &pb::agent_report::Report) -> Result<(), Excess> {
    use pb::agent_report::Report;
    let fits = match report {
        Report::Statuses(s) => {
            s.workloads.len() <= MAX_WORKLOADS
                && s.workloads.iter().all(|w| {
                    w.workload_id.len() <= MAX_NAME
                        && w.driver.len() <= MAX_NAME
                        && w.access_target.as_ref().is_none_or(|t| {
                            t.socket_path.len() <= MAX_SOCKET_PATH && t.token.len() <= MAX_SECRET
                        })
                })
        }
        Report::Inventory(i) => {
            let texts = [&i.hostname, &i.os, &i.arch, &i.agent_version];
            i.devices.len() <= MAX_DEVICES
                && i.drivers.len() <= MAX_DRIVERS
                && texts.iter().all(|t| t.len() <= MAX_TEXT)
                && i.drivers.iter().all(|d| d.len() <= MAX_NAME)
                && i.devices
                    .iter()
                    .all(|d| d.model.len() <= MAX_TEXT && d.uuid.len() <= MAX_TEXT)
                && i.models.len() <= MAX_MODELS
                && i.models
                    .iter()
                    .all(|m| m.path.len() <= einsora_core::machine::MAX_MODEL_PATH)
        }
        Report::RenewCertificate(r) => r.csr_pem.len() <= MAX_CSR,
        Report::GpuUsage(u) => {
            u.gpus.len() <= MAX_DEVICES && u.gpus.iter().all(|g| g.uuid.len() <= MAX_TEXT)
        }
        Report::Output(o) => {
            o.workload_id.len() <= MAX_NAME
                && o.lines.len() <= MAX_OUTPUT_LINES
                && o.lines
                    .iter()
                    .all(|l| l.text.len() <= einsora_core::output::MAX_LINE_BYTES)
        }
    };
    if fits { Ok(()) } else { Err(Excess::Oversized) }
}

/// One kind of report may come `burst` at once, then one per `every`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub burst: u32,
    pub every: Duration,
}

/// The rates, by kind of report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rates {
    pub statuses: Rate,
    pub inventory: Rate,
    pub renewal: Rate,
    pub gpu_usage: Rate,
    /// Batches of its workloads' output.
    pub output: Rate,
    /// New Sync streams of one machine.
    pub streams: Rate,
}

impl Default for Rates {
    /// Well above what an agent sends: statuses when they change (checked every 2 s), after
    /// each desired state and on its heartbeat; its inventory on connect; a renewal at half
    /// its certificate's lifetime (again on each connect until answered).
    fn default() -> Rates {
        Rates {
            statuses: Rate {
                burst: 50,
                every: Duration::from_millis(100),
            },
            // An agent reconnecting with its backoff (from 0.5 s, doubling) stays within it.
            inventory: Rate {
                burst: 10,
                every: Duration::from_secs(5),
            },
            renewal: Rate {
                burst: 5,
                every: Duration::from_secs(60),
            },
            // Sampled every few seconds (EINSORA_AGENT_GPU_SAMPLE_EVERY, at least 1 s).
            gpu_usage: Rate {
                burst: 10,
                every: Duration::from_millis(500),
            },
            // An agent ships a batch per workload per pass at most, and at most 16 a second
            // (agent::output): a machine printing at full speed is within it.
            output: Rate {
                burst: 64,
                every: Duration::from_millis(50),
            },
            // An agent reconnects with a backoff from 0.5 s, doubling; each open costs the
            // store a read and a write and the log a few lines.
            streams: Rate {
                burst: 20,
                every: Duration::from_secs(1),
            },
        }
    }
}

/// Each machine's allowance, kept across its reconnects (so a new stream doesn't refill it).
/// Only machines that hold a valid certificate get one.
#[derive(Debug, Default)]
pub struct Budgets {
    rates: Rates,
    machines: Mutex<HashMap<MachineId, Allowance>>,
}

#[derive(Debug, Default)]
struct Allowance {
    statuses: Bucket,
    inventory: Bucket,
    renewal: Bucket,
    gpu_usage: Bucket,
    output: Bucket,
    streams: Bucket,
    /// When a refused stream open was last logged and flagged, so a flood does neither more
    /// than once a minute.
    streams_noted: Option<Instant>,
}

/// How often a machine's refused stream opens are logged and flagged.
const NOTE_STREAM_FLOOD_EVERY: Duration = Duration::from_secs(60);

/// A stream open over the machine's allowance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamFlood {
    /// Whether to log it and flag the machine now (at most once a minute).
    pub note: bool,
}

/// A GCRA bucket: when the next report would be due at the sustained rate.
#[derive(Debug, Default)]
struct Bucket {
    due: Option<Instant>,
}

impl Bucket {
    fn take(&mut self, rate: Rate, now: Instant) -> bool {
        let due = self.due.map_or(now, |d| d.max(now));
        let slack = rate.every * rate.burst.saturating_sub(1);
        if due.saturating_duration_since(now) > slack {
            return false;
        }
        self.due = Some(due + rate.every);
        true
    }
}

impl Budgets {
    #[cfg(test)]
    pub fn new(rates: Rates) -> Budgets {
        Budgets {
            rates,
            machines: Mutex::default(),
        }
    }

    /// Counts the report against the machine's allowance; `Err` if it is over it.
    pub fn take(
        &self,
        machine: MachineId,
        report: &pb::agent_report::Report,
    ) -> Result<(), Excess> {
        self.take_at(machine, report, Instant::now())
    }

    /// Counts a new stream of the machine against its allowance, before anything else is done
    /// for it.
    pub fn open_stream(&self, machine: MachineId) -> Result<(), StreamFlood> {
        self.open_stream_at(machine, Instant::now())
    }

    fn open_stream_at(&self, machine: MachineId, now: Instant) -> Result<(), StreamFlood> {
        let mut machines = self.machines.lock().unwrap_or_else(PoisonError::into_inner);
        let allowance = machines.entry(machine).or_default();
        if allowance.streams.take(self.rates.streams, now) {
            return Ok(());
        }
        let note = allowance
            .streams_noted
            .is_none_or(|at| now.saturating_duration_since(at) >= NOTE_STREAM_FLOOD_EVERY);
        if note {
            allowance.streams_noted = Some(now);
        }
        Err(StreamFlood { note })
    }

    fn take_at(
        &self,
        machine: MachineId,
        report: &pb::agent_report::Report,
        now: Instant,
    ) -> Result<(), Excess> {
        use pb::agent_report::Report;
        let mut machines = self.machines.lock().unwrap_or_else(PoisonError::into_inner);
        let allowance = machines.entry(machine).or_default();
        let (bucket, rate) = match report {
            Report::Statuses(_) => (&mut allowance.statuses, self.rates.statuses),
            Report::Inventory(_) => (&mut allowance.inventory, self.rates.inventory),
            Report::RenewCertificate(_) => (&mut allowance.renewal, self.rates.renewal),
            Report::GpuUsage(_) => (&mut allowance.gpu_usage, self.rates.gpu_usage),
            Report::Output(_) => (&mut allowance.output, self.rates.output),
        };
        if bucket.take(rate, now) {
            Ok(())
        } else {
            Err(Excess::TooFrequent)
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
