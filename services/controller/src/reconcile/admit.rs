//! Admit: pending and queued workloads, first come first, each placed and moved to
//! provisioning, then run; or queued with the reason. A workload that doesn't fit waits while
//! later ones that do fit go ahead (backfill). A pass's decisions are written in one
//! transaction. On a cluster backend the region's free units decide; on node agents, a machine
//! and a driver (`placement::agents`).

use std::collections::HashMap;
use std::sync::Arc;

use einsora_core::accelerator::AcceleratorKind;
use einsora_core::ids::{MachineId, WorkloadId};
use einsora_core::lifecycle::State;
use einsora_core::reasons::Reason;
use einsora_store::{StoreError, WorkloadFilter};
use tracing::Instrument;

use super::Reconciler;
use crate::agents::Hub;
use crate::placement::agents::{Candidate, Held};
use crate::placement::{self, Decision, Free};
use crate::writer::Step;

/// What admission places against, for one pass.
enum Room {
    Cluster(Free),
    Agents(Vec<Candidate>),
}

impl Reconciler {
    /// Returns the workloads it looked at.
    pub(super) async fn admit(&mut self) -> Result<Vec<WorkloadId>, StoreError> {
        let waiting = self.store.waiting(&self.region).await?;
        let ids = waiting.iter().map(|e| e.workload.id).collect();
        // Until decided otherwise below, every one of them waits.
        let classes = waiting.iter().map(|e| e.workload.gpu_class.as_str());
        crate::metrics::waiting(&self.region, classes);
        if waiting.is_empty() {
            return Ok(ids);
        }
        let mut room = match self.agents.clone() {
            Some(hub) => {
                let machines = self.candidates(&hub).await?;
                if hub.settling(machines.iter().map(|c| c.machine.id)) {
                    tracing::debug!("settling: waiting for the region's machines to reconnect");
                    return Ok(ids);
                }
                Room::Agents(machines)
            }
            None => match self.backend.capacity().await {
                Ok(totals) => Room::Cluster(Free::new(
                    totals,
                    &self.store.capacity_held(&self.region).await?,
                )),
                Err(e) => {
                    tracing::warn!(error = %e, region = %self.region, "couldn't read the runtime's capacity");
                    for entry in &waiting {
                        self.writer
                            .note_once(&entry.workload, &Reason::CapacityUnreadable)
                            .await?;
                    }
                    return Ok(ids);
                }
            },
        };
        for entry in &waiting {
            self.writer.settled(entry.workload.id);
        }
        let mut steps = Vec::new();
        let mut still_waiting = Vec::new();
        // The trace of the request that created each one, which its admission joins.
        let mut traces: HashMap<WorkloadId, String> = HashMap::new();
        for entry in waiting {
            let w = entry.workload;
            let decision = match &mut room {
                Room::Cluster(free) => {
                    placement::place(&w, &self.catalog, entry.tenant_trusted, free)
                }
                Room::Agents(machines) => {
                    placement::agents::place(&w, &self.catalog, entry.tenant_trusted, machines)
                }
            };
            match decision {
                Decision::Admit { admission, reason } => {
                    if let Some(parent) = entry.trace_context {
                        traces.insert(w.id, parent);
                    }
                    steps.push(Step {
                        admission: Some(admission),
                        ..Step::to(w, State::Provisioning, reason)
                    });
                }
                Decision::Wait(reason) if w.state == State::Pending => {
                    still_waiting.push(w.gpu_class.clone());
                    steps.push(Step::to(w, State::Queued, reason));
                }
                Decision::Wait(reason) => {
                    still_waiting.push(w.gpu_class.clone());
                    self.writer.note_wait(&w, &reason).await?;
                }
                Decision::Fail(reason) => steps.push(Step::to(w, State::Failed, reason)),
            }
        }
        let written = self.writer.apply(&steps).await?;
        crate::metrics::waiting(&self.region, still_waiting.iter().map(String::as_str));
        let mut failed = Vec::new();
        for admitted in written.into_iter().flatten() {
            if admitted.state != State::Provisioning {
                continue;
            }
            let placed = admitted.placed_class.as_deref();
            crate::metrics::admitted(&self.region, placed.unwrap_or(&admitted.gpu_class));
            // Only the pass that admits it joins its trace (a workload waiting long would grow
            // it every pass).
            let class = placed.unwrap_or(&admitted.gpu_class);
            let span = tracing::info_span!("admit", workload = %admitted.id, class = %class);
            if let Some(parent) = traces.get(&admitted.id) {
                einsora_runtime::telemetry::traces::continue_from_traceparent(&span, parent);
            }
            let run = self.run_admitted(&admitted).instrument(span);
            if let Some((to, reason)) = run.await?.step {
                failed.push(Step::to(admitted, to, reason));
            }
        }
        self.writer.apply(&failed).await?;
        Ok(ids)
    }

    /// The region's machines as placement sees them: offered when online with an inventory
    /// (its latest not refused), and what the workloads placed on each already hold.
    async fn candidates(&self, hub: &Arc<Hub>) -> Result<Vec<Candidate>, StoreError> {
        let machines = self.store.machines_in(&self.region).await?;
        let holding = self
            .store
            .workloads(&WorkloadFilter {
                region: Some(self.region.clone()),
                ..WorkloadFilter::holding_capacity()
            })
            .await?;
        let mut held: HashMap<MachineId, Held> = HashMap::new();
        for w in holding {
            let Some(machine) = w.machine_id else {
                continue;
            };
            // Its devices stay held even when its class left the catalog (it runs on, retired).
            let h = held.entry(machine).or_default();
            h.device_uuids.extend(w.devices.iter().cloned());
            let placed = w.placed_class.as_deref().unwrap_or(&w.gpu_class);
            let Some(class) = self.catalog.class(placed) else {
                continue;
            };
            h.cpus += class.cpus();
            h.memory_bytes += class.memory_bytes();
            if class.accelerator() != AcceleratorKind::Cpu {
                *h.devices.entry(class.name().to_owned()).or_default() += w.units;
            }
            if let Some(driver) = w.driver {
                *h.per_driver.entry(driver).or_default() += 1;
            }
        }
        Ok(machines
            .into_iter()
            .map(|record| {
                let mut machine = record.machine;
                // GPUs its agent can't give to workloads are never offered (never CPU instead).
                if let Some(note) = record.gpu_note {
                    machine.devices.retain(|d| !note.hides(d));
                }
                Candidate {
                    offered: hub.offered(machine.id) && machine.cpus > 0,
                    held: held.remove(&machine.id).unwrap_or_default(),
                    drivers: record.drivers,
                    machine,
                }
            })
            .collect())
    }
}
