use einsora_core::ids::UsageRecordId;
use einsora_core::lifecycle::State;
use einsora_core::region::Region;
use einsora_proto::catalog::v1 as catalog_pb;
use einsora_proto::catalog::v1::catalog_service_server::CatalogService;
use einsora_proto::common::v1::WorkloadState as PbState;
use einsora_proto::workloads::v1 as pb;
use einsora_proto::workloads::v1::workload_service_server::WorkloadService;
use einsora_store::UsageRecord;
use time::macros::datetime;
use tokio_stream::StreamExt;
use tonic::Code;

use crate::machines::register;
use crate::{assert_code, env, notebook};

fn ids(ws: &[pb::Workload]) -> Vec<&str> {
    ws.iter().map(|w| w.name.as_str()).collect()
}

#[tokio::test]
async fn lists_and_gets_hide_deleted_workloads_unless_asked() {
    let env = env().await;
    let who = env.tenant("acme", None).await;
    let mut ids_by_name = Vec::new();
    for name in ["a", "b", "c"] {
        ids_by_name.push(
            env.create(&who, notebook(name, "cpu-1c-2g"))
                .await
                .unwrap()
                .id,
        );
    }
    env.advance(&ids_by_name[1], &[State::Deleting, State::Deleted], None)
        .await;

    let list = |include_deleted, page_size, page_token: &str| {
        who.req(pb::ListWorkloadsRequest {
            include_deleted,
            page_size,
            page_token: page_token.into(),
        })
    };
    let live = env
        .workloads
        .list_workloads(list(false, 0, ""))
        .await
        .unwrap();
    assert_eq!(ids(&live.get_ref().workloads), ["c", "a"], "newest first");
    assert_eq!(live.get_ref().next_page_token, "");
    let all = env
        .workloads
        .list_workloads(list(true, 0, ""))
        .await
        .unwrap();
    assert_eq!(ids(&all.get_ref().workloads), ["c", "b", "a"]);

    let first = env
        .workloads
        .list_workloads(list(true, 2, ""))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ids(&first.workloads), ["c", "b"]);
    let rest = env
        .workloads
        .list_workloads(list(true, 2, &first.next_page_token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (ids(&rest.workloads), rest.next_page_token.as_str()),
        (vec!["a"], "")
    );
    let bad = env.workloads.list_workloads(list(true, 2, "nope")).await;
    assert_code(bad, Code::InvalidArgument);

    let get = |include_deleted| {
        who.req(pb::GetWorkloadRequest {
            id: ids_by_name[1].clone(),
            include_deleted,
        })
    };
    assert_code(env.workloads.get_workload(get(false)).await, Code::NotFound);
    let deleted = env
        .workloads
        .get_workload(get(true))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(deleted.state, PbState::Deleted as i32);
}

#[tokio::test]
async fn events_come_oldest_first_and_export_holds_everything() {
    let env = env().await;
    let who = env.tenant("acme", None).await;
    let machine = register(&env, &who, "studio", true).await;
    let w = env.create(&who, notebook("nb", "cpu-1c-2g")).await.unwrap();
    let placed = env
        .advance(
            &w.id,
            &[State::Provisioning, State::Running, State::Stopping],
            Some(machine),
        )
        .await;
    let hour = datetime!(2025-03-01 10:00 UTC);
    let record = UsageRecord {
        id: UsageRecordId::new(),
        tenant_id: who.tenant,
        workload_id: placed.id,
        region: Region::new("local").unwrap(),
        machine_id: Some(machine),
        placed_class: "cpu-1c-2g".into(),
        units: 1,
        hour_start: hour,
        seconds: 1200,
    };
    env.store.record_usage(&record).await.unwrap();

    let req = pb::ListWorkloadEventsRequest { id: w.id.clone() };
    let events = env
        .workloads
        .list_workload_events(who.req(req))
        .await
        .unwrap();
    let steps: Vec<_> = events
        .get_ref()
        .events
        .iter()
        .map(|e| (e.from_state, e.to_state))
        .collect();
    let s = |s: PbState| s as i32;
    assert_eq!(
        steps,
        [
            (s(PbState::Unspecified), s(PbState::Pending)),
            (s(PbState::Pending), s(PbState::Provisioning)),
            (s(PbState::Provisioning), s(PbState::Running)),
            (s(PbState::Running), s(PbState::Stopping)),
        ]
    );
    assert_eq!(
        events.get_ref().events[0].reason,
        format!("created by {}", who.by_token())
    );

    let req = pb::ExportWorkloadRequest { id: w.id.clone() };
    let export = env
        .workloads
        .export_workload(who.req(req))
        .await
        .unwrap()
        .into_inner();
    let exported = export.workload.unwrap();
    assert_eq!(
        (exported.id.as_str(), exported.state),
        (w.id.as_str(), s(PbState::Stopping))
    );
    assert_eq!(exported.machine_id, machine.to_string());
    assert_eq!(export.events, events.into_inner().events);
    assert_eq!(export.usage.len(), 1);
    assert_eq!((export.usage[0].seconds, export.usage[0].units), (1200, 1));
    assert_eq!(export.machine_name, "studio");
    assert!(export.exported_at.is_some());
}

