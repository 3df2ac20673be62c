//! The agent's side of Sync: one stream to its controller over mutual TLS with its machine
//! certificate. It sends its inventory first (and again when it changes, read every minute), then its workloads' statuses whenever they change
//! (checked every `STATUS_CHECK`) or a desired state was applied, and at least every
//! heartbeat (EINSORA_AGENT_HEARTBEAT): silence is what makes the controller call a machine
//! offline. Only the controller leading the region serves it: each lost or refused stream moves
//! on to the region's next controller (`controllers.rs`), at once within a round and with
//! jittered backoff after one, until a controller says the machine was revoked.

use std::path::Path;
use std::time::Duration;

use einsora_proto::agent::v1 as pb;
use einsora_proto::agent::v1::sync_service_client::SyncServiceClient;
use einsora_proto::convert::{InventoryReport, WorkloadStatuses};
use einsora_proto::metadata;
use einsora_runtime::pki::Role;
use einsora_runtime::shutdown::Shutdown;
use einsora_runtime::tls::ClientTls;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Code;

use crate::abort_on_drop::AbortOnDrop;
use crate::controllers::Controllers;
use crate::drivers::Drivers;
use crate::identity::Identity;
use crate::renew::Renewal;

/// How often workload statuses are looked at for a change.
const STATUS_CHECK: Duration = Duration::from_secs(2);
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// After the agent starts, or the controller ended the stream itself, how long failing to reach
/// it is taken for a start or restart (logged at INFO) rather than a loss (WARN).
const RESTART_GRACE: Duration = Duration::from_secs(30);
/// A session that lasted this long resets the backoff.
const STEADY: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("this machine was revoked: its controller refuses it")]
    Revoked,
    /// The controller ended the stream itself: it is stopping or restarting (an upgrade, a
    /// standby taking over), which is no fault.
    #[error("the controller ended the stream")]
    Ended,
    /// The controller stands by (or just stopped leading): another leads the region.
    #[error("the controller stands by")]
    Standby,
    #[error("{0}")]
    Lost(String),
}

/// How often a session talks unasked.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// The longest it stays silent (EINSORA_AGENT_HEARTBEAT).
    pub heartbeat: Duration,
    /// How often the inventory, the model files included, is read again; a changed one is
    /// sent (EINSORA_AGENT_INVENTORY_EVERY).
    pub inventory_every: Duration,
    /// How often a machine with GPUs samples how busy they are (EINSORA_AGENT_GPU_SAMPLE_EVERY).
    pub gpu_sample_every: Duration,
}

