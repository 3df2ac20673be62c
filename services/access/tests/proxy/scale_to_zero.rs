//! Scale-to-zero at the proxy: a request to an endpoint parked after its idle time wakes it
//! (one wake for the requests arriving meanwhile, asked for the caller), is held until it is
//! ready and then served; a stream hears SSE comments while it waits; a wake longer than the
//! proxy holds a request ends in a 503 with Retry-After; a stopped endpoint that doesn't park
//! is not woken. Endpoints used are reported to the controller.

use std::time::Duration;

use uuid::Uuid;

use crate::Harness;
use crate::fakes::ALICE;
use crate::http::{self, Stream};

const PUBLIC: &str = "localhost:8090";
const ALICE_TOKEN: &str = "tsk_aliceSECRET0001";
const BODY: &str = r#"{"model":"m","messages":[]}"#;
const STREAM_BODY: &str = r#"{"model":"m","messages":[],"stream":true}"#;

fn bearer_of(token: &str) -> String {
    format!("Bearer {token}")
}

fn chat_head(id: Uuid, auth: &str, body: &str) -> String {
    let path = format!("/e/{id}/v1/chat/completions");
    let length = body.len().to_string();
    let headers = [
        ("Authorization", auth),
        ("Content-Type", "application/json"),
        ("Content-Length", length.as_str()),
    ];
    http::head("POST", &path, PUBLIC, &headers)
}

async fn chat(h: &Harness, id: Uuid, auth: &str) -> http::Answer {
    let path = format!("/e/{id}/v1/chat/completions");
    let headers = [
        ("Authorization", auth),
        ("Content-Type", "application/json"),
    ];
    http::send(h.proxy, &http::head("POST", &path, PUBLIC, &headers), BODY).await
}

fn wakes(h: &Harness) -> usize {
    h.api.wakes.lock().unwrap().len()
}

#[tokio::test]
async fn a_request_to_a_parked_endpoint_wakes_it_once_and_is_served_when_it_is_up() {
    let h = Harness::start().await;
    h.api.add_token(ALICE_TOKEN, ALICE);
    let id = h.endpoint(&ALICE);
    h.controller.park(&id.to_string());
    *h.controller.wake_takes.lock().unwrap() = Duration::from_millis(1500);
    let alice = bearer_of(ALICE_TOKEN);
    let answers = futures::future::join_all((0..3).map(|_| chat(&h, id, &alice))).await;
    for answer in &answers {
        assert_eq!(answer.status, 200, "{answer:?}");
        assert_eq!(answer.json()["uri"], "/v1/chat/completions");
    }
    // One wake for all three, asked for the caller (an API token: no key).
    let asked = h.api.wakes.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0].endpoint_id, id.to_string());
    assert_eq!(asked[0].user_id, ALICE.user);
    assert_eq!(asked[0].tenant_id, ALICE.tenant);
    assert_eq!(asked[0].key_id, "");
    assert_eq!(h.workload.requests(), 3);
}

#[tokio::test]
async fn an_inference_keys_wake_names_the_key() {
    let h = Harness::start().await;
    let id = h.endpoint(&ALICE);
    h.api
        .add_key("isk_aliceKEY0001", ALICE, &[], Default::default());
    h.controller.park(&id.to_string());
    let answer = chat(&h, id, &bearer_of("isk_aliceKEY0001")).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let asked = h.api.wakes.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].key_id, "id-of-isk_aliceKEY0001");
}

#[tokio::test]
async fn a_held_stream_gets_its_200_and_comments_while_it_waits() {
    let h = Harness::start().await;
    h.api.add_token(ALICE_TOKEN, ALICE);
    let id = h.endpoint(&ALICE);
    h.controller.park(&id.to_string());
    *h.controller.wake_takes.lock().unwrap() = Duration::from_secs(4);
    let alice = bearer_of(ALICE_TOKEN);
    let mut stream =
        Stream::open_with(h.proxy, &chat_head(id, &alice, STREAM_BODY), STREAM_BODY).await;
    stream.wait_for("HTTP/1.1 200", 0).await;
    stream.wait_for("text/event-stream", 0).await;
    stream.wait_for(": waking the endpoint\n\n", 0).await;
    // Nothing reached the engine yet; then its answer follows the comments.
    assert_eq!(h.workload.requests(), 0);
    stream.wait_for("/v1/chat/completions", 0).await;
    assert_eq!(h.workload.requests(), 1);
    assert_eq!(wakes(&h), 1);
}

