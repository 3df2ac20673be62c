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
            ..Default::default()
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

#[tokio::test]
async fn a_report_sums_the_period_by_user_team_or_class_and_a_member_sees_their_own() {
    let env = env().await;
    let owner = env.tenant("acme", None).await;
    let member = env
        .user(
            owner.tenant,
            "member@acme.example",
            einsora_core::role::Role::Member,
        )
        .await;
    let other = env.tenant("globex", None).await;
    let ours = env
        .create(&owner, notebook("nb", "cpu-1c-2g"))
        .await
        .unwrap();
    let mine = env
        .create(&member, notebook("mine", "cpu-1c-2g"))
        .await
        .unwrap();
    let theirs = env
        .create(&other, notebook("nb", "cpu-1c-2g"))
        .await
        .unwrap();
    let h0 = datetime!(2025-03-01 10:00 UTC);
    record(&env, &owner, &ours.id, h0, 3600).await;
    record(&env, &owner, &ours.id, h0 + Duration::hours(1), 1800).await;
    record(&env, &member, &mine.id, h0 + Duration::hours(1), 600).await;
    record(&env, &owner, &ours.id, h0 + Duration::hours(2), 3600).await;
    record(&env, &other, &theirs.id, h0, 3600).await;

    let ask = |who: &crate::Who, by: &str| {
        who.req(pb::GetUsageReportRequest {
            from: Some(timestamp(h0)),
            to: Some(timestamp(h0 + Duration::hours(2))),
            by: by.into(),
        })
    };
    let rows = |r: pb::GetUsageReportResponse| -> Vec<_> {
        r.rows
            .into_iter()
            .map(|r| {
                (
                    r.group_id,
                    r.label,
                    r.placed_class,
                    r.workloads,
                    r.seconds,
                    r.unit_hours,
                )
            })
            .collect()
    };
    let report = env
        .usage
        .get_usage_report(ask(&owner, "user"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(report.by, "user");
    let cpu = || "cpu-1c-2g".to_owned();
    assert_eq!(
        rows(report),
        [
            (
                member.user.to_string(),
                "member@acme.example".to_owned(),
                cpu(),
                1,
                600,
                "0.1667".to_owned()
            ),
            (
                owner.user.to_string(),
                "you@acme.example".to_owned(),
                cpu(),
                1,
                5400,
                "1.5000".to_owned()
            ),
        ],
        "the whole tenant for its owner, by e-mail, [from, to)"
    );
    let by_class = env
        .usage
        .get_usage_report(ask(&owner, "class"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        rows(by_class),
        [(cpu(), cpu(), cpu(), 2, 6000, "1.6667".to_owned())]
    );

    // A member's report: their own workloads' only, whatever it is by.
    for by in ["user", "class"] {
        let theirs = env
            .usage
            .get_usage_report(ask(&member, by))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(theirs.rows.len(), 1, "{by}");
        assert_eq!(theirs.rows[0].seconds, 600, "{by}");
        assert_eq!(theirs.rows[0].unit_seconds, 600, "{by}");
    }

    // By the team the owner is in now; the member is in none.
    let research = einsora_core::ids::TeamId::new();
    env.store
        .create_team(owner.tenant, research, "research")
        .await
        .unwrap();
    env.store
        .set_user_team(owner.tenant, owner.user, Some(research))
        .await
        .unwrap();
    let by_team = env
        .usage
        .get_usage_report(ask(&owner, "team"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        rows(by_team),
        [
            (
                research.to_string(),
                "research".to_owned(),
                cpu(),
                1,
                5400,
                "1.5000".to_owned()
            ),
            (
                String::new(),
                String::new(),
                cpu(),
                1,
                600,
                "0.1667".to_owned()
            ),
        ],
        "a team's row by its name; no team's last, without ID or label"
    );

    for (by, says) in [
        ("money", "by is not valid: user, team or class"),
        ("", "by is missing: user, team or class"),
    ] {
        let status = assert_code(
            env.usage.get_usage_report(ask(&owner, by)).await,
            Code::InvalidArgument,
        );
        assert_eq!(status.message(), says);
    }
    let backwards = owner.req(pb::GetUsageReportRequest {
        from: Some(timestamp(h0 + Duration::hours(2))),
        to: Some(timestamp(h0)),
        by: "class".into(),
    });
    let status = assert_code(
        env.usage.get_usage_report(backwards).await,
        Code::InvalidArgument,
    );
    assert!(status.message().starts_with("to"), "{}", status.message());
}

/// Token counts as the access proxy sends them: `(hour, endpoint, key, user, prompt, completion)`.
async fn tokens(env: &Env, tenant: &Who, counts: &[(OffsetDateTime, &str, &str, &Who, u64, u64)]) {
    use einsora_proto::internal::v1 as internal;
    let batch = internal::RecordTokenUsageRequest {
        batch_id: uuid::Uuid::now_v7().to_string(),
        counts: counts
            .iter()
            .map(
                |(hour, endpoint, key, who, prompt, completion)| internal::TokenCount {
                    tenant_id: tenant.tenant.to_string(),
                    endpoint_id: (*endpoint).into(),
                    key_id: (*key).into(),
                    user_id: who.user.to_string(),
                    hour_start: Some(timestamp(*hour)),
                    requests: 1,
                    prompt_tokens: *prompt,
                    completion_tokens: *completion,
                },
            )
            .collect(),
    };
    assert!(
        einsora_api::token_usage::record(&*env.store, batch)
            .await
            .unwrap()
    );
}

#[tokio::test]
async fn tokens_are_listed_per_hour_or_summed_and_a_member_sees_their_own() {
    let env = env().await;
    let owner = env.tenant("acme", None).await;
    let member = env
        .user(
            owner.tenant,
            "member@acme.example",
            einsora_core::role::Role::Member,
        )
        .await;
    let other = env.tenant("globex", None).await;
    let endpoint = uuid::Uuid::now_v7().to_string();
    let key = einsora_core::ids::InferenceKeyId::new().to_string();
    let h0 = datetime!(2025-03-01 10:00 UTC);
    let h1 = h0 + Duration::hours(1);
    tokens(
        &env,
        &owner,
        &[
            (h0, &endpoint, "", &owner, 10, 5),
            (h1, &endpoint, "", &owner, 20, 6),
            (h1, &endpoint, &key, &member, 100, 50),
        ],
    )
    .await;
    tokens(&env, &other, &[(h0, &endpoint, "", &other, 999, 999)]).await;

    let ask = |who: &Who, tokens: &str, size: u32, token: &str| {
        who.req(pb::ListUsageRequest {
            from: Some(timestamp(h0)),
            to: Some(timestamp(h0 + Duration::hours(2))),
            page_size: size,
            page_token: token.into(),
            tokens: tokens.into(),
        })
    };
    let list = |request| async { env.usage.list_usage(request).await.unwrap().into_inner() };
    let row = |t: &pb::TokenUsage| {
        (
            t.hour_start.map(|h| h.seconds),
            t.key_id.clone(),
            t.user_id.clone(),
            t.requests,
            t.prompt_tokens,
            t.completion_tokens,
        )
    };
    let hourly = list(ask(&owner, "hour", 0, "")).await;
    assert!(hourly.records.is_empty(), "tokens in place of records");
    let mut rows: Vec<_> = hourly.tokens.iter().map(row).collect();
    rows.sort();
    let (s0, s1) = (Some(h0.unix_timestamp()), Some(h1.unix_timestamp()));
    let (o, m) = (owner.user.to_string(), member.user.to_string());
    assert_eq!(
        rows,
        [
            (s0, String::new(), o.clone(), 1, 10, 5),
            (s1, String::new(), o.clone(), 1, 20, 6),
            (s1, key.clone(), m.clone(), 1, 100, 50),
        ],
        "the whole tenant's, its own only, per hour"
    );
    assert!(
        hourly
            .tokens
            .iter()
            .all(|t| t.endpoint_id == endpoint && t.tenant_id == owner.tenant.to_string())
    );

    // Paged as records are.
    let first = list(ask(&owner, "hour", 2, "")).await;
    assert_eq!(first.tokens.len(), 2);
    let rest = list(ask(&owner, "hour", 2, &first.next_page_token)).await;
    assert_eq!(rest.tokens.len(), 1);
    assert_eq!(rest.next_page_token, "");
    let mut paged: Vec<_> = first.tokens.iter().chain(&rest.tokens).map(row).collect();
    paged.sort();
    assert_eq!(paged, rows);

    let mut summed: Vec<_> = list(ask(&owner, "range", 0, ""))
        .await
        .tokens
        .iter()
        .map(row)
        .collect();
    summed.sort();
    assert_eq!(
        summed,
        [
            (None, String::new(), o.clone(), 2, 30, 11),
            (None, key.clone(), m.clone(), 1, 100, 50),
        ]
    );
    let status = assert_code(
        env.usage.list_usage(ask(&owner, "range", 1, "")).await,
        Code::InvalidArgument,
    );
    assert!(
        status.message().contains("tokens=hour"),
        "{}",
        status.message()
    );

    // A member: their own tokens only.
    for tokens in ["hour", "range"] {
        let theirs = list(ask(&member, tokens, 0, "")).await;
        assert_eq!(theirs.tokens.len(), 1, "{tokens}");
        assert_eq!(theirs.tokens[0].user_id, m, "{tokens}");
    }

    let status = assert_code(
        env.usage.list_usage(ask(&owner, "day", 0, "")).await,
        Code::InvalidArgument,
    );
    assert!(
        status.message().starts_with("tokens"),
        "{}",
        status.message()
    );
}
