//! A machine's Sync stream. The machine is known by its certificate (role and fingerprint,
//! checked against the store, then by the port's one revocation sweep every
//! `StreamTimers::recheck` (`trust.rs`), so a revoked machine's stream ends within seconds), never
//! by what it reports. It is sent its complete desired state (computed from the
//! store each time) on connect, whenever the controller runs, parks or deletes one of its
//! workloads (which wakes only this machine's stream, through the hub), and at least every
//! heartbeat; its inventory reports update its registration when they fit it. A machine has
//! one live stream (`streams`): a newer one replaces it. A stream presenting a renewed
//! certificate retires the machine's older ones. Only the controller leading the region serves
//! streams: a standby refuses them, and a leader that stops leading ends them, so agents
//! reconnect until they reach the one leading.

use std::collections::{HashMap, HashSet};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use einsora_core::agent::{Mode, StatusCode};
use einsora_core::catalog::Catalog;
use einsora_core::ids::{TenantId, WorkloadId};
use einsora_core::lifecycle::State;
use einsora_proto::agent::v1 as pb;
use einsora_proto::agent::v1::sync_service_server::{SyncService, SyncServiceServer};
use einsora_proto::convert::{InventoryReport, WorkloadStatuses, timestamp};
use einsora_runtime::shutdown::Shutdown;
use einsora_store::{MachineRecord, OutputBatch, OutputCaps, Store};
use time::OffsetDateTime;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use super::hub::{Hub, Reported};
use super::identity::{identity, retire_older_certificates};
use super::limits::{self, Budgets, Excess};
use super::refusal::Refusal;
use super::renew::Renewals;
use super::streams::{Claim, Streams};
use super::trust::{Trust, Watch};
use super::{desired, inventory, statuses};

/// What the store records a machine flagged for once a driver of its crashed (and was
/// restarted by its agent): beside `limits::Excess`'s words.
const DRIVER_CRASHED: &str = "driver_crashed";

/// A stream's own timers: fixed in a controller, scaled down by tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamTimers {
    /// The desired state is sent at least this often.
    pub heartbeat: Duration,
    /// How often the port's revocation sweep checks every stream's certificate (revocation
    /// closes within ~this).
    pub recheck: Duration,
    /// An agent that doesn't take its desired state for this long is dropped (it reconnects),
    /// so a stalled peer never holds a session, or the controller's shutdown, forever.
    pub send_timeout: Duration,
}

impl Default for StreamTimers {
    fn default() -> Self {
        StreamTimers {
            heartbeat: Duration::from_secs(20),
            recheck: Duration::from_secs(2),
            send_timeout: Duration::from_secs(20),
        }
    }
}

/// `last_seen_at` is written at most this often.
const SEEN_EVERY: Duration = Duration::from_secs(15);
/// After a failed desired-state read, the next try.
const READ_RETRY: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
pub struct SyncApi {
    store: Arc<dyn Store>,
    catalog: Arc<Catalog>,
    hub: Arc<Hub>,
    renewals: Renewals,
    streams: Arc<Streams>,
    budgets: Arc<Budgets>,
    trust: Arc<Trust>,
    timers: StreamTimers,
    output_caps: OutputCaps,
    shutdown: Shutdown,
}

impl SyncApi {
    pub fn new(
        store: Arc<dyn Store>,
        catalog: Arc<Catalog>,
        hub: Arc<Hub>,
        renewals: Renewals,
        trust: Arc<Trust>,
        timers: StreamTimers,
        shutdown: Shutdown,
    ) -> Self {
        SyncApi {
            store,
            catalog,
            hub,
            renewals,
            streams: Arc::default(),
            budgets: Arc::default(),
            trust,
            timers,
            output_caps: crate::config::OUTPUT_CAPS,
            shutdown,
        }
    }

    /// How much workloads' output the store keeps (the settings `EINSORA_LOG_*_CAP`).
    pub fn with_output_caps(self, output_caps: OutputCaps) -> Self {
        SyncApi {
            output_caps,
            ..self
        }
    }