#[tokio::test]
async fn a_wake_longer_than_the_hold_is_a_503_with_a_hint() {
    let limits = einsora_access::limits::Limits {
        wake_wait: Duration::from_secs(1),
        ..Default::default()
    };
    let h = Harness::with_limits(limits).await;
    h.api.add_token(ALICE_TOKEN, ALICE);
    let id = h.endpoint(&ALICE);
    h.controller.park(&id.to_string());
    *h.controller.wake_takes.lock().unwrap() = Duration::from_secs(60);
    let answer = chat(&h, id, &bearer_of(ALICE_TOKEN)).await;
    assert_eq!(answer.status, 503, "{answer:?}");
    assert!(answer.header("retry-after").is_some(), "{answer:?}");
    assert!(answer.header("retry-after-ms").is_some(), "{answer:?}");
    assert_eq!(answer.json()["error"]["type"], "overloaded_error");
    assert_eq!(h.workload.requests(), 0);
    // A held stream past the bound: its 200 was sent, so it ends with an error event.
    h.controller.park(&id.to_string());
    let alice = bearer_of(ALICE_TOKEN);
    let mut stream =
        Stream::open_with(h.proxy, &chat_head(id, &alice, STREAM_BODY), STREAM_BODY).await;
    stream.wait_for("HTTP/1.1 200", 0).await;
    stream.wait_for("data: {\"error\"", 0).await;
    let ended = stream.seen.ends_with("\r\n0\r\n\r\n");
    assert!(ended || stream.ends_within(Duration::from_secs(5)).await);
}

#[tokio::test]
async fn a_stopped_endpoint_that_doesnt_park_is_not_woken() {
    let h = Harness::start().await;
    h.api.add_token(ALICE_TOKEN, ALICE);
    let id = h.endpoint(&ALICE);
    h.controller.stop(&id.to_string());
    let answer = chat(&h, id, &bearer_of(ALICE_TOKEN)).await;
    assert_eq!(answer.status, 404, "{answer:?}");
    assert_eq!(wakes(&h), 0);
}

#[tokio::test]
async fn endpoints_used_are_reported_to_the_controller() {
    let h = Harness::start().await;
    h.api.add_token(ALICE_TOKEN, ALICE);
    let id = h.endpoint(&ALICE);
    let idle = h.endpoint(&ALICE);
    assert_eq!(chat(&h, id, &bearer_of(ALICE_TOKEN)).await.status, 200);
    let reported = async {
        loop {
            if h.controller
                .touched
                .lock()
                .unwrap()
                .contains(&id.to_string())
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(5), reported)
        .await
        .expect("the endpoint is reported used");
    assert!(
        !h.controller
            .touched
            .lock()
            .unwrap()
            .contains(&idle.to_string())
    );
}

/// A request still in flight keeps its endpoint reported used, report after report: a long
/// answer is never idle.
#[tokio::test]
async fn an_endpoint_with_a_request_in_flight_is_reported_used_every_time() {
    let h = Harness::start().await;
    h.api.add_token(ALICE_TOKEN, ALICE);
    let id = h.endpoint(&ALICE);
    let alice = bearer_of(ALICE_TOKEN);
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
    let mut stream = Stream::open_with(h.proxy, &head, "{}").await;
    stream.wait_for("data: tick", 0).await;
    for _ in 0..3 {
        // Reports every 100 ms: emptied, and named again while the answer streams.
        tokio::time::sleep(Duration::from_millis(150)).await;
        h.controller.touched.lock().unwrap().clear();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let touched = h.controller.touched.lock().unwrap().clone();
        assert!(touched.contains(&id.to_string()), "{touched:?}");
    }
    drop(stream);
}

/// Through the one base URL: a name whose only endpoint is parked wakes it, and the request is
/// served by it once it is up.
#[tokio::test]
async fn the_one_base_url_wakes_a_parked_endpoint_of_the_name() {
    let h = Harness::start().await;
    h.api.add_token(ALICE_TOKEN, ALICE);
    let id = h.endpoint(&ALICE);
    h.controller.serve_as(&id.to_string(), "tiny", false);
    h.controller.park(&id.to_string());
    *h.controller.wake_takes.lock().unwrap() = Duration::from_millis(800);
    let alice = bearer_of(ALICE_TOKEN);
    let headers = [
        ("Authorization", alice.as_str()),
        ("Content-Type", "application/json"),
    ];
    let head = http::head("POST", "/v1/chat/completions", PUBLIC, &headers);
    let answer = http::send(h.proxy, &head, r#"{"model":"tiny","messages":[]}"#).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(wakes(&h), 1);
    assert_eq!(h.workload.requests(), 1);
}
