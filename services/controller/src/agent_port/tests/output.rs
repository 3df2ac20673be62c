//! What a machine's workloads print, as a scripted fake agent ships it: kept for its own
//! placed workloads, redacted, once however often it is shipped again; the head it reached goes
//! back in the desired state; output of a workload not placed on the machine, or of an attempt
//! it isn't on, is dropped.

use einsora_core::ids::WorkloadId;
use einsora_core::lifecycle::State;
use einsora_core::output::OutputStream;
use einsora_proto::agent::v1 as pb;
use einsora_proto::convert::ProtoEnum;
use einsora_store::OutputQuery;
use einsora_testkit::eventually_async;
use einsora_testkit::fixtures::{Lifecycle, new_workload, path_to};
use pb::agent_report::Report;

use super::harness::{PATIENCE, Port};

const TOKEN: &str = "enr_0123456789abcdefghijklmnopqrstuv";

fn line(text: &str, end: u64) -> pb::OutputLine {
    pb::OutputLine {
        stream: OutputStream::Stderr.to_field(),
        printed_at: Some(einsora_proto::convert::timestamp(
            time::OffsetDateTime::UNIX_EPOCH + time::Duration::days(20_000),
        )),
        text: text.to_owned(),
        dropped_before: 0,
        gap_before: false,
        end_offset: end,
    }
}

fn output(workload: WorkloadId, to: u64, lines: Vec<pb::OutputLine>) -> Report {
    Report::Output(pb::WorkloadOutput {
        workload_id: workload.to_string(),
        attempt: 1,
        to_offset: to,
        lines,
    })
}

#[tokio::test]
async fn a_placed_workloads_output_is_kept_redacted_once_and_its_head_sent_back() {
    // A heartbeat short enough to see the head come back.
    let timers = crate::agents::StreamTimers {
        heartbeat: std::time::Duration::from_millis(200),
        recheck: PATIENCE,
        send_timeout: PATIENCE,
    };
    let port = Port::with_timers(&[], timers).await;
    port.tenancy.token(TOKEN).await;
    let (machine, cert) = port.enrol(TOKEN).await.unwrap();
    let store = &port.tenancy.store;
    let mut placing = Lifecycle::placing_on("cpu-1c-2g");
    placing.admission.machine_id = Some(machine);
    let new = new_workload(port.tenancy.tenant, "printer");
    let w = placing
        .through(&**store, &new, path_to(State::Running))
        .await;
    let mut stream = port.sync(&cert).await.unwrap();
    // Its first desired state lists the workload, with no output yet.
    let first = stream.next().await.unwrap();
    assert_eq!(first.workloads[0].output, None);

    // A batch claiming an attempt the workload isn't on is dropped: it can't hold back the
    // real attempt's lines.
    let hostile = Report::Output(pb::WorkloadOutput {
        attempt: u32::MAX,
        ..match output(w.id, 99, vec![line("forged", 99)]) {
            Report::Output(o) => o,
            _ => unreachable!(),
        }
    });
    stream.send(hostile).await;
    let secret = "the key is tsk_abcdefghijklmnop";
    let batch = output(w.id, 20, vec![line("hello", 6), line(secret, 20)]);
    stream.send(batch.clone()).await;
    stream.send(batch).await;
    let stranger = WorkloadId::new();
    stream
        .send(output(stranger, 5, vec![line("not placed here", 5)]))
        .await;
    let all = OutputQuery {
        limit: 100,
        ..OutputQuery::default()
    };
    let page = eventually_async("its output kept", PATIENCE, async || {
        let page = store.read_output(w.id, &all).await.ok()?;
        (page.lines.len() == 2).then_some(page)
    })
    .await;
    assert_eq!(page.lines[0].text, "hello");
    assert_eq!(page.lines[1].text, "the key is tsk_abcd…", "redacted");
    assert_eq!(page.lines[1].stream, OutputStream::Stderr);
    assert_eq!(page.next_seq, 3, "shipped twice, kept once");
    let theirs = store.read_output(stranger, &all).await.unwrap();
    assert!(
        theirs.lines.is_empty(),
        "not placed on the machine: dropped"
    );

    // The next desired state says where its output is up to.
    let resumed = eventually_async("its head in the desired state", PATIENCE, async || {
        let state = stream.next().await.ok()?;
        state.workloads[0].output
    })
    .await;
    assert_eq!((resumed.attempt, resumed.offset), (1, 20));
}