    /// The service, refusing any message larger than `limits::MAX_MESSAGE` from its length,
    /// before reading it.
    pub fn into_server(self) -> SyncServiceServer<SyncApi> {
        SyncServiceServer::new(self).max_decoding_message_size(limits::MAX_MESSAGE)
    }
}

type DesiredStream = Pin<Box<dyn Stream<Item = Result<pb::DesiredState, Status>> + Send>>;

#[tonic::async_trait]
impl SyncService for SyncApi {
    type SyncStream = DesiredStream;

    async fn sync(
        &self,
        request: Request<Streaming<pb::AgentReport>>,
    ) -> Result<Response<DesiredStream>, Status> {
        let (id, fingerprint) = identity(&request)?;
        // Before anything is counted or read: the machine is the leader's to serve.
        if !self.hub.leading() {
            return Err(Refusal::Standby.into());
        }
        if let Err(flood) = self.budgets.open_stream(id) {
            if flood.note {
                tracing::warn!(machine = %id, "the machine opens streams faster than allowed; refusing them and flagging it");
                let now = OffsetDateTime::now_utc();
                let word = Excess::StreamsTooFrequent.word();
                if let Err(e) = self.store.flag_machine(id, word, now).await {
                    tracing::warn!(machine = %id, error = %e, "couldn't record the machine's flag");
                }
            }
            return Err(Refusal::TooManyStreams.into());
        }
        let machine = self
            .store
            .machine_for_certificate(id, &fingerprint)
            .await
            .map_err(Refusal::from)?
            .ok_or(Refusal::Revoked)?;
        retire_older_certificates(&*self.store, id, &fingerprint).await;
        let claim = self.streams.claim(id, request.remote_addr());
        let watch = self.trust.watch(fingerprint);
        let (tx, rx) = mpsc::channel(4);
        let session = Session {
            store: Arc::clone(&self.store),
            catalog: Arc::clone(&self.catalog),
            hub: Arc::clone(&self.hub),
            renewals: self.renewals.clone(),
            renewed: None,
            budgets: Arc::clone(&self.budgets),
            timers: self.timers,
            output_caps: self.output_caps,
            flagged: HashSet::new(),
            driver_restarts: 0,
            machine,
            renewed_fingerprint: None,
            tx,
            sent: None,
            next_send: Instant::now(),
            read_failing: false,
            seen_at: None,
            pending_removals: HashSet::new(),
            placed: HashMap::new(),
        };
        tokio::spawn(session.run(request.into_inner(), claim, watch, self.shutdown.clone()));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

struct Session {
    store: Arc<dyn Store>,
    catalog: Arc<Catalog>,
    hub: Arc<Hub>,
    renewals: Renewals,
    /// A renewed certificate to go with the next desired state.
    renewed: Option<pb::RenewedCertificate>,
    budgets: Arc<Budgets>,
    timers: StreamTimers,
    output_caps: OutputCaps,
    /// What this stream was flagged for already (logged and recorded once each).
    flagged: HashSet<Excess>,
    /// The driver restarts the machine last reported on this stream.
    driver_restarts: u32,
    machine: MachineRecord,
    /// A renewed certificate's SHA-256, once issued: the revocation sweep watches it from then.
    renewed_fingerprint: Option<[u8; 32]>,
    tx: mpsc::Sender<Result<pb::DesiredState, Status>>,
    /// What was sent last, so an unchanged state isn't sent again before the heartbeat.
    sent: Option<Vec<pb::DesiredWorkload>>,
    /// When the desired state is sent again even if unchanged (or retried after a failed read).
    next_send: Instant,
    /// A read is failing: logged once per outage.
    read_failing: bool,
    seen_at: Option<Instant>,
    /// Workloads deleted while the machine was away, sent to be removed until it says so.
    pending_removals: HashSet<WorkloadId>,
    /// The workloads placed on the machine as its last desired state listed them, with their
    /// tenants and attempts: the only ones whose output it may send, of those attempts.
    placed: HashMap<WorkloadId, (TenantId, u32)>,
}

/// Why a session ended early.
struct Ended;

impl Session {
    async fn run(
        mut self,
        mut reports: Streaming<pb::AgentReport>,
        claim: Claim,
        watch: Watch,
        shutdown: Shutdown,
    ) {
        let id = self.machine.machine.id;
        tracing::info!(machine = %id, "machine connected");
        let wake = self.hub.connected(id);
        let hub = Arc::clone(&self.hub);
        let standing_by = hub.standing_by();
        tokio::pin!(standing_by);
        loop {
            let step = tokio::select! {
                () = shutdown.cancelled() => break,
                // Leadership moved on: the agent is told so, and looks for the new leader.
                () = &mut standing_by => {
                    let _ = tokio::time::timeout(self.timers.send_timeout, self.tx.send(Err(Refusal::Standby.into()))).await;
                    break;
                }
                () = claim.replaced() => {
                    let _ = tokio::time::timeout(self.timers.send_timeout, self.tx.send(Err(Refusal::Replaced.into()))).await;
                    break;
                }
                report = reports.message() => match report {
                    Ok(Some(report)) => self.on_report(report).await,
                    Ok(None) => break,
                    Err(status) => {
                        // Larger than the port decodes: refused from its length, unread.
                        if status.code() == tonic::Code::OutOfRange {
                            self.flag(Excess::Oversized).await;
                        }
                        break;
                    }
                },
                () = wake.notified() => self.send(false).await,
                () = tokio::time::sleep_until(self.next_send) => self.send(true).await,
                () = watch.revoked() => self.revoked().await,
            };
            if step.is_err() {
                break;
            }
            if let Some(renewed) = self.renewed_fingerprint.take() {
                watch.renewed(renewed);
            }
        }
        self.hub.disconnected(id);
        tracing::info!(machine = %id, "machine disconnected");
    }

    /// Sends the desired state if it changed (or `force`). A failed read sends nothing (it is
    /// never taken for "remove everything") and is tried again shortly.
    async fn send(&mut self, force: bool) -> Result<(), Ended> {
        let machine = &self.machine.machine;
        let (id, owner, owning_user) = (machine.id, machine.owner, machine.owner_user);
        // Whom its owning user trusts with it changes through the API while the stream lasts:
        // read afresh, as placement does, so the agent is told what placement decided on; only
        // while a teammate's workload is there (the owning user's own never need it).
        let read = async {
            let workloads = self.store.workloads_on(id).await?;
            let teammates = workloads
                .iter()
                .any(|w| w.tenant_id == owner && w.owner != owning_user);
            let trust = match teammates {
                true => self.store.machine_of(owner, id).await?,
                false => None,
            };
            Ok::<_, einsora_store::StoreError>((workloads, trust))
        };
        let on_machine = match read.await {
            Ok((workloads, trust)) => {
                self.read_failing = false;
                if let Some(fresh) = trust {
                    self.machine.machine.trusted_users = fresh.machine.trusted_users;
                }
                workloads
            }
            Err(e) => {
                if !self.read_failing {
                    tracing::warn!(machine = %self.machine.machine.id, error = %e, "couldn't read its desired state");
                    self.read_failing = true;
                }
                self.next_send = Instant::now() + READ_RETRY;
                return Ok(());
            }
        };
        self.pending_removals = on_machine
            .iter()
            .filter(|w| w.state == State::Deleted)
            .map(|w| w.id)
            .collect();
        let ids: Vec<WorkloadId> = on_machine.iter().map(|w| w.id).collect();
        // Where each one's output is up to, for its agent to resume from. Not read: nothing is
        // sent (an agent on a new stream would read its output again from the start).
        let heads = match self.store.output_heads(&ids).await {
            Ok(heads) => heads,
            Err(e) => {
                tracing::warn!(machine = %self.machine.machine.id, error = %e, "couldn't read where its workloads' output is up to");
                self.next_send = Instant::now() + READ_RETRY;
                return Ok(());
            }
        };
        self.placed = on_machine
            .iter()
            .map(|w| (w.id, (w.tenant_id, w.attempt.get())))
            .collect();
        let workloads =
            desired::workloads(&on_machine, &self.catalog, &self.machine.machine, &heads);
        if !force && self.renewed.is_none() && self.sent.as_ref() == Some(&workloads) {
            return Ok(());
        }
        let state = pb::DesiredState {
            workloads: workloads.clone(),
            renewed_certificate: self.renewed.take(),
            generated_at: Some(timestamp(OffsetDateTime::now_utc())),
        };
        match tokio::time::timeout(self.timers.send_timeout, self.tx.send(Ok(state))).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Err(Ended),
            Err(_) => {
                tracing::warn!(machine = %self.machine.machine.id, "the agent doesn't take its desired state; dropping it");
                return Err(Ended);
            }
        }
        self.sent = Some(workloads);
        self.next_send = Instant::now() + self.timers.heartbeat;
        Ok(())
    }

    async fn on_report(&mut self, report: pb::AgentReport) -> Result<(), Ended> {
        // An empty report says nothing, not even that the agent is there.
        let Some(report) = report.report else {
            return Ok(());
        };
        let id = self.machine.machine.id;
        if let Err(excess) = limits::bounded(&report).and_then(|()| self.budgets.take(id, &report))
        {
            self.flag(excess).await;
            return Ok(());
        }
        let now = OffsetDateTime::now_utc();
        match report {
            pb::agent_report::Report::Inventory(inventory) => {
                match InventoryReport::try_from(inventory) {
                    Ok(inventory) => {
                        let registration = inventory::registration(&self.machine, inventory, now);
                        match self.store.record_inventory(&registration).await {
                            Ok(_) => {
                                self.machine.machine = registration.machine;
                                self.seen_at = Some(Instant::now());
                                self.hub.inventory(id, true);
                            }
                            Err(e) => tracing::warn!(error = %e, "couldn't record its inventory"),
                        }
                    }
                    Err(why) => {
                        tracing::warn!(
                            machine = %id, %why,
                            "refused an inventory that doesn't fit the machine; it isn't offered for placement until one does"
                        );
                        self.hub.inventory(id, false);
                    }
                }
            }
            pb::agent_report::Report::Statuses(statuses) => {
                if statuses.driver_restarts > self.driver_restarts {
                    self.driver_restarts = statuses.driver_restarts;
                    tracing::warn!(
                        machine = %id, restarts = statuses.driver_restarts,
                        "a driver on the machine crashed and was restarted; the machine is flagged"
                    );
                    if let Err(e) = self.store.flag_machine(id, DRIVER_CRASHED, now).await {
                        tracing::warn!(machine = %id, error = %e, "couldn't record the machine's flag");
                    }
                }
                let (statuses, malformed) = WorkloadStatuses::received(statuses);
                if let Some(first) = malformed.first() {
                    tracing::warn!(
                        machine = %id, dropped = malformed.len(), %first,
                        "dropped malformed entries of a statuses report"
                    );
                }
                let reported = statuses::reported(statuses);
                self.confirm_removals(&reported).await;
                self.hub.report(self.machine.machine.id, reported);
            }
            pb::agent_report::Report::GpuUsage(usage) => {
                // Against the inventory it last recorded: only its own GPUs, within their memory.
                match einsora_proto::convert::gpu_usage(usage, &self.machine.machine.devices) {
                    Ok(gpus) => {
                        if let Err(e) = self.store.record_gpu_usage(id, &gpus, now).await {
                            tracing::warn!(machine = %id, error = %e, "couldn't record how busy its GPUs are");
                        }
                    }
                    Err(why) => tracing::warn!(
                        machine = %id, %why,
                        "refused a GPU usage report that doesn't fit the machine's GPUs"
                    ),
                }
            }
            pb::agent_report::Report::Output(output) => self.on_output(output, now).await?,
            pb::agent_report::Report::RenewCertificate(request) => {
                let renewed = self
                    .renewals
                    .renew(&*self.store, id, &request.csr_pem)
                    .await;
                if let Some((certificate, fingerprint)) = renewed {
                    // The stream is the machine's: from now on it answers for the new one.
                    self.renewed_fingerprint = Some(fingerprint);
                    self.renewed = Some(certificate);
                    self.next_send = Instant::now();
                }
            }
        }
        self.hub.heard(self.machine.machine.id);
        if self.seen_at.is_none_or(|at| at.elapsed() >= SEEN_EVERY) {
            match self.store.machine_seen(self.machine.machine.id, now).await {
                Ok(()) => self.seen_at = Some(Instant::now()),
                Err(e) => tracing::warn!(error = %e, "couldn't record that the machine was seen"),
            }
        }
        Ok(())
    }

    /// Keeps what one of the machine's workloads printed (ADR 0011), redacted: its own token
    /// (as its agent reported it, once ready) removed, and every credential shape cut. Output of
    /// a workload not placed on the machine, or of another attempt than its placed one, is
    /// dropped. A batch that can't be kept ends the stream: the agent, reconnected, reads again
    /// from where the store is up to, so nothing is lost.
    async fn on_output(
        &mut self,
        raw: pb::WorkloadOutput,
        now: OffsetDateTime,
    ) -> Result<(), Ended> {
        let id = self.machine.machine.id;
        let printed = match einsora_proto::convert::output(raw) {
            Ok(printed) => printed,
            Err(why) => {
                tracing::warn!(machine = %id, %why, "refused an output report that doesn't read");
                return Ok(());
            }
        };
        let Some((tenant, attempt)) = self.placed.get(&printed.workload_id).copied() else {
            tracing::warn!(machine = %id, workload = %printed.workload_id, "dropped output of a workload not placed on the machine");
            return Ok(());
        };
        if printed.attempt != attempt {
            tracing::warn!(machine = %id, workload = %printed.workload_id, "dropped output of an attempt the workload isn't on");
            return Ok(());
        }
        let token = self
            .hub
            .target(id, printed.workload_id, printed.attempt)
            .map(|t| t.token);
        let lines = printed
            .lines
            .into_iter()
            .map(|mut line| {
                line.text = einsora_core::output::redact_line(&line.text, token.as_deref());
                line
            })
            .collect();
        let batch = OutputBatch {
            workload_id: printed.workload_id,
            tenant_id: tenant,
            attempt: printed.attempt,
            to: printed.to,
            received_at: now,
            lines,
        };
        if let Err(e) = self.store.append_output(&batch, &self.output_caps).await {
            tracing::warn!(machine = %id, workload = %batch.workload_id, error = %e, "couldn't keep its output; ending the stream so it is sent again");
            return Err(Ended);
        }
        Ok(())
    }

    /// Forgets the removals the machine says it made, so its next desired state no longer
    /// lists them (a failed write is tried again on its next report).
    async fn confirm_removals(&mut self, reported: &HashMap<WorkloadId, Reported>) {
        let id = self.machine.machine.id;
        let done: Vec<WorkloadId> = self
            .pending_removals
            .iter()
            .filter(|w| {
                reported
                    .get(w)
                    .is_some_and(|r| r.mode == Mode::Remove && r.code == StatusCode::Removed)
            })
            .copied()
            .collect();
        for workload in done {
            match self.store.confirm_removal(workload, id).await {
                Ok(()) => {
                    self.pending_removals.remove(&workload);
                    self.next_send = Instant::now();
                    tracing::info!(machine = %id, %workload, "removed a workload deleted while the machine was away");
                }
                Err(e) => {
                    tracing::warn!(machine = %id, %workload, error = %e, "couldn't record a removal")
                }
            }
        }
    }

    /// A report was dropped for `excess`: the machine is flagged (logged and recorded once per
    /// stream and kind, so a flood floods neither the log nor the store).
    async fn flag(&mut self, excess: Excess) {
        if !self.flagged.insert(excess) {
            return;
        }
        let id = self.machine.machine.id;
        tracing::warn!(machine = %id, why = %excess, "dropped a report; the machine is flagged");
        let now = OffsetDateTime::now_utc();
        if let Err(e) = self.store.flag_machine(id, excess.word(), now).await {
            tracing::warn!(machine = %id, error = %e, "couldn't record the machine's flag");
        }
    }

    /// The revocation sweep found the machine or its certificate revoked: the stream ends, and
    /// the agent is told so.
    async fn revoked(&mut self) -> Result<(), Ended> {
        tracing::info!(machine = %self.machine.machine.id, "machine revoked; closing its stream");
        let refusal = self.tx.send(Err(Refusal::Revoked.into()));
        let _ = tokio::time::timeout(self.timers.send_timeout, refusal).await;
        Err(Ended)
    }
}
