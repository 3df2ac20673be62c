//! What a machine's stream may send: a report over a bound is dropped and flags the machine;
//! one larger than the port decodes ends the stream too.

use std::time::Duration;

use einsora_core::ids::MachineId;
use einsora_proto::agent::v1 as pb;
use einsora_testkit::POLL;
use pb::agent_report::Report;

use super::harness::{PATIENCE, Port, Stream};
use crate::agents::MAX_MESSAGE;
use crate::agents::limits::tests::statuses;
use einsora_proto::convert::bounds::MAX_WORKLOADS;

const TOKEN: &str = "enr_0123456789abcdefghijklmnopqrstuv";
const QUIET: Duration = Duration::from_millis(300);

async fn synced() -> (Port, MachineId, Stream) {
    let port = Port::start(&[]).await;
    port.tenancy.token(TOKEN).await;
    let (machine, cert) = port.enrol(TOKEN).await.unwrap();
    let stream = port.sync(&cert).await.unwrap();
    (port, machine, stream)
}

/// What the machine is flagged for, once it is (`None` if it isn't within `within`).
async fn flag(port: &Port, machine: MachineId, within: Duration) -> Option<String> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let flag = port.tenancy.store.machine_flag(machine).await.unwrap();
        if let Some(flag) = flag {
            return Some(flag.what);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// A driver that crashed on the machine (its agent restarted it and says so): flagged.
#[tokio::test]
async fn a_driver_crash_the_agent_reports_flags_the_machine() {
    let (port, machine, stream) = synced().await;
    stream.send(statuses(1)).await;
    assert_eq!(flag(&port, machine, QUIET).await, None);
    stream
        .send(Report::Statuses(pb::WorkloadStatuses {
            driver_restarts: 1,
            ..Default::default()
        }))
        .await;
    let flagged = flag(&port, machine, PATIENCE).await;
    assert_eq!(flagged.as_deref(), Some("driver_crashed"));
}

#[tokio::test]
async fn reports_at_an_agents_pace_flag_nothing_and_a_flood_flags_the_machine() {
    let (port, machine, mut stream) = synced().await;
    for _ in 0..5 {
        stream.send(statuses(3)).await;
    }
    assert_eq!(flag(&port, machine, QUIET).await, None, "an agent's pace");

    for _ in 0..500 {
        stream.send(statuses(1)).await;
    }
    let flagged = flag(&port, machine, PATIENCE).await;
    assert_eq!(flagged.as_deref(), Some("report_flood"));
    assert!(stream.stays_open(QUIET).await, "dropped, not cut off");
}

#[tokio::test]
async fn a_report_over_a_bound_is_dropped_and_flags_the_machine() {
    let (port, machine, mut stream) = synced().await;
    stream.send(statuses(MAX_WORKLOADS)).await;
    assert_eq!(flag(&port, machine, QUIET).await, None, "at the bound");
    stream.send(statuses(MAX_WORKLOADS + 1)).await;
    let flagged = flag(&port, machine, PATIENCE).await;
    assert_eq!(flagged.as_deref(), Some("oversized_report"));
    assert!(stream.stays_open(QUIET).await, "dropped, not cut off");
}

#[tokio::test]
async fn a_message_larger_than_the_port_decodes_ends_the_stream_and_flags_the_machine() {
    let (port, machine, mut stream) = synced().await;
    let csr_pem = "A".repeat(MAX_MESSAGE + 1);
    stream
        .send(Report::RenewCertificate(pb::CertificateRenewal { csr_pem }))
        .await;
    let ended = loop {
        match stream.next().await {
            Ok(_) => continue,
            Err(status) => break status,
        }
    };
    assert_ne!(ended.code(), tonic::Code::PermissionDenied, "{ended:?}");
    let flagged = flag(&port, machine, PATIENCE).await;
    assert_eq!(flagged.as_deref(), Some("oversized_report"));
}