#[tokio::test]
async fn the_catalog_is_the_installations() {
    let env = env().await;
    let who = env.tenant("acme", None).await;
    let catalog = env
        .catalog
        .get_catalog(who.req(catalog_pb::GetCatalogRequest {}))
        .await;
    let catalog = catalog.unwrap().into_inner();
    assert_eq!(catalog.regions[0].name, "local");
    assert!(catalog.regions[0].is_default);
    assert!(catalog.classes.iter().any(|c| c.name == "l40s-48gb"));
    assert!(catalog.images.iter().any(|i| i.name == "jupyterlab"));
    let anonymous = tonic::Request::new(catalog_pb::GetCatalogRequest {});
    assert_code(
        env.catalog.get_catalog(anonymous).await,
        Code::Unauthenticated,
    );
}

/// A workload's logs as the store keeps them: from the oldest, its tail, after a line's number
/// (following), with what was dropped; past the page bound is refused, naming it; the export
/// holds them all.
#[tokio::test]
async fn logs_come_by_number_tail_or_after_a_line() {
    use einsora_core::output::{OutputStream, PrintedLine};
    use einsora_store::{OutputBatch, OutputCaps};
    let env = env().await;
    let who = env.tenant("acme", None).await;
    let w = env
        .create(&who, notebook("printer", "cpu-1c-2g"))
        .await
        .unwrap();
    let workload = w.id.parse().unwrap();
    let lines: Vec<PrintedLine> = (1..=5)
        .map(|n| PrintedLine {
            stream: OutputStream::Stderr,
            printed_at: datetime!(2025-03-01 10:00 UTC),
            text: format!("line {n}"),
            dropped_before: 0,
            gap_before: false,
            end: n * 7,
        })
        .collect();
    let caps = OutputCaps {
        per_workload: 3 * (6 + 64),
        per_tenant: 1 << 20,
        total: 1 << 20,
    };
    let batch = OutputBatch {
        workload_id: workload,
        tenant_id: who.tenant,
        attempt: 1,
        to: 35,
        received_at: time::OffsetDateTime::now_utc(),
        lines,
    };
    env.store.append_output(&batch, &caps).await.unwrap();
    let logs = |after, tail, limit| {
        let request = who.req(pb::ListWorkloadLogsRequest {
            id: w.id.clone(),
            after,
            tail,
            limit,
            ..Default::default()
        });
        async { first_page(env.workloads.list_workload_logs(request).await).await }
    };
    let texts = |r: &pb::ListWorkloadLogsResponse| -> Vec<String> {
        r.lines.iter().map(|l| l.text.clone()).collect()
    };
    let all = logs(0, 0, 0).await.unwrap();
    assert_eq!(
        texts(&all),
        ["line 3", "line 4", "line 5"],
        "three lines' worth kept"
    );
    assert_eq!((all.dropped, all.next_after), (2, 5));
    assert_eq!(all.lines[0].number, 3);
    assert_eq!(all.lines[0].stream, "stderr");
    let tail = logs(0, 1, 0).await.unwrap();
    assert_eq!(texts(&tail), ["line 5"]);
    let after = logs(3, 0, 1).await.unwrap();
    assert_eq!(
        (texts(&after), after.next_after),
        (vec!["line 4".to_owned()], 4)
    );
    let caught_up = logs(5, 0, 0).await.unwrap();
    assert_eq!((caught_up.lines.len(), caught_up.next_after), (0, 5));
    let err = logs(0, 0, 1001).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("at most 1000"), "{}", err.message());

    let export = env
        .workloads
        .export_workload(who.req(pb::ExportWorkloadRequest { id: w.id.clone() }))
        .await
        .unwrap()
        .into_inner();
    let exported: Vec<&str> = export.output_logs.iter().map(|l| l.text.as_str()).collect();
    assert_eq!(
        exported,
        ["line 3", "line 4", "line 5"],
        "its output in the export"
    );
    assert_eq!(export.output_dropped, 2);
}

type LogAnswer = Result<
    tonic::Response<<EnvWorkloads as WorkloadService>::ListWorkloadLogsStream>,
    tonic::Status,
>;
type EnvWorkloads = einsora_api::workloads::WorkloadsApi;

/// The one page a request without `follow` streams (and that the stream then ends).
async fn first_page(answer: LogAnswer) -> Result<pb::ListWorkloadLogsResponse, tonic::Status> {
    let mut stream = answer?.into_inner();
    let first = stream.next().await.expect("a page")?;
    assert!(stream.next().await.is_none(), "one page only");
    Ok(first)
}

