//! A machine's Sync stream. The machine is known by its certificate (role and fingerprint,
//! checked against the store, again every `RECHECK`, so a revoked machine's stream ends within
//! seconds), never by what it reports. It is sent its complete desired state (computed from the
//! store each time) on connect, whenever the controller runs, parks or deletes one of its
//! workloads (which wakes only this machine's stream, through the hub), and at least every
//! `HEARTBEAT`; its inventory reports update its registration when they fit it.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use einsora_core::agent::{Mode, StatusCode};
use einsora_core::catalog::Catalog;
use einsora_core::ids::{MachineId, WorkloadId};
use einsora_proto::agent::v1 as pb;
use einsora_proto::agent::v1::sync_service_server::SyncService;
use einsora_proto::convert::{ProtoEnum, timestamp};
use einsora_runtime::pki::{Role, role_of};
use einsora_runtime::shutdown::Shutdown;
use einsora_store::{MachineRecord, Store, StoreError};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use super::hub::{AccessTarget, Hub, Reported};
use super::renew::Renewals;
use super::{desired, inventory};

/// The desired state is sent at least this often.
const HEARTBEAT: Duration = Duration::from_secs(20);
/// How often the machine's certificate is checked again (revocation closes within ~this).
const RECHECK: Duration = Duration::from_secs(2);
/// `last_seen_at` is written at most this often.
const SEEN_EVERY: Duration = Duration::from_secs(15);
/// An agent that doesn't take its desired state for this long is dropped (it reconnects), so a
/// stalled peer never holds a session, or the controller's shutdown, forever.
const SEND_TIMEOUT: Duration = Duration::from_secs(20);
/// After a failed desired-state read, the next try.
const READ_RETRY: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
pub struct SyncApi {
    store: Arc<dyn Store>,
    catalog: Arc<Catalog>,
    hub: Arc<Hub>,
    renewals: Renewals,
    shutdown: Shutdown,
}

