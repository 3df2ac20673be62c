//! Connections to a workload on this host are kept between requests (`kept.rs`), counted by
//! the connections its socket accepted: one for a run of sequential requests, never one of an
//! earlier run, never one still busy with an answer, never one whose answer was dropped halfway,
//! never a WebSocket's; a workload that closes idle connections costs no request, nor one that
//! closes a kept connection under a GET (sent again), while a POST is never sent twice.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use einsora_runtime::shutdown::Shutdown;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixListener;
use uuid::Uuid;

use crate::fakes::ALICE;
use crate::http::{self, Stream, get};
use crate::sessions::websocket_head;
use crate::{Harness, cookie, host, origin};

const PUBLIC: &str = "localhost:8090";
const TOKEN: &str = "tsk_keptSECRET0003";

async fn models(h: &Harness, id: Uuid) -> http::Answer {
    let auth = format!("Bearer {TOKEN}");
    let path = format!("/e/{id}/v1/models");
    get(h.proxy, PUBLIC, &path, &[("Authorization", &auth)]).await
}

/// An endpoint's never-ending event stream, read until its first event.
async fn stream(h: &Harness, id: Uuid) -> Stream {
    let auth = format!("Bearer {TOKEN}");
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
    let mut sse = Stream::open_with(h.proxy, &head, "{}").await;
    sse.wait_for("data: tick", 0).await;
    sse
}

/// Waits up to 5 s for `done`.
async fn until(what: &str, done: impl Fn() -> bool) {
    for _ in 0..500 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("not within 5 s: {what}");
}

#[tokio::test]
async fn sequential_requests_to_a_notebook_share_one_connection() {
    let h = Harness::start().await;
    let id = h.notebook(&ALICE);
    let session = cookie(&h.open(id, &ALICE).await);
    for i in 0..10 {
        let path = format!("/api/contents/{i}");
        let answer = get(h.proxy, &host(id), &path, &[("Cookie", &session)]).await;
        assert_eq!(answer.status, 200, "{answer:?}");
        assert_eq!(answer.json()["uri"], path, "each answer its own request's");
    }
    assert_eq!(h.workload.requests(), 10);
    assert_eq!(h.workload.accepts(), 1, "ten requests, one connection");
}

/// A new attempt is a new server: what the old one left open is never used for it.
#[tokio::test]
async fn a_restarted_workload_never_gets_its_old_runs_connections() {
    let h = Harness::start().await;
    h.api.add_token(TOKEN, ALICE);
    let id = h.endpoint(&ALICE);
    for _ in 0..3 {
        assert_eq!(models(&h, id).await.status, 200);
    }
    assert_eq!(h.workload.accepts(), 1);
    h.controller.change(&id.to_string(), |t| t.attempt = 2);
    for _ in 0..3 {
        assert_eq!(models(&h, id).await.status, 200);
    }
    assert_eq!(
        h.workload.accepts(),
        2,
        "a new run, a new connection, then kept"
    );
}

/// A connection busy with a long answer serves nothing else meanwhile; once its reader drops
/// the answer halfway, the connection is closed, not kept, and the next request dials again.
#[tokio::test]
async fn a_busy_connection_is_not_shared_and_one_dropped_halfway_is_closed() {
    let h = Harness::start().await;
    h.api.add_token(TOKEN, ALICE);
    let id = h.endpoint(&ALICE);
    assert_eq!(models(&h, id).await.status, 200);
    let sse = stream(&h, id).await;
    assert_eq!(
        h.workload.accepts(),
        1,
        "the stream took the kept connection"
    );
    let answer = tokio::time::timeout(Duration::from_secs(5), models(&h, id)).await;
    assert_eq!(answer.expect("not held up by the stream").status, 200);
    assert_eq!(
        h.workload.accepts(),
        2,
        "a second connection beside the busy one"
    );

    drop(sse);
    until("the stream's connection closed", || {
        h.workload.streams_ended() == 1
    })
    .await;
    assert_eq!(models(&h, id).await.status, 200);
    assert_eq!(h.workload.accepts(), 2, "the second one, kept, served it");
    let sse = stream(&h, id).await;
    drop(sse);
    until("the second stream's connection closed", || {
        h.workload.streams_ended() == 2
    })
    .await;
    assert_eq!(models(&h, id).await.status, 200);
    assert_eq!(
        h.workload.accepts(),
        3,
        "no connection is left to keep: a new one"
    );
}