/// Following: the kept lines since a time, then each new batch as the agent's lines reach the
/// store; the stream ends once the workload has stopped and its last lines are in.
#[tokio::test]
async fn following_sends_new_lines_until_the_workload_stops() {
    use einsora_core::output::{OutputStream, PrintedLine};
    use einsora_store::{OutputBatch, OutputCaps};
    let env = env().await;
    let who = env.tenant("acme", None).await;
    let w = env
        .create(&who, notebook("printer", "cpu-1c-2g"))
        .await
        .unwrap();
    env.advance(&w.id, &[State::Provisioning, State::Running], None)
        .await;
    let caps = OutputCaps {
        per_workload: 1 << 20,
        per_tenant: 1 << 20,
        total: 1 << 20,
    };
    let ship = |from: u64, texts: &[(&str, time::OffsetDateTime)]| {
        let mut end = from;
        let lines = texts
            .iter()
            .map(|(text, at)| {
                end += text.len() as u64 + 1;
                PrintedLine {
                    stream: OutputStream::Stdout,
                    printed_at: *at,
                    text: (*text).to_owned(),
                    dropped_before: 0,
                    gap_before: false,
                    end,
                }
            })
            .collect();
        OutputBatch {
            workload_id: w.id.parse().unwrap(),
            tenant_id: who.tenant,
            attempt: 1,
            to: end,
            received_at: time::OffsetDateTime::now_utc(),
            lines,
        }
    };
    let (old, new) = (
        datetime!(2025-03-01 10:00 UTC),
        datetime!(2025-03-01 11:00 UTC),
    );
    let first = ship(0, &[("before", old), ("since", new)]);
    env.store.append_output(&first, &caps).await.unwrap();
    let mut stream = env
        .workloads
        .list_workload_logs(who.req(pb::ListWorkloadLogsRequest {
            id: w.id.clone(),
            since: Some(einsora_proto::convert::timestamp(new)),
            follow: true,
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner();
    let texts = |r: &pb::ListWorkloadLogsResponse| -> Vec<String> {
        r.lines.iter().map(|l| l.text.clone()).collect()
    };
    let page = stream.next().await.unwrap().unwrap();
    assert_eq!(texts(&page), ["since"], "only what was printed since");
    let more = ship(first.to, &[("later", new)]);
    env.store.append_output(&more, &caps).await.unwrap();
    let wait = std::time::Duration::from_secs(10);
    let batch = tokio::time::timeout(wait, stream.next()).await.unwrap();
    let batch = batch.unwrap().unwrap();
    assert_eq!(
        (texts(&batch), batch.next_after),
        (vec!["later".to_owned()], 3)
    );

    env.advance(&w.id, &[State::Stopping, State::Stopped], None)
        .await;
    let last = ship(more.to, &[("last words", new)]);
    env.store.append_output(&last, &caps).await.unwrap();
    let batch = tokio::time::timeout(wait, stream.next()).await.unwrap();
    assert_eq!(
        texts(&batch.unwrap().unwrap()),
        ["last words"],
        "lines after the stop"
    );
    let end = tokio::time::timeout(wait, stream.next()).await;
    assert!(
        end.unwrap().is_none(),
        "the stream ends once the workload has stopped"
    );
}

/// A tenant holds at most `FOLLOWS_PER_TENANT` followed logs at once (another tenant is not
/// held back by them); when the api stops, each ends with UNAVAILABLE, for its client to
/// follow again, and their places are given back.
#[tokio::test]
async fn follows_are_bounded_per_tenant_and_end_when_the_api_stops() {
    use einsora_api::workloads::logs::FOLLOWS_PER_TENANT;
    let env = env().await;
    let (acme, globex) = (
        env.tenant("acme", None).await,
        env.tenant("globex", None).await,
    );
    let follow = |who: &crate::Who, id: &str| {
        let request = who.req(pb::ListWorkloadLogsRequest {
            id: id.to_owned(),
            follow: true,
            ..Default::default()
        });
        env.workloads.list_workload_logs(request)
    };
    let mine = env.create(&acme, notebook("a", "cpu-1c-2g")).await.unwrap();
    let theirs = env
        .create(&globex, notebook("g", "cpu-1c-2g"))
        .await
        .unwrap();
    let mut streams = Vec::new();
    for _ in 0..FOLLOWS_PER_TENANT {
        streams.push(follow(&acme, &mine.id).await.unwrap().into_inner());
    }
    let refused = follow(&acme, &mine.id).await.err().expect("one too many");
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    let mut other = follow(&globex, &theirs.id).await.unwrap().into_inner();
    let first = other.next().await.unwrap().unwrap();
    assert!(first.lines.is_empty());

    for stream in &mut streams {
        assert!(stream.next().await.unwrap().is_ok(), "the first page");
    }
    env.shutdown.trigger();
    let wait = std::time::Duration::from_secs(10);
    for stream in streams.iter_mut().chain([&mut other]) {
        let end = tokio::time::timeout(wait, stream.next()).await.unwrap();
        let status = end.expect("a last message").expect_err("the api's stop");
        assert_eq!(status.code(), Code::Unavailable);
        assert!(stream.next().await.is_none());
    }
    // Given back: the tenant may follow again (its answer is still a first page).
    let again = follow(&acme, &mine.id)
        .await
        .unwrap()
        .into_inner()
        .next()
        .await;
    assert!(again.unwrap().is_ok());
}