impl SyncApi {
    pub fn new(
        store: Arc<dyn Store>,
        catalog: Arc<Catalog>,
        hub: Arc<Hub>,
        renewals: Renewals,
        shutdown: Shutdown,
    ) -> Self {
        SyncApi {
            store,
            catalog,
            hub,
            renewals,
            shutdown,
        }
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
        let machine = self
            .store
            .machine_for_certificate(id, &fingerprint)
            .await
            .map_err(store_status)?
            .ok_or_else(revoked)?;
        let (tx, rx) = mpsc::channel(4);
        let session = Session {
            store: Arc::clone(&self.store),
            catalog: Arc::clone(&self.catalog),
            hub: Arc::clone(&self.hub),
            renewals: self.renewals.clone(),
            renewed: None,
            machine,
            fingerprint,
            tx,
            sent: None,
            next_send: Instant::now(),
            read_failing: false,
            seen_at: None,
        };
        tokio::spawn(session.run(request.into_inner(), self.shutdown.clone()));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

/// The machine a verified peer certificate names, and the certificate's fingerprint.
fn identity<T>(request: &Request<T>) -> Result<(MachineId, [u8; 32]), Status> {
    let certs = request
        .peer_certs()
        .ok_or_else(|| Status::unauthenticated("Sync needs the machine's certificate"))?;
    let leaf = certs
        .first()
        .ok_or_else(|| Status::unauthenticated("Sync needs the machine's certificate"))?;
    match role_of(leaf) {
        Ok(Role::Agent { machine_id }) => Ok((
            MachineId::from_uuid(machine_id),
            Sha256::digest(leaf.as_ref()).into(),
        )),
        _ => Err(Status::permission_denied(
            "only a machine certificate may sync",
        )),
    }
}

/// The statuses of a report that name a workload, an attempt, a mode and a code; others are
/// dropped (an agent never sends free text, and a malformed entry decides nothing).
fn reported(statuses: &pb::WorkloadStatuses) -> HashMap<WorkloadId, Reported> {
    statuses
        .workloads
        .iter()
        .filter_map(|s| {
            let workload = s.workload_id.parse::<WorkloadId>().ok()?;
            let mode = Mode::from_field("mode", s.mode).ok()?;
            let code = StatusCode::from_field("code", s.code).ok()?;
            Some((
                workload,
                Reported {
                    attempt: s.attempt,
                    mode,
                    code,
                    target: s.access_target.as_ref().and_then(target),
                },
            ))
        })
        .collect()
}

/// An absolute socket path and a token, or nothing.
fn target(t: &pb::AccessTarget) -> Option<AccessTarget> {
    let absolute = std::path::Path::new(&t.socket_path).is_absolute();
    (absolute && !t.token.is_empty()).then(|| AccessTarget {
        socket_path: t.socket_path.clone(),
        token: t.token.clone(),
    })
}

fn revoked() -> Status {
    Status::permission_denied("this machine's certificate is unknown or revoked")
}

fn store_status(err: StoreError) -> Status {
    tracing::warn!(error = %err, "the store failed a Sync request");
    Status::unavailable("the database is unavailable; try again shortly")
}

struct Session {
    store: Arc<dyn Store>,
    catalog: Arc<Catalog>,
    hub: Arc<Hub>,
    renewals: Renewals,
    /// A renewed certificate to go with the next desired state.
    renewed: Option<pb::RenewedCertificate>,
    machine: MachineRecord,
    fingerprint: [u8; 32],
    tx: mpsc::Sender<Result<pb::DesiredState, Status>>,
    /// What was sent last, so an unchanged state isn't sent again before the heartbeat.
    sent: Option<Vec<pb::DesiredWorkload>>,
    /// When the desired state is sent again even if unchanged (or retried after a failed read).
    next_send: Instant,
    /// A read is failing: logged once per outage.
    read_failing: bool,
    seen_at: Option<Instant>,
}

/// Why a session ended early.
struct Ended;

impl Session {
    async fn run(mut self, mut reports: Streaming<pb::AgentReport>, shutdown: Shutdown) {
        let id = self.machine.machine.id;
        tracing::info!(machine = %id, "machine connected");
        let wake = self.hub.connected(id);
        let mut recheck = tokio::time::interval(RECHECK);
        loop {
            let step = tokio::select! {
                () = shutdown.cancelled() => break,
                report = reports.message() => match report {
                    Ok(Some(report)) => {
                        self.on_report(report).await;
                        Ok(())
                    }
                    _ => break,
                },
                () = wake.notified() => self.send(false).await,
                () = tokio::time::sleep_until(self.next_send) => self.send(true).await,
                _ = recheck.tick() => self.still_trusted().await,
            };
            if step.is_err() {
                break;
            }
        }
        self.hub.disconnected(id);
        tracing::info!(machine = %id, "machine disconnected");
    }

    /// Sends the desired state if it changed (or `force`). A failed read sends nothing (it is
    /// never taken for "remove everything") and is tried again shortly.
    async fn send(&mut self, force: bool) -> Result<(), Ended> {
        let on_machine = match self.store.workloads_on(self.machine.machine.id).await {
            Ok(workloads) => {
                self.read_failing = false;
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
        let workloads = desired::workloads(&on_machine, &self.catalog, self.machine.machine.owner);
        if !force && self.renewed.is_none() && self.sent.as_ref() == Some(&workloads) {
            return Ok(());
        }
        let state = pb::DesiredState {
            workloads: workloads.clone(),
            renewed_certificate: self.renewed.take(),
            generated_at: Some(timestamp(OffsetDateTime::now_utc())),
        };
        match tokio::time::timeout(SEND_TIMEOUT, self.tx.send(Ok(state))).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Err(Ended),
            Err(_) => {
                tracing::warn!(machine = %self.machine.machine.id, "the agent doesn't take its desired state; dropping it");
                return Err(Ended);
            }
        }
        self.sent = Some(workloads);
        self.next_send = Instant::now() + HEARTBEAT;
        Ok(())
    }

    async fn on_report(&mut self, report: pb::AgentReport) {
        let now = OffsetDateTime::now_utc();
        match report.report {
            Some(pb::agent_report::Report::Inventory(inventory)) => {
                match inventory::registration(&self.machine, &inventory, now) {
                    Ok(registration) => match self.store.record_inventory(&registration).await {
                        Ok(_) => {
                            self.machine.machine = registration.machine;
                            self.seen_at = Some(Instant::now());
                        }
                        Err(e) => tracing::warn!(error = %e, "couldn't record its inventory"),
                    },
                    Err(why) => tracing::warn!(
                        machine = %self.machine.machine.id, why, "refused an inventory that doesn't fit the machine"
                    ),
                }
            }
            Some(pb::agent_report::Report::Statuses(statuses)) => {
                self.hub
                    .report(self.machine.machine.id, reported(&statuses));
            }
            Some(pb::agent_report::Report::RenewCertificate(request)) => {
                let id = self.machine.machine.id;
                let renewed = self
                    .renewals
                    .renew(&*self.store, id, &request.csr_pem)
                    .await;
                if let Some((certificate, fingerprint)) = renewed {
                    // The stream is the machine's: from now on it answers for the new one.
                    self.fingerprint = fingerprint;
                    self.renewed = Some(certificate);
                    self.next_send = Instant::now();
                }
            }
            None => {}
        }
        self.hub.heard(self.machine.machine.id);
        if self.seen_at.is_none_or(|at| at.elapsed() >= SEEN_EVERY) {
            match self.store.machine_seen(self.machine.machine.id, now).await {
                Ok(()) => self.seen_at = Some(Instant::now()),
                Err(e) => tracing::warn!(error = %e, "couldn't record that the machine was seen"),
            }
        }
    }

    /// Ends the stream once the machine or its certificate is revoked.
    async fn still_trusted(&mut self) -> Result<(), Ended> {
        match self
            .store
            .machine_for_certificate(self.machine.machine.id, &self.fingerprint)
            .await
        {
            Ok(Some(_)) | Err(_) => Ok(()),
            Ok(None) => {
                tracing::info!(machine = %self.machine.machine.id, "machine revoked; closing its stream");
                let _ = tokio::time::timeout(SEND_TIMEOUT, self.tx.send(Err(revoked()))).await;
                Err(Ended)
            }
        }
    }
}
