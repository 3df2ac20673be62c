use einsora_core::ids::UsageRecordId;
use einsora_core::region::Region;
use einsora_proto::convert::timestamp;
use einsora_proto::usage::v1 as pb;
use einsora_proto::usage::v1::usage_service_server::UsageService;
use einsora_store::UsageRecord;
use time::macros::datetime;
use time::{Duration, OffsetDateTime};
use tonic::Code;

use crate::{Env, Who, assert_code, env, notebook};

async fn record(env: &Env, who: &Who, workload: &str, hour: OffsetDateTime, seconds: u32) {
    let r = UsageRecord {
        id: UsageRecordId::new(),
        tenant_id: who.tenant,
        workload_id: workload.parse().unwrap(),
        region: Region::new("local").unwrap(),
        machine_id: None,
        placed_class: "cpu-1c-2g".into(),
        units: 1,
        hour_start: hour,
        seconds,
    };
    env.store.record_usage(&r).await.unwrap();
}

#[tokio::test]
async fn usage_is_the_callers_tenants_in_the_period() {
    let env = env().await;
    let who = env.tenant("acme", None).await;
    let other = env.tenant("globex", None).await;
    let mine = env.create(&who, notebook("nb", "cpu-1c-2g")).await.unwrap();
    let theirs = env
        .create(&other, notebook("nb", "cpu-1c-2g"))
        .await
        .unwrap();
    let h0 = datetime!(2025-03-01 10:00 UTC);
    for n in 0..4 {
        record(&env, &who, &mine.id, h0 + Duration::hours(n), 3600).await;
    }
    record(&env, &other, &theirs.id, h0 + Duration::hours(1), 3600).await;

    let ask = |from: Option<OffsetDateTime>, to: Option<OffsetDateTime>, size, token: &str| {
        who.req(pb::ListUsageRequest {
            from: from.map(timestamp),
            to: to.map(timestamp),
            page_size: size,
            page_token: token.into(),
        })
    };
    let (from, to) = (Some(h0 + Duration::hours(1)), Some(h0 + Duration::hours(3)));
    let got = env
        .usage
        .list_usage(ask(from, to, 0, ""))
        .await
        .unwrap()
        .into_inner();
    let hours: Vec<_> = got
        .records
        .iter()
        .map(|r| r.hour_start.unwrap().seconds)
        .collect();
    let expect = |n: i64| (h0 + Duration::hours(n)).unix_timestamp();
    assert_eq!(
        hours,
        [expect(1), expect(2)],
        "[from, to), this tenant's only"
    );
    assert!(
        got.records
            .iter()
            .all(|r| r.tenant_id == who.tenant.to_string())
    );

    let first = env
        .usage
        .list_usage(ask(from, to, 1, ""))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(first.records.len(), 1);
    let token = first.next_page_token;
    let rest = env
        .usage
        .list_usage(ask(from, to, 1, &token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(rest.records[0].hour_start.unwrap().seconds, expect(2));
    assert_eq!(rest.next_page_token, "");

    for (bad_from, bad_to, field) in [(None, to, "from"), (from, None, "to"), (to, from, "to")] {
        let status = assert_code(
            env.usage.list_usage(ask(bad_from, bad_to, 0, "")).await,
            Code::InvalidArgument,
        );
        assert!(status.message().starts_with(field), "{}", status.message());
    }
}
