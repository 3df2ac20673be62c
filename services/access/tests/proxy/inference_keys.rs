//! Inference keys and limits at the proxy: a key reaches only the endpoints in its scope (any
//! other answers as an unknown one); a key's and a tenant's limits count requests down in the
//! `x-ratelimit-*` headers, tokens when answers end, a day from the usage recorded, and refuse
//! past them with a 429 naming the limit and saying when to retry; a revoked key's stream ends.

use std::time::{Duration, Instant};

use einsora_proto::accounts::v1::InferenceLimits;
use uuid::Uuid;

use crate::engine::{ENGINE, USAGE};
use crate::fakes::ALICE;
use crate::http::{self, Answer, Stream, get};
use crate::{CREDENTIAL_TTL, Harness};

const PUBLIC: &str = "localhost:8090";
const TOKEN: &str = "tsk_aliceSECRET0001";
const KEY: &str = "isk_aliceKEY00000000000000000000000001";
const OTHER_KEY: &str = "isk_aliceKEY00000000000000000000000002";

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

fn limits(rpm: Option<u32>, tpm: Option<u32>, tpd: Option<u32>) -> InferenceLimits {
    InferenceLimits {
        requests_per_minute: rpm,
        tokens_per_minute: tpm,
        tokens_per_day: tpd,
    }
}

async fn models(h: &Harness, id: Uuid, credential: &str) -> Answer {
    let auth = bearer(credential);
    get(
        h.proxy,
        PUBLIC,
        &format!("/e/{id}/v1/models"),
        &[("Authorization", &auth)],
    )
    .await
}

/// A chat completion the test engine answers whole, using [`USAGE`]'s tokens.
async fn chat(h: &Harness, id: Uuid, credential: &str) -> Answer {
    let auth = bearer(credential);
    let body = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
    let length = body.len().to_string();
    let head = http::head(
        "POST",
        &format!("/e/{id}/v1/chat/completions"),
        PUBLIC,
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
            ("Content-Length", &length),
            (ENGINE, "1"),
        ],
    );
    http::send(h.proxy, &head, body).await
}

fn header<'a>(answer: &'a Answer, name: &str) -> &'a str {
    answer
        .header(name)
        .unwrap_or_else(|| panic!("no {name}: {answer:?}"))
}

