//! A machine that floods on its own Sync stream:
//! - reports: statuses as fast as the port takes them, each unlike the last (a new attempt,
//!   so each one the budget lets through wakes the controller's reconcile), and every 10th
//!   message a certificate renewal with a real CSR;
//! - streams: new Sync streams with the machine's identity as fast as they open (4
//!   connections, 8 at once on each), each dropped once its first desired state arrives.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use einsora_proto::agent::v1 as pb;
use einsora_proto::agent::v1::sync_service_client::SyncServiceClient;
use pb::agent_report::Report;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;

use super::tally::{self, Shared, Tally};
use super::world::{Enrolled, PATIENCE, World, code};

/// A renewal every this many messages.
const RENEW_EVERY: u64 = 10;
const CONNECTIONS: usize = 4;
const STREAMS: usize = 8;

fn statuses(attempt: u32) -> Report {
    Report::Statuses(pb::WorkloadStatuses {
        workloads: vec![pb::WorkloadStatus {
            workload_id: "0190c0de-0000-7000-8000-00000000f100".into(),
            attempt,
            mode: pb::Mode::Run as i32,
            code: pb::StatusCode::Ready as i32,
            driver: "sim".into(),
            access_target: None,
        }],
        ..Default::default()
    })
}

/// Reports on one stream for `window`.
pub async fn reports(
    world: Arc<World>,
    machine: Enrolled,
    from: IpAddr,
    csr_pem: Arc<str>,
    window: Duration,
) -> anyhow::Result<Tally> {
    let deadline = Instant::now() + window;
    let channel = world.connect(from, Some(&machine)).await?;
    let (tx, rx) = mpsc::channel(64);
    let mut client = SyncServiceClient::new(channel);
    let call = client.sync(ReceiverStream::new(rx));
    let mut desired = tokio::time::timeout(PATIENCE, call).await??.into_inner();
    let reader = tokio::spawn(async move {
        let mut tally = Tally::default();
        let ended = loop {
            match desired.message().await {
                Ok(Some(state)) => {
                    tally.note("desired states received", 1);
                    if state.renewed_certificate.is_some() {
                        tally.note("renewals answered", 1);
                    }
                }
                Ok(None) => break "closed".to_owned(),
                Err(status) => break code(status.code()),
            }
        };
        tally.note(&format!("stream ended: {ended}"), 1);
        tally
    });
    let mut tally = Tally::default();
    let mut i: u64 = 0;
    while Instant::now() < deadline {
        i += 1;
        let (report, kind) = if i.is_multiple_of(RENEW_EVERY) {
            let renewal = pb::CertificateRenewal {
                csr_pem: csr_pem.to_string(),
            };
            (Report::RenewCertificate(renewal), "renewals sent")
        } else {
            (statuses(i as u32), "statuses sent")
        };
        let sent = tokio::time::timeout(
            PATIENCE,
            tx.send(pb::AgentReport {
                report: Some(report),
            }),
        )
        .await;
        match sent {
            Ok(Ok(())) => {
                tally.outcome("taken by the port");
                tally.note(kind, 1);
            }
            Ok(Err(_)) => {
                tally.outcome("stream gone");
                break;
            }
            Err(_) => {
                tally.outcome("not taken in 15 s");
                break;
            }
        }
    }
    // The stream ends as the agent's side closes.
    drop(tx);
    let read = tokio::time::timeout(PATIENCE, reader)
        .await
        .map_err(|_| anyhow::anyhow!("sync reports: the stream never ended"))??;
    tally.merge(&read);
    tally.check("sync reports")?;
    Ok(tally)
}

/// New streams with the machine's identity for `window`.
pub async fn streams(
    world: Arc<World>,
    machine: Enrolled,
    from: IpAddr,
    window: Duration,
) -> anyhow::Result<Tally> {
    let deadline = Instant::now() + window;
    let shared: Shared = Arc::default();
    let mut tasks = Vec::new();
    for _ in 0..CONNECTIONS {
        let channel = world.connect(from, Some(&machine)).await?;
        for _ in 0..STREAMS {
            let (shared, mut client) =
                (Arc::clone(&shared), SyncServiceClient::new(channel.clone()));
            tasks.push(tokio::spawn(async move {
                while Instant::now() < deadline {
                    let word = open_once(&mut client).await;
                    tally::add(&shared, |t| t.outcome(word));
                }
            }));
        }
    }
    tally::join_all(tasks, "sync streams").await?;
    let tally = tally::take(&shared);
    tally.check("sync streams")?;
    Ok(tally)
}

/// Opens a stream and waits for its first desired state; how that went.
async fn open_once(client: &mut SyncServiceClient<tonic::transport::Channel>) -> String {
    let (tx, rx) = mpsc::channel::<pb::AgentReport>(1);
    let opened = tokio::time::timeout(PATIENCE, client.sync(ReceiverStream::new(rx))).await;
    let word = match opened {
        Ok(Ok(response)) => {
            let mut desired = response.into_inner();
            match tokio::time::timeout(PATIENCE, desired.message()).await {
                Ok(Ok(Some(_))) => "opened, desired state received".to_owned(),
                Ok(Ok(None)) => "opened, closed at once".to_owned(),
                Ok(Err(status)) => format!("opened, then {}", code(status.code())),
                Err(_) => "opened, nothing in 15 s".to_owned(),
            }
        }
        Ok(Err(status)) => code(status.code()),
        Err(_) => "no answer in 15 s".to_owned(),
    };
    drop(tx);
    word
}
