//! A session's own timers and what it drops, against a scripted fake agent.

use std::time::Duration;

use einsora_core::agent::{Mode, StatusCode};
use einsora_core::ids::WorkloadId;
use einsora_proto::agent::v1 as pb;
use einsora_proto::convert::ProtoEnum;
use einsora_testkit::eventually_async;
use pb::agent_report::Report;
use tokio::time::Instant;
use tonic::Code;

use super::harness::{PATIENCE, Port};
use crate::agents::StreamTimers;

const TOKEN: &str = "enr_0123456789abcdefghijklmnopqrstuv";

fn timers(recheck: Duration, heartbeat: Duration, send_timeout: Duration) -> StreamTimers {
    StreamTimers {
        heartbeat,
        recheck,
        send_timeout,
    }
}

/// Revoked while its stream is open, a machine is told so and cut off within about one
/// recheck, without waiting for anything it sends.
#[tokio::test]
async fn a_revoked_machines_stream_ends_within_the_recheck() {
    let recheck = Duration::from_millis(200);
    let port = Port::with_timers(&[], timers(recheck, PATIENCE, PATIENCE)).await;
    port.tenancy.token(TOKEN).await;
    let (machine, cert) = port.enrol(TOKEN).await.unwrap();
    let mut stream = port.sync(&cert).await.unwrap();
    let (tenant, store) = (port.tenancy.tenant, &port.tenancy.store);
    store
        .revoke_machine(tenant, machine)
        .await
        .unwrap()
        .unwrap();
    let revoked = Instant::now();
    let status = loop {
        match stream.next().await {
            Ok(_) => continue,
            Err(status) => break status,
        }
    };
    let took = revoked.elapsed();
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    assert!(took < recheck * 5, "cut off {took:?} after its revocation");
}

/// An agent that stops taking its desired state is dropped once a send has waited the send
/// timeout, so a stalled peer holds nothing open.
#[tokio::test]
async fn an_agent_that_doesnt_take_its_desired_state_is_dropped() {
    // A heartbeat of nothing sends as fast as the stream takes it, filling the agent's small
    // window and the session's buffer; then a send waits, and times out.
    let port = Port::with_timers(
        &[],
        timers(PATIENCE, Duration::ZERO, Duration::from_millis(200)),
    )
    .await;
    port.tenancy.token(TOKEN).await;
    let (machine, cert) = port.enrol(TOKEN).await.unwrap();
    let stream = port.sync_with_window(&cert, Some(1024)).await.unwrap();
    eventually_async("a stalled agent's session ended", PATIENCE, async || {
        (port.hub.streams(machine) == 0).then_some(())
    })
    .await;
    drop(stream);
}

/// A statuses report's malformed entries are dropped one by one: the well-formed ones still
/// count, the stream stays open and the machine isn't flagged (malformed isn't oversized).
#[tokio::test]
async fn malformed_statuses_are_dropped_and_the_rest_kept() {
    let port = Port::start(&[]).await;
    port.tenancy.token(TOKEN).await;
    let (machine, cert) = port.enrol(TOKEN).await.unwrap();
    let mut stream = port.sync(&cert).await.unwrap();
    let good = WorkloadId::new();
    let status = |id: String, mode: i32, code: i32| pb::WorkloadStatus {
        workload_id: id,
        attempt: 1,
        mode,
        code,
        driver: "docker".into(),
        access_target: None,
    };
    let (run, ready) = (Mode::Run.to_field(), StatusCode::Ready.to_field());
    stream
        .send(Report::Statuses(pb::WorkloadStatuses {
            workloads: vec![
                status("not-a-uuid".into(), run, ready),
                status(WorkloadId::new().to_string(), 0, ready),
                status(WorkloadId::new().to_string(), run, 999),
                status(good.to_string(), run, ready),
            ],
            driver_restarts: 0,
        }))
        .await;
    let reported = eventually_async("the good status counted", PATIENCE, async || {
        port.hub.status(machine, good).ok().flatten()
    })
    .await;
    assert_eq!(
        (reported.mode, reported.code),
        (Mode::Run, StatusCode::Ready)
    );
    assert!(stream.stays_open(Duration::from_millis(300)).await);
    let flag = port.tenancy.store.machine_flag(machine).await.unwrap();
    assert_eq!(flag, None, "flagged for a malformed entry");
}
