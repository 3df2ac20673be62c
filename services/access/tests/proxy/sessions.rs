//! Requests at a notebook's origin once it is open: what Jupyter receives, cross-origin
//! refusals, WebSockets, and sessions ending with their attempt.

use tokio::io::AsyncWriteExt;
use uuid::Uuid;

use crate::fakes::ALICE;
use crate::http::{self, Stream, get};
use crate::{Harness, NOTEBOOK_TOKEN, cookie, host, origin};

#[tokio::test]
async fn jupyter_gets_its_token_a_local_host_and_origin_and_never_the_proxys_cookie() {
    let h = Harness::start().await;
    let id = h.notebook(&ALICE);
    let session = h.open(id, &ALICE).await;
    let cookies = format!("a=1; {}; b=2", cookie(&session));
    let head = http::head(
        "POST",
        "/api/contents?type=notebook",
        &host(id),
        &[
            ("Cookie", &cookies),
            ("Origin", &origin(id)),
            ("Sec-Fetch-Site", "same-origin"),
            ("Authorization", "Bearer not-the-workloads"),
            ("Content-Type", "application/json"),
        ],
    );
    let answer = http::send(h.proxy, &head, r#"{"type":"notebook"}"#).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        http::echoed(&answer, "authorization"),
        [format!("token {NOTEBOOK_TOKEN}")]
    );
    assert_eq!(http::echoed(&answer, "host"), ["localhost"]);
    assert_eq!(http::echoed(&answer, "origin"), ["http://localhost"]);
    assert_eq!(http::echoed(&answer, "cookie"), ["a=1; b=2"]);
    let echo = answer.json();
    assert_eq!(echo["method"], "POST");
    assert_eq!(echo["uri"], "/api/contents?type=notebook");
    assert_eq!(echo["body"], r#"{"type":"notebook"}"#);
    // The workload's attempt to set the proxy's cookie never reaches the browser.
    assert_eq!(answer.all("set-cookie"), ["_xsrf=kept; Path=/"]);
    assert!(answer.header("x-request-id").is_some());
    assert!(!answer.body.contains(&session));

    // Only the proxy's cookie: no Cookie header at all reaches Jupyter.
    let only = get(h.proxy, &host(id), "/", &[("Cookie", &cookie(&session))]).await;
    assert!(http::echoed(&only, "cookie").is_empty(), "{only:?}");
    assert!(http::echoed(&only, "origin").is_empty());
}

#[tokio::test]
async fn requests_a_browser_marks_as_from_another_origin_are_refused() {
    let h = Harness::start().await;
    let id = h.notebook(&ALICE);
    let session = cookie(&h.open(id, &ALICE).await);
    let other = origin(Uuid::now_v7());
    let wrong_port = format!("http://w-{id}.localhost:8091");
    let https = format!("https://w-{id}.localhost:8090");
    let refused: [&[(&str, &str)]; 8] = [
        &[("Sec-Fetch-Site", "cross-site")],
        &[("Sec-Fetch-Site", "same-site")],
        &[("Origin", "http://evil.com")],
        &[("Origin", "http://localhost:8090")],
        &[("Origin", &other)],
        &[("Origin", &wrong_port)],
        &[("Origin", &https)],
        &[("Origin", "null")],
    ];
    for extra in refused {
        let mut headers = vec![("Cookie", session.as_str())];
        headers.extend_from_slice(extra);
        let answer = http::send(
            h.proxy,
            &http::head("POST", "/api/kernels", &host(id), &headers),
            "{}",
        )
        .await;
        assert_eq!(answer.status, 403, "{extra:?}: {answer:?}");
        assert_eq!(answer.error_code(), "forbidden");
    }
    assert_eq!(h.workload.requests(), 0);
    let own = origin(id);
    let passed: [&[(&str, &str)]; 4] = [
        &[("Sec-Fetch-Site", "same-origin"), ("Origin", &own)],
        &[("Sec-Fetch-Site", "none")],
        &[("Origin", &own)],
        &[],
    ];
    for extra in passed {
        let mut headers = vec![("Cookie", session.as_str())];
        headers.extend_from_slice(extra);
        let answer = http::send(
            h.proxy,
            &http::head("POST", "/api/kernels", &host(id), &headers),
            "{}",
        )
        .await;
        assert_eq!(answer.status, 200, "{extra:?}: {answer:?}");
    }
    assert_eq!(h.workload.requests(), 4);
}

pub fn websocket_head(id: Uuid, extra: &[(&str, &str)]) -> String {
    let mut headers = vec![
        ("Upgrade", "websocket"),
        ("Connection", "Upgrade"),
        ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ("Sec-WebSocket-Version", "13"),
    ];
    headers.extend_from_slice(extra);
    http::head("GET", "/api/kernels/k1/channels", &host(id), &headers)
}

#[tokio::test]
async fn websockets_need_the_session_and_are_relayed_with_it() {
    let h = Harness::start().await;
    let id = h.notebook(&ALICE);
    let session = cookie(&h.open(id, &ALICE).await);
    let own = origin(id);

    let without = http::send(h.proxy, &websocket_head(id, &[("Origin", &own)]), "").await;
    assert_eq!(without.status, 401, "{without:?}");
    assert_eq!(without.error_code(), "unauthenticated");
    let other_origin = [("Origin", "http://evil.com"), ("Cookie", session.as_str())];
    let cross = http::send(h.proxy, &websocket_head(id, &other_origin), "").await;
    assert_eq!(cross.status, 403, "{cross:?}");
    assert_eq!(h.workload.requests(), 0);

    let head = websocket_head(id, &[("Origin", &own), ("Cookie", &session)]);
    let mut ws = Stream::open(h.proxy, &head).await;
    ws.wait_for("\r\n\r\n", 0).await;
    let answer = http::parse(&ws.seen);
    assert_eq!(answer.status, 101, "{answer:?}");
    assert_eq!(answer.header("upgrade"), Some("websocket"));
    assert!(answer.header("sec-websocket-accept").is_some());
    assert!(answer.header("x-request-id").is_some());
    let start = ws.seen.len();
    use tokio::io::AsyncWriteExt;
    ws.tcp.write_all(b"frame one").await.unwrap();
    ws.wait_for("frame one", start).await;
    ws.tcp.write_all(b"frame two").await.unwrap();
    ws.wait_for("frame two", start).await;
    assert_eq!(h.workload.requests(), 1);
}

#[tokio::test]
async fn a_session_ends_when_its_notebook_restarts_or_stops() {
    let h = Harness::start().await;
    let id = h.notebook(&ALICE);
    let session = cookie(&h.open(id, &ALICE).await);
    let at = host(id);
    assert_eq!(
        get(h.proxy, &at, "/", &[("Cookie", &session)]).await.status,
        200
    );

    // A new attempt is a new server with a new token: the old session ends, and stays ended.
    h.controller.change(&id.to_string(), |t| t.attempt = 2);
    let answer = get(h.proxy, &at, "/", &[("Cookie", &session)]).await;
    assert_eq!(answer.status, 401, "{answer:?}");
    assert_eq!(answer.error_code(), "unauthenticated");
    let cleared = answer.header("set-cookie").unwrap();
    assert!(
        cleared.starts_with("einsora_access=; Max-Age=0; Path=/"),
        "{cleared}"
    );
    h.controller.change(&id.to_string(), |t| t.attempt = 1);
    let answer = get(h.proxy, &at, "/", &[("Cookie", &session)]).await;
    assert_eq!(answer.status, 401, "{answer:?}");
    assert_eq!(h.workload.requests(), 1);

    // A workload that is no longer running (or ready) ends its session too.
    let session = cookie(&h.open(id, &ALICE).await);
    assert_eq!(
        get(h.proxy, &at, "/", &[("Cookie", &session)]).await.status,
        200
    );
    h.controller.stop(&id.to_string());
    let answer = get(h.proxy, &at, "/", &[("Cookie", &session)]).await;
    assert_eq!(answer.status, 401, "{answer:?}");
    assert!(answer.header("set-cookie").unwrap().contains("Max-Age=0"));
    assert_eq!(h.workload.requests(), 2);

    // A session is for its own workload only.
    let other = h.notebook(&ALICE);
    let answer = get(h.proxy, &host(other), "/", &[("Cookie", &session)]).await;
    assert_eq!(answer.status, 401, "{answer:?}");
    assert_eq!(h.workload.requests(), 2);
}

/// The credential that asked for the ticket ends (a logout, a password change, a revoked
/// token): within seconds its session is refused and its open WebSocket closed, though the
/// browser sends nothing meanwhile. Another session of the same notebook, from a credential
/// that still stands, carries on.
#[tokio::test]
async fn a_session_ends_with_the_credential_that_opened_it_open_websockets_included() {
    let h = Harness::start().await;
    let id = h.notebook(&ALICE);
    let (ended, ticket) = h.open_with_ticket(id, &ALICE).await;
    let ended = cookie(&ended);
    let kept = cookie(&h.open(id, &ALICE).await);
    let at = host(id);
    assert_eq!(
        get(h.proxy, &at, "/", &[("Cookie", &ended)]).await.status,
        200
    );
    let own = origin(id);
    let head = websocket_head(id, &[("Origin", &own), ("Cookie", &ended)]);
    let mut ws = Stream::open(h.proxy, &head).await;
    ws.wait_for("\r\n\r\n", 0).await;
    ws.tcp.write_all(b"before").await.unwrap();
    ws.wait_for("before", 0).await;

    h.api.end_grant_of(&ticket);
    let started = std::time::Instant::now();
    assert!(
        ws.ends_within(std::time::Duration::from_secs(5)).await,
        "the WebSocket outlived its credential: {}",
        ws.seen
    );
    let answer = get(h.proxy, &at, "/", &[("Cookie", &ended)]).await;
    assert_eq!(answer.status, 401, "{answer:?}");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert!(h.api.grant_checks.load(std::sync::atomic::Ordering::SeqCst) > 0);
    assert_eq!(
        get(h.proxy, &at, "/", &[("Cookie", &kept)]).await.status,
        200
    );
}

/// A stopped notebook's open WebSocket closes within seconds too, without another request.
#[tokio::test]
async fn a_stopped_notebooks_websocket_is_closed() {
    let h = Harness::start().await;
    let id = h.notebook(&ALICE);
    let session = cookie(&h.open(id, &ALICE).await);
    let own = origin(id);
    let head = websocket_head(id, &[("Origin", &own), ("Cookie", &session)]);
    let mut ws = Stream::open(h.proxy, &head).await;
    ws.wait_for("\r\n\r\n", 0).await;
    h.controller.stop(&id.to_string());
    assert!(
        ws.ends_within(std::time::Duration::from_secs(5)).await,
        "{}",
        ws.seen
    );
}
