//! Endpoints at `<public URL>/e/<id>/v1`: API tokens on every request, never cookies; the same
//! 404 for another tenant's and for no endpoint; the worker's own key; placement headers; and
//! streams that end once their token is revoked.

use std::time::{Duration, Instant};

use einsora_runtime::shutdown::Shutdown;
use uuid::Uuid;

use crate::fakes::{ALICE, BOB};
use crate::http::{self, Stream, get};
use crate::workload::Workload;
use crate::{CREDENTIAL_TTL, Harness, WORKER_KEY, cookie};

const PUBLIC: &str = "localhost:8090";
const ALICE_TOKEN: &str = "tsk_aliceSECRET0001";
const BOB_TOKEN: &str = "tsk_bobSECRET0002";

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

async fn models(h: &Harness, id: Uuid, headers: &[(&str, &str)]) -> http::Answer {
    get(h.proxy, PUBLIC, &format!("/e/{id}/v1/models"), headers).await
}

#[tokio::test]
async fn every_request_needs_a_valid_api_token_and_cookies_never_count() {
    let h = Harness::start().await;
    h.api.add_token(ALICE_TOKEN, ALICE);
    let id = h.endpoint(&ALICE);
    let notebook = h.notebook(&ALICE);
    let session = cookie(&h.open(notebook, &ALICE).await);
    let alice = bearer(ALICE_TOKEN);
    let refused: [&[(&str, &str)]; 6] = [
        &[],
        &[("Authorization", "Bearer tsk_unknown")],
        &[("Authorization", "Basic dXNlcjpwdw==")],
        &[("Authorization", "Bearer ")],
        &[("Cookie", &session)],
        &[("Authorization", &alice), ("Authorization", &alice)],
    ];
    for headers in refused {
        let answer = models(&h, id, headers).await;
        assert_eq!(answer.status, 401, "{headers:?}: {answer:?}");
        // OpenAI's shape, which its SDKs parse; the request ID is a header only.
        assert_eq!(answer.openai_error_code(), "invalid_api_key");
        assert_eq!(answer.json()["error"]["type"], "authentication_error");
    }
    assert_eq!(h.workload.requests(), 0);

    let checks = || {
        h.api
            .authentications
            .load(std::sync::atomic::Ordering::SeqCst)
    };
    // A refused credential is asked of the api every time.
    let before = checks();
    for _ in 0..2 {
        let unknown = [("Authorization", "Bearer tsk_unknown")];
        assert_eq!(models(&h, id, &unknown).await.status, 401);
    }
    assert_eq!(checks(), before + 2, "a refusal is never kept");

    // An accepted one: the api's answer serves the requests of the next moment, and is asked
    // again after it.
    let answer = models(&h, id, &[("Authorization", &alice)]).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let first = checks();
    assert_eq!(
        models(&h, id, &[("Authorization", &alice)]).await.status,
        200
    );
    assert_eq!(checks(), first, "asked again within its moment");
    tokio::time::sleep(CREDENTIAL_TTL).await;
    assert_eq!(
        models(&h, id, &[("Authorization", &alice)]).await.status,
        200
    );
    assert_eq!(checks(), first + 1, "not asked again after its moment");

    // Revoked: refused within the moment.
    h.api.revoke_token(ALICE_TOKEN);
    let revoked = Instant::now();
    let mut served = 3;
    loop {
        let answer = models(&h, id, &[("Authorization", &alice)]).await;
        if answer.status == 401 {
            break;
        }
        assert_eq!(answer.status, 200, "{answer:?}");
        served += 1;
        assert!(revoked.elapsed() < CREDENTIAL_TTL + Duration::from_secs(2));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(h.workload.requests(), served);
}

#[tokio::test]
async fn another_tenants_endpoint_and_no_endpoint_answer_the_same_404() {
    let h = Harness::start().await;
    h.api.add_token(ALICE_TOKEN, ALICE);
    h.api.add_token(BOB_TOKEN, BOB);
    let bobs = h.endpoint(&BOB);
    let alices_notebook = h.notebook(&ALICE);
    let alice = bearer(ALICE_TOKEN);
    let auth = [("Authorization", alice.as_str())];
    let mut bodies = Vec::new();
    for id in [bobs, Uuid::now_v7(), alices_notebook] {
        let answer = models(&h, id, &auth).await;
        assert_eq!(answer.status, 404, "{answer:?}");
        assert_eq!(answer.openai_error_code(), "not_found");
        bodies.push(answer.json()["error"]["message"].clone());
    }
    assert!(bodies.windows(2).all(|w| w[0] == w[1]), "{bodies:?}");

    let alices = h.endpoint(&ALICE);
    let upper = alices.to_string().to_uppercase();
    for path in [
        format!("/e/{alices}/v1/embeddings/x"),
        format!("/e/{alices}/health"),
        format!("/e/{alices}/v1/models/"),
        format!("/e/{upper}/v1/models"),
        format!("/e/{alices}"),
        // The one base URL's routes only (`one_base.rs`).
        "/v1/models/".to_owned(),
        "/v1/health".to_owned(),
        "/".to_owned(),
    ] {
        let answer = get(h.proxy, PUBLIC, &path, &auth).await;
        assert_eq!(answer.status, 404, "{path}: {answer:?}");
    }
    // Endpoints are at the public host only.
    let at_notebook_host = get(
        h.proxy,
        &crate::host(alices),
        &format!("/e/{alices}/v1/models"),
        &auth,
    )
    .await;
    assert_ne!(at_notebook_host.status, 200, "{at_notebook_host:?}");
    assert_eq!(h.workload.requests(), 0);

    let bob = bearer(BOB_TOKEN);
    assert_eq!(
        models(&h, bobs, &[("Authorization", &bob)]).await.status,
        200
    );
}

#[tokio::test]
async fn the_worker_gets_its_own_key_and_answers_say_where_they_ran() {
    let h = Harness::start().await;
    h.api.add_token(ALICE_TOKEN, ALICE);
    let id = h.endpoint(&ALICE);
    let alice = bearer(ALICE_TOKEN);
    let head = http::head(
        "POST",
        &format!("/e/{id}/v1/chat/completions?x=1"),
        PUBLIC,
        &[
            ("Authorization", &alice),
            ("Cookie", "einsora_access=abc; other=1"),
            ("Content-Type", "application/json"),
        ],
    );
    let body = r#"{"model":"m","messages":[]}"#;
    let answer = http::send(h.proxy, &head, body).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let echo = answer.json();
    assert_eq!(echo["uri"], "/v1/chat/completions?x=1");
    // The request as sent, with the token bound the proxy adds when it names none.
    let sent: serde_json::Value = serde_json::from_str(echo["body"].as_str().unwrap()).unwrap();
    assert_eq!(sent["model"], "m");
    assert_eq!(sent["max_tokens"], 4096);
    assert_eq!(
        http::echoed(&answer, "authorization"),
        [format!("Bearer {WORKER_KEY}")]
    );
    assert!(http::echoed(&answer, "cookie").is_empty());
    assert_eq!(http::echoed(&answer, "host"), ["localhost"]);
    let request_id = answer.header("x-request-id").unwrap();
    assert_eq!(http::echoed(&answer, "x-request-id"), [request_id]);
    assert_eq!(answer.header("x-einsora-region"), Some("local"));
    assert_eq!(answer.header("x-einsora-class"), Some("cpu-small"));
    assert_eq!(answer.header("x-einsora-fallback"), Some("false"));
    assert!(answer.all("set-cookie").is_empty(), "{answer:?}");

    h.controller.change(&id.to_string(), |t| {
        t.placed_class = "cpu-large".into();
        t.gpu_class = "nvidia-a100".into();
    });
    let answer = models(&h, id, &[("Authorization", &alice)]).await;
    assert_eq!(answer.header("x-einsora-class"), Some("cpu-large"));
    assert_eq!(answer.header("x-einsora-fallback"), Some("true"));
    let completions = get(
        h.proxy,
        PUBLIC,
        &format!("/e/{id}/v1/completions"),
        &[("Authorization", &alice)],
    )
    .await;
    assert_eq!(completions.json()["uri"], "/v1/completions");
}

#[tokio::test]
async fn a_stream_ends_within_seconds_of_its_token_being_revoked() {
    let h = Harness::start().await;
    h.api.add_token(ALICE_TOKEN, ALICE);
    let id = h.endpoint(&ALICE);
    let alice = bearer(ALICE_TOKEN);
    let head = http::head(
        "POST",
        &format!("/e/{id}/v1/chat/completions"),
        PUBLIC,
        &[
            ("Authorization", &alice),
            ("x-test-stream", "1"),
            ("Content-Length", "2"),
        ],
    );
    // A generation request's body: a JSON object.
    let mut stream = Stream::open_with(h.proxy, &head, "{}").await;
    stream.wait_for("data: tick", 0).await;
    assert!(stream.seen.starts_with("HTTP/1.1 200"), "{}", stream.seen);
    assert!(
        stream.seen.contains("x-einsora-region: local"),
        "{}",
        stream.seen
    );
    // A valid token keeps the stream going past several checks.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mark = stream.seen.len();
    stream.wait_for("data: tick", mark).await;

    h.api.revoke_token(ALICE_TOKEN);
    let revoked = Instant::now();
    assert!(
        stream.ends_within(Duration::from_secs(5)).await,
        "the stream outlived its token"
    );
    assert!(revoked.elapsed() < Duration::from_secs(5));
}

/// Over a limit, a request is refused before it reaches the worker, naming the limit.
#[tokio::test]
async fn requests_over_the_limits_never_reach_the_worker() {
    let h = Harness::start().await;
    h.api.add_token(ALICE_TOKEN, ALICE);
    let id = h.endpoint(&ALICE);
    let alice = bearer(ALICE_TOKEN);
    let post = |body: &str| {
        let length = body.len().to_string();
        let head = http::head(
            "POST",
            &format!("/e/{id}/v1/completions"),
            PUBLIC,
            &[
                ("Authorization", &alice),
                ("Content-Type", "application/json"),
                ("Content-Length", &length),
            ],
        );
        (head, body.to_owned())
    };
    for (body, status, names) in [
        (
            r#"{"max_tokens":100000}"#.to_owned(),
            400,
            "EINSORA_ENDPOINT_MAX_TOKENS",
        ),
        ("not json".to_owned(), 400, "JSON object"),
        (
            format!(r#"{{"prompt":"{}"}}"#, "x".repeat(1 << 20)),
            413,
            "EINSORA_ENDPOINT_MAX_BODY_BYTES",
        ),
    ] {
        let (head, body) = post(&body);
        let answer = http::send(h.proxy, &head, &body).await;
        assert_eq!(answer.status, status, "{answer:?}");
        assert!(answer.body.contains(names), "{answer:?}");
    }
    assert_eq!(h.workload.requests(), 0, "nothing reached the worker");
}

/// A workload's target is reused for a moment (one controller call for a burst of requests),
/// and forgotten as soon as its socket refuses a connection: its server stopped (closing the
/// connection the proxy kept) and its socket is gone.
#[tokio::test]
async fn targets_are_reused_briefly_and_forgotten_when_their_socket_refuses() {
    let h = Harness::with("http://localhost:8090", Duration::from_secs(30)).await;
    h.api.add_token(ALICE_TOKEN, ALICE);
    let id = h.endpoint(&ALICE);
    let stopped = Shutdown::new();
    let socket = h.workload.socket.with_file_name("stopping.sock");
    let workload = Workload::start(&socket, &stopped).await;
    h.controller.change(&id.to_string(), |t| {
        t.socket_path = workload.socket().to_owned()
    });
    let alice = bearer(ALICE_TOKEN);
    for _ in 0..5 {
        let answer = models(&h, id, &[("Authorization", &alice)]).await;
        assert_eq!(answer.status, 200, "{answer:?}");
    }
    let resolved = || {
        h.controller
            .resolutions
            .load(std::sync::atomic::Ordering::SeqCst)
    };
    assert_eq!(resolved(), 1, "five requests, one lookup");
    stopped.trigger();
    std::fs::remove_file(&socket).unwrap();
    // Time for the closed connection to be seen closed.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let refused = models(&h, id, &[("Authorization", &alice)]).await;
    assert_eq!(refused.status, 503, "{refused:?}");
    let again = models(&h, id, &[("Authorization", &alice)]).await;
    assert_eq!(again.status, 503, "{again:?}");
    assert_eq!(resolved(), 2, "the refused target was looked up again");
}