/// A WebSocket gets a connection of its own, never a kept one, and its connection is never
/// kept for a later request.
#[tokio::test]
async fn websockets_get_connections_of_their_own() {
    let h = Harness::start().await;
    let id = h.notebook(&ALICE);
    let session = cookie(&h.open(id, &ALICE).await);
    let at = host(id);
    let headers = [("Cookie", session.as_str())];
    let page = || get(h.proxy, &at, "/lab", &headers);
    assert_eq!(page().await.status, 200);
    assert_eq!(h.workload.accepts(), 1);

    let own = origin(id);
    let head = websocket_head(id, &[("Origin", &own), ("Cookie", &session)]);
    let mut ws = Stream::open(h.proxy, &head).await;
    ws.wait_for("\r\n\r\n", 0).await;
    assert!(ws.seen.starts_with("HTTP/1.1 101"), "{}", ws.seen);
    let start = ws.seen.len();
    ws.tcp.write_all(b"frame").await.unwrap();
    ws.wait_for("frame", start).await;
    assert_eq!(h.workload.accepts(), 2, "the WebSocket dialled its own");

    assert_eq!(page().await.status, 200);
    assert_eq!(h.workload.accepts(), 2, "the page took the kept one");
    drop(ws);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(page().await.status, 200);
    assert_eq!(h.workload.accepts(), 2, "the WebSocket's was never kept");
}

/// A workload that closes connections idle for 50 ms: a kept connection it closed is never
/// sent a request, which goes on a new one.
#[tokio::test]
async fn a_workload_closing_idle_connections_costs_no_request() {
    let h = Harness::start().await;
    h.api.add_token(TOKEN, ALICE);
    let id = h.endpoint(&ALICE);
    let stopped = Shutdown::new();
    let socket = h.workload.socket.with_file_name("closing.sock");
    let accepts = closing_server(&socket, Duration::from_millis(50), usize::MAX, &stopped);
    let path = socket.to_str().unwrap().to_owned();
    h.controller
        .change(&id.to_string(), |t| t.socket_path = path.clone());
    for i in 1..=3 {
        let answer = models(&h, id).await;
        assert_eq!(answer.status, 200, "{answer:?}");
        assert_eq!(answer.body, "{}");
        assert_eq!(accepts.load(Ordering::SeqCst), i);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    stopped.trigger();
}

/// A workload whose idle time ends as a request comes on a kept connection: it reads the
/// request and closes. A GET goes again on a new connection and is answered; a POST, which may
/// have been acted on, is not sent twice.
#[tokio::test]
async fn a_request_a_kept_connection_closed_under_goes_again_only_if_it_may() {
    let h = Harness::start().await;
    h.api.add_token(TOKEN, ALICE);
    let id = h.endpoint(&ALICE);
    let stopped = Shutdown::new();
    let socket = h.workload.socket.with_file_name("closing.sock");
    let accepts = closing_server(&socket, Duration::from_secs(5), 1, &stopped);
    let path = socket.to_str().unwrap().to_owned();
    h.controller
        .change(&id.to_string(), |t| t.socket_path = path.clone());
    // Each request after the first goes on the connection the one before was answered on,
    // which closes under it: sent again on a new one, and answered.
    for i in 1..=4 {
        let answer = models(&h, id).await;
        assert_eq!(answer.status, 200, "{answer:?}");
        assert_eq!(accepts.load(Ordering::SeqCst), i);
    }

    let auth = format!("Bearer {TOKEN}");
    let post = async |body: &'static str| {
        let head = http::head(
            "POST",
            &format!("/e/{id}/v1/embeddings"),
            PUBLIC,
            &[
                ("Authorization", &auth),
                ("Content-Type", "application/json"),
                ("Content-Length", &body.len().to_string()),
            ],
        );
        http::send(h.proxy, &head, body).await
    };
    let before = accepts.load(Ordering::SeqCst);
    let refused = post("{}").await;
    assert_eq!(refused.status, 503, "{refused:?}");
    assert_eq!(accepts.load(Ordering::SeqCst), before, "never sent twice");
    assert_eq!(post("{}").await.status, 200, "the next goes on a new one");
    assert_eq!(accepts.load(Ordering::SeqCst), before + 1);
    stopped.trigger();
}

/// An HTTP/1.1 server answering `{}` to the first `answers` requests on a connection, which it
/// closes once it has been idle `idle`, or as the next request comes; how many connections it
/// accepted.
fn closing_server(
    socket: &Path,
    idle: Duration,
    answers: usize,
    stopped: &Shutdown,
) -> Arc<AtomicUsize> {
    let listener = UnixListener::bind(socket).unwrap();
    let accepts = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&accepts);
    let stop = stopped.clone();
    tokio::spawn(async move {
        loop {
            let (mut conn, _) = tokio::select! {
                accepted = listener.accept() => accepted.unwrap(),
                () = stop.cancelled() => return,
            };
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut seen = Vec::new();
                let mut buf = [0u8; 4096];
                let mut answered = 0;
                loop {
                    let read = tokio::time::timeout(idle, conn.read(&mut buf)).await;
                    let Ok(Ok(n @ 1..)) = read else { return };
                    seen.extend_from_slice(&buf[..n]);
                    // Each head ends a request (a body, `{}`, is taken with the next head).
                    while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                        seen.drain(..end + 4);
                        if answered == answers {
                            return;
                        }
                        answered += 1;
                        let answer = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                                      Content-Length: 2\r\n\r\n{}";
                        conn.write_all(answer.as_bytes()).await.unwrap();
                    }
                }
            });
        }
    });
    accepts
}