/// Syncs until `shutdown`; `Err` only when the machine was revoked. Each connection uses the
/// identity as the state directory has it then, so a renewed certificate takes over.
pub async fn run(
    state_dir: &Path,
    link: &Link<'_>,
    drivers: &mut Drivers,
    shutdown: &Shutdown,
) -> Result<(), SyncError> {
    let mut at = 0;
    let mut backoff = FIRST_BACKOFF;
    // Since the agent started, or the controller last ended the stream itself: failing to
    // reach it for a while after is the two starting in some order, or the controller
    // restarting, not a fault.
    let mut ended_at = tokio::time::Instant::now();
    while !shutdown.is_triggered() {
        let controller = link.controllers.all().get(at).ok_or_else(|| {
            SyncError::Lost("no controller to dial: EINSORA_AGENT_CONTROLLER is empty".into())
        })?;
        let started = tokio::time::Instant::now();
        let identity = Identity::load(state_dir).map_err(|e| SyncError::Lost(e.to_string()))?;
        let tls = ClientTls::new(&identity.ca_pem, Some(&identity.cert), Role::Controller)
            .map_err(|e| SyncError::Lost(e.to_string()))?;
        let mut renewal = Renewal::new(state_dir, &identity.cert.cert_pem);
        match session(controller, link, &tls, drivers, &mut renewal, shutdown).await {
            Ok(()) => return Ok(()),
            Err(SyncError::Revoked) => return Err(SyncError::Revoked),
            Err(lost) => {
                if started.elapsed() >= STEADY {
                    backoff = FIRST_BACKOFF;
                }
                // The region's next controller: the one leading may be another. Backoff
                // grows only once every one of them was tried.
                at = link.controllers.next_after(at);
                let round_over = at == 0;
                let wait = jitter(if round_over { backoff } else { FIRST_BACKOFF });
                let restarting = ended_at.elapsed() < RESTART_GRACE;
                match lost {
                    SyncError::Standby => {
                        ended_at = tokio::time::Instant::now();
                        tracing::info!(
                            controller,
                            ?wait,
                            "the controller stands by; trying the region's next"
                        );
                    }
                    SyncError::Ended => {
                        ended_at = tokio::time::Instant::now();
                        tracing::info!(
                            controller,
                            ?wait,
                            "the controller ended the stream; reconnecting"
                        );
                    }
                    why if restarting => {
                        tracing::info!(controller, why = %why, ?wait, "the controller isn't back yet; reconnecting");
                    }
                    why => {
                        tracing::warn!(controller, why = %why, ?wait, "lost the controller; reconnecting")
                    }
                }
                tokio::select! {
                    () = shutdown.cancelled() => return Ok(()),
                    () = tokio::time::sleep(wait) => {}
                }
                if round_over {
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }
    Ok(())
}

/// Where and how often a session talks, and how it reads the machine.
pub struct Link<'a> {
    pub controllers: &'a Controllers,
    pub timing: Timing,
    pub probe: &'a crate::inventory::Probe,
}

async fn session(
    controller: &str,
    link: &Link<'_>,
    tls: &ClientTls,
    drivers: &mut Drivers,
    renewal: &mut Renewal,
    shutdown: &Shutdown,
) -> Result<(), SyncError> {
    let lost = |e: &dyn std::fmt::Display| SyncError::Lost(e.to_string());
    let timing = link.timing;
    let channel = tls.connect(controller).await.map_err(|e| lost(&e))?;
    // The relay's streams share the connection Sync dialled.
    let relay_channel = channel.clone();
    let (tx, rx) = mpsc::channel(8);
    let mut sent_inventory = inventory(link.probe, drivers).await;
    tx.send(sent_inventory.clone())
        .await
        .map_err(|e| lost(&e))?;
    let response = SyncServiceClient::new(channel)
        .sync(ReceiverStream::new(rx))
        .await
        .map_err(refused)?;
    tracing::info!(controller, "syncing");
    let (relay_requests, mut opens) = mpsc::channel(16);
    let _listening = AbortOnDrop(crate::relay::listen(relay_channel.clone(), relay_requests));
    let mut desired = response.into_inner();
    let mut heartbeat = tokio::time::interval(timing.heartbeat);
    let mut check = tokio::time::interval(STATUS_CHECK);
    let every = timing.inventory_every;
    let mut recheck = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    let mut sample = tokio::time::interval(timing.gpu_sample_every);
    sample.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let changed = drivers.changed();
    let mut reported: Option<WorkloadStatuses> = None;
    // This stream's first desired state says where each workload's output is read from again.
    drivers.new_stream();
    let inbox = drivers.inbox();
    let mut inbox = inbox.lock().await;
    loop {
        let force = tokio::select! {
            () = shutdown.cancelled() => return Ok(()),
            state = desired.message() => match state {
                Ok(Some(state)) => {
                    if let Some(renewed) = &state.renewed_certificate {
                        renewal.renewed(renewed);
                    }
                    drivers.apply(&state.workloads);
                    true
                }
                Ok(None) => return Err(SyncError::Ended),
                Err(status) => return Err(refused(status)),
            },
            _ = heartbeat.tick() => true,
            _ = recheck.tick() => {
                let now = inventory(link.probe, drivers).await;
                if now != sent_inventory {
                    tx.send(now.clone()).await.map_err(|e| lost(&e))?;
                    sent_inventory = now;
                }
                false
            }
            _ = sample.tick() => {
                if let Some(report) = gpu_usage(link.probe, &sent_inventory).await {
                    tx.send(report).await.map_err(|e| lost(&e))?;
                }
                false
            }
            () = changed.notified() => false,
            Some(open) = opens.recv() => {
                let socket = crate::relay::socket_of(&drivers.statuses(), &open);
                crate::relay::answer(relay_channel.clone(), open.id, socket);
                false
            }
            Some(batch) = inbox.recv() => {
                // Another stream's batch is read again from this stream's heads.
                if batch.stream != drivers.stream() {
                    continue;
                }
                let (lines, bytes) = sizes(&batch.printed);
                let report = pb::AgentReport {
                    report: Some(pb::agent_report::Report::Output(batch.printed.into())),
                };
                tx.send(report).await.map_err(|e| lost(&e))?;
                let [shipped_lines, shipped_bytes] = &*SHIPPED;
                shipped_lines.inc_by(lines);
                shipped_bytes.inc_by(bytes);
                tokio::time::sleep(crate::drivers::local::output::PACE).await;
                false
            }
            _ = check.tick() => {
                if let Some(request) = renewal.request() {
                    tx.send(request).await.map_err(|e| lost(&e))?;
                }
                false
            }
        };
        // A changed status (checked every STATUS_CHECK) or an applied desired state is sent at
        // once; the heartbeat resends them anyway.
        let statuses = drivers.statuses();
        if force || reported.as_ref() != Some(&statuses) {
            let report = pb::AgentReport {
                report: Some(pb::agent_report::Report::Statuses(statuses.clone().into())),
            };
            tx.send(report).await.map_err(|e| lost(&e))?;
            reported = Some(statuses);
        }
    }
}

fn refused(status: tonic::Status) -> SyncError {
    let marked = status.metadata().get(metadata::ERROR).map(|v| v.as_bytes());
    match status.code() {
        Code::PermissionDenied => SyncError::Revoked,
        Code::Unavailable if marked == Some(metadata::STANDBY.as_bytes()) => SyncError::Standby,
        _ => SyncError::Lost(status.message().to_owned()),
    }
}

/// What this machine has, as a report; an inventory that can't be read reports an empty one,
/// which the controller refuses: the machine isn't offered until it reads again.
async fn inventory(probe: &crate::inventory::Probe, drivers: &mut Drivers) -> pb::AgentReport {
    let inventory = match crate::inventory::collect(probe).await {
        Ok(mut machine) => {
            drivers.with_passed_through(&mut machine.devices);
            drivers.know_gpus(machine.devices.iter().map(|d| d.uuid.clone()));
            InventoryReport {
                gpu_note: drivers.gpu_note(&machine.devices),
                machine,
                drivers: drivers.names(),
                vm: drivers.vm_host(),
                agent_version: env!("CARGO_PKG_VERSION").to_owned(),
                models: drivers.model_files().await,
            }
            .into()
        }
        Err(e) => {
            tracing::warn!(error = %e, "couldn't read this machine's inventory");
            pb::Inventory::default()
        }
    };
    pb::AgentReport {
        report: Some(pb::agent_report::Report::Inventory(inventory)),
    }
}

/// How busy the GPUs the inventory sent lists are, as a report; `None` on a machine without
/// GPUs, or when nvidia-smi can't say (logged: the machine's page keeps its last sample).
async fn gpu_usage(
    probe: &crate::inventory::Probe,
    sent: &pb::AgentReport,
) -> Option<pb::AgentReport> {
    let Some(pb::agent_report::Report::Inventory(inventory)) = &sent.report else {
        return None;
    };
    if inventory.devices.is_empty() {
        return None;
    }
    let samples = match crate::inventory::sample_gpu_usage(&probe.nvidia_smi, probe.limit).await {
        Ok(samples) => samples,
        Err(e) => {
            tracing::warn!(error = %e, "couldn't sample how busy this machine's GPUs are");
            return None;
        }
    };
    let listed = |uuid: &str| inventory.devices.iter().any(|d| d.uuid == uuid);
    let gpus = samples
        .into_iter()
        .filter(|s| listed(&s.uuid))
        .map(|s| pb::GpuSample {
            uuid: s.uuid,
            utilization_percent: s.utilization_percent,
            memory_used_bytes: s.memory_used_bytes,
        })
        .collect();
    Some(pb::AgentReport {
        report: Some(pb::agent_report::Report::GpuUsage(pb::GpuUsage { gpus })),
    })
}

/// Between half and all of `d`, at random, so many agents don't reconnect in step.
fn jitter(d: Duration) -> Duration {
    let mut bytes = [0u8; 2];
    let spread = match getrandom::fill(&mut bytes) {
        Ok(()) => f64::from(u16::from_le_bytes(bytes)) / f64::from(u16::MAX),
        Err(_) => 0.5,
    };
    d / 2 + d.mul_f64(spread / 2.0)
}

#[cfg(test)]
#[path = "sync_tests.rs"]
mod tests;

/// Workloads' output lines, and bytes of their text, sent to the controller.
static SHIPPED: std::sync::LazyLock<[einsora_runtime::metrics::Counter; 2]> =
    std::sync::LazyLock::new(|| {
        let register = einsora_runtime::metrics::register;
        [
            register(
                "einsora_agent_output_lines",
                "Lines of workloads' output sent to the controller.",
                Default::default(),
            ),
            register(
                "einsora_agent_output_bytes",
                "Bytes of workloads' output text sent to the controller.",
                Default::default(),
            ),
        ]
    });

/// A batch's lines, and bytes of their text.
fn sizes(printed: &einsora_core::output::PrintedOutput) -> (u64, u64) {
    let bytes: usize = printed.lines.iter().map(|l| l.text.len()).sum();
    (printed.lines.len() as u64, bytes as u64)
}
