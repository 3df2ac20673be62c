//! Admit: pending and queued workloads, first come first, each placed and moved to
//! provisioning, then run; or queued with the reason. A workload that doesn't fit waits while
//! later ones that do fit go ahead (backfill), unless it has waited longer than
//! `EINSORA_AGING_AFTER`: then smaller requests of its class wait behind it (aging). Workloads
//! that have waited their `fallback_after_s` try their fallbacks once every waiting workload
//! has tried its requested class. A pass's decisions are written in one transaction. On a cluster backend the region's free units decide; on node agents, a machine
//! and a driver (`placement::agents`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use einsora_core::accelerator::AcceleratorKind;
use einsora_core::catalog::ComputeClass;
use einsora_core::ids::{MachineId, WorkloadId};
use einsora_core::lifecycle::State;
use einsora_core::reasons::Reason;
use einsora_store::{StoreError, Waiting, WorkloadFilter};
use time::OffsetDateTime;
use tracing::Instrument;

use super::Reconciler;
use crate::agents::Hub;
use crate::placement::agents::{Candidate, Held};
use crate::placement::{self, Decision, Free, fallback};
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
        let now = OffsetDateTime::now_utc();
        let decided = self.decide(waiting, &mut room, now);
        let mut steps = Vec::new();
        let mut still_waiting = Vec::new();
        let mut holding_back = Vec::new();
        // The trace of the request that created each one, which its admission joins.
        let mut traces: HashMap<WorkloadId, String> = HashMap::new();
        for (entry, decision, aged) in decided {
            let w = entry.workload;
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
                    if aged {
                        holding_back.push(w);
                    }
                }
                Decision::Fail(reason) => steps.push(Step::to(w, State::Failed, reason)),
            }
        }
        let written = self.writer.apply(&steps).await?;
        crate::metrics::waiting(&self.region, still_waiting.iter().map(String::as_str));
        // Noted once it is queued: a pending one is noted on the next pass.
        for w in &holding_back {
            let note = Reason::HoldingBackSmaller {
                class: w.gpu_class.clone(),
                after: self.timers.aging_after,
            };
            self.writer.note_aging(w, &note).await?;
        }
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

    /// Decides for each waiting workload, in queue order: first every one on its requested class
    /// (FIFO with backfill), so freed capacity goes to a class's own waiters first; then, for
    /// those still waiting that have waited `fallback_after_s`, their fallbacks in order. A
    /// request that has waited longer than `aging_after` for room in its class holds back
    /// smaller requests of that class behind it, on their requested class and as a fallback
    /// alike. Each decision comes with whether it is such an aged request.
    fn decide(
        &self,
        waiting: Vec<Waiting>,
        room: &mut Room,
        now: OffsetDateTime,
    ) -> Vec<(Waiting, Decision, bool)> {
        let aging_after = self.timers.aging_after;
        // The largest aged request of each class, in units.
        let mut aged: HashMap<String, u32> = HashMap::new();
        let mut decided = Vec::with_capacity(waiting.len());
        for entry in waiting {
            let w = &entry.workload;
            let waited = Duration::try_from(now - entry.since).unwrap_or_default();
            let behind = aged.get(&w.gpu_class).is_some_and(|&units| w.units < units);
            let decision = if behind {
                Decision::Wait(Reason::WaitingBehindOlder {
                    class: w.gpu_class.clone(),
                    after: aging_after,
                })
            } else {
                match room {
                    Room::Cluster(free) => {
                        placement::place(w, &self.catalog, entry.tenant_trusted, free)
                    }
                    Room::Agents(machines) => {
                        placement::agents::place(w, &self.catalog, entry.tenant_trusted, machines)
                    }
                }
            };
            let is_aged = waited > aging_after
                && matches!(
                    decision,
                    Decision::Wait(
                        Reason::WaitingForCapacity { .. } | Reason::WaitingForAppleGpu { .. }
                    )
                );
            if is_aged {
                let units = aged.entry(w.gpu_class.clone()).or_default();
                *units = (*units).max(w.units);
            }
            decided.push((entry, decision, is_aged, waited));
        }
        decided
            .into_iter()
            .map(|(entry, decision, is_aged, waited)| {
                let w = &entry.workload;
                let Decision::Wait(wait) = decision else {
                    return (entry, decision, false);
                };
                if !fallback::due(w, waited) {
                    let decision = Decision::Wait(fallback::wait(w, wait, false));
                    return (entry, decision, is_aged);
                }
                // A class whose aged request is larger isn't open to it.
                let open = |class: &ComputeClass| {
                    aged.get(class.name()).is_none_or(|&units| w.units >= units)
                };
                let admitted = match room {
                    Room::Cluster(free) => placement::place_fallback(w, &self.catalog, free, open),
                    Room::Agents(machines) => {
                        placement::agents::place_fallback(w, &self.catalog, machines, open)
                    }
                };
                match admitted {
                    Some(admit) => (entry, admit, false),
                    None => {
                        let decision = Decision::Wait(fallback::wait(w, wait, true));
                        (entry, decision, is_aged)
                    }
                }
            })
            .collect()
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
            if w.kind == einsora_core::kind::WorkloadKind::Vm {
                h.vms += 1;
            }
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
                    vm_limit: record.vm.and_then(|vm| vm.limit),
                    machine,
                }
            })
            .collect())
    }
}