/// A reset as OpenAI writes it: `340ms`, `12s`, `1m0s`.
fn is_reset(text: &str) -> bool {
    if let Some(ms) = text.strip_suffix("ms") {
        return ms.parse::<u32>().is_ok();
    }
    let Some(rest) = text.strip_suffix('s') else {
        return false;
    };
    rest.split(['h', 'm'])
        .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

#[tokio::test]
async fn a_key_reaches_only_its_endpoints_and_others_answer_as_unknown() {
    let h = Harness::start().await;
    h.api.add_token(TOKEN, ALICE);
    let (a, b) = (h.endpoint(&ALICE), h.endpoint(&ALICE));
    h.api.add_key(KEY, ALICE, &[a], limits(None, None, None));
    h.api
        .add_key(OTHER_KEY, ALICE, &[], limits(None, None, None));

    assert_eq!(models(&h, a, KEY).await.status, 200);
    let outside = models(&h, b, KEY).await;
    let unknown = models(&h, Uuid::now_v7(), KEY).await;
    assert_eq!(outside.status, 404, "{outside:?}");
    assert_eq!(
        outside.body, unknown.body,
        "as unknown as no endpoint at all"
    );
    assert_eq!(outside.json()["error"]["code"], "not_found");
    assert_eq!(h.workload.requests(), 1, "B's engine never asked");
    // A key for all the tenant's endpoints, and an API token, reach both.
    for credential in [OTHER_KEY, TOKEN] {
        for id in [a, b] {
            assert_eq!(models(&h, id, credential).await.status, 200);
        }
    }
    // No limit anywhere: no header.
    assert!(
        models(&h, a, KEY)
            .await
            .header("x-ratelimit-limit-requests")
            .is_none()
    );

    // Refused within the moment the api's answer is reused.
    h.api.revoke_key(KEY);
    let since = Instant::now();
    let revoked = loop {
        let answer = models(&h, a, KEY).await;
        if answer.status != 200 || since.elapsed() > CREDENTIAL_TTL + Duration::from_secs(2) {
            break answer;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(revoked.status, 401, "{revoked:?}");
    assert_eq!(revoked.json()["error"]["code"], "invalid_api_key");
}

#[tokio::test]
async fn a_keys_requests_count_down_and_past_its_limit_are_refused_with_hints() {
    let h = Harness::start().await;
    let id = h.endpoint(&ALICE);
    h.api
        .add_key(KEY, ALICE, &[id], limits(Some(3), None, None));
    for left in ["2", "1", "0"] {
        let answer = models(&h, id, KEY).await;
        assert_eq!(answer.status, 200, "{answer:?}");
        assert_eq!(header(&answer, "x-ratelimit-limit-requests"), "3");
        assert_eq!(header(&answer, "x-ratelimit-remaining-requests"), left);
        let reset = header(&answer, "x-ratelimit-reset-requests");
        assert!(is_reset(reset), "{reset}");
        assert!(
            answer.header("x-ratelimit-limit-tokens").is_none(),
            "no token limit"
        );
    }
    let refused = models(&h, id, KEY).await;
    assert_eq!(refused.status, 429, "{refused:?}");
    let error = &refused.json()["error"];
    assert_eq!(error["type"], "rate_limit_error");
    assert_eq!(error["code"], "rate_limit_exceeded");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("this inference key's limit of 3 requests per minute"),
        "{message}"
    );
    let ms: u64 = header(&refused, "retry-after-ms").parse().unwrap();
    let secs: u64 = header(&refused, "retry-after").parse().unwrap();
    assert!(
        ms > 50_000 && ms <= 60_000,
        "the first request leaves in ~60 s: {ms}"
    );
    assert_eq!(secs, ms.div_ceil(1000));
    assert_eq!(header(&refused, "x-ratelimit-remaining-requests"), "0");
    assert_eq!(
        h.workload.requests(),
        3,
        "the refused one never reached the engine"
    );
    // Another key of the tenant has its own count.
    h.api
        .add_key(OTHER_KEY, ALICE, &[id], limits(Some(3), None, None));
    assert_eq!(models(&h, id, OTHER_KEY).await.status, 200);
}

#[tokio::test]
async fn the_tenants_limit_holds_over_its_keys_and_api_tokens_together() {
    let h = Harness::start().await;
    h.api.add_token(TOKEN, ALICE);
    let id = h.endpoint(&ALICE);
    h.api
        .add_key(KEY, ALICE, &[id], limits(Some(10), None, None));
    h.api.limit_tenant(&ALICE, limits(Some(2), None, None), 0);

    let by_key = models(&h, id, KEY).await;
    // The tighter of the key's (9 left) and the tenant's (1 left).
    assert_eq!(header(&by_key, "x-ratelimit-limit-requests"), "2");
    assert_eq!(header(&by_key, "x-ratelimit-remaining-requests"), "1");
    let by_token = models(&h, id, TOKEN).await;
    assert_eq!(by_token.status, 200);
    assert_eq!(header(&by_token, "x-ratelimit-remaining-requests"), "0");
    for credential in [KEY, TOKEN] {
        let refused = models(&h, id, credential).await;
        assert_eq!(refused.status, 429, "{refused:?}");
        let message = refused.json()["error"]["message"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(
            message.contains("your tenant's limit of 2 requests per minute"),
            "{message}"
        );
    }
}

#[tokio::test]
async fn tokens_count_when_answers_end_and_refuse_the_requests_after() {
    let h = Harness::start().await;
    let id = h.endpoint(&ALICE);
    let used = USAGE.0 + USAGE.1;
    let limit = u32::try_from(used + used / 2).unwrap();
    h.api
        .add_key(KEY, ALICE, &[id], limits(None, Some(limit), None));
    let first = chat(&h, id, KEY).await;
    assert_eq!(first.status, 200, "{first:?}");
    assert_eq!(
        header(&first, "x-ratelimit-limit-tokens"),
        limit.to_string()
    );
    assert_eq!(
        header(&first, "x-ratelimit-remaining-tokens"),
        limit.to_string()
    );
    let second = chat(&h, id, KEY).await;
    assert_eq!(second.status, 200, "{second:?}");
    assert_eq!(
        header(&second, "x-ratelimit-remaining-tokens"),
        (u64::from(limit) - used).to_string(),
        "the first answer's tokens"
    );
    let reset = header(&second, "x-ratelimit-reset-tokens");
    assert!(is_reset(reset), "{reset}");
    let refused = chat(&h, id, KEY).await;
    assert_eq!(refused.status, 429, "{refused:?}");
    let message = refused.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        message.contains(&format!(
            "this inference key's limit of {limit} tokens per minute"
        )),
        "{message}"
    );
    assert_eq!(header(&refused, "x-ratelimit-remaining-tokens"), "0");
}

#[tokio::test]
async fn a_day_counts_on_from_the_usage_recorded_and_waits_for_midnight_utc() {
    let h = Harness::start().await;
    h.api.add_token(TOKEN, ALICE);
    let id = h.endpoint(&ALICE);
    let used = USAGE.0 + USAGE.1;
    h.api
        .limit_tenant(&ALICE, limits(None, None, Some(1000)), 1000 - used);
    let first = chat(&h, id, TOKEN).await;
    assert_eq!(first.status, 200, "{first:?}");
    assert_eq!(
        header(&first, "x-ratelimit-remaining-tokens"),
        used.to_string()
    );
    let refused = chat(&h, id, TOKEN).await;
    assert_eq!(refused.status, 429, "{refused:?}");
    let message = refused.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        message.contains("your tenant's limit of 1000 tokens per day (UTC)"),
        "{message}"
    );
    let ms: u64 = header(&refused, "retry-after-ms").parse().unwrap();
    assert!(ms <= 24 * 3600 * 1000, "by the next midnight UTC: {ms}");
}

#[tokio::test]
async fn a_keys_stream_ends_within_seconds_of_the_key_being_revoked() {
    let h = Harness::start().await;
    let id = h.endpoint(&ALICE);
    h.api
        .add_key(KEY, ALICE, &[id], limits(Some(100), None, None));
    let auth = bearer(KEY);
    let head = http::head(
        "POST",
        &format!("/e/{id}/v1/chat/completions"),
        PUBLIC,
        &[
            ("Authorization", &auth),
            ("x-test-stream", "1"),
            ("Content-Length", "2"),
        ],
    );
    let mut stream = Stream::open_with(h.proxy, &head, "{}").await;
    stream.wait_for("data: tick", 0).await;
    assert!(
        stream.seen.contains("x-ratelimit-remaining-requests: 99"),
        "{}",
        stream.seen
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mark = stream.seen.len();
    stream.wait_for("data: tick", mark).await;
    h.api.revoke_key(KEY);
    let revoked = Instant::now();
    assert!(
        stream.ends_within(Duration::from_secs(5)).await,
        "the stream outlived its key"
    );
    assert!(revoked.elapsed() < Duration::from_secs(5));
}
