//! A workload on another machine, reached through the controller's relay (the fake controller
//! stands in for the machine's agent): a notebook's pages and its WebSocket, and an endpoint's
//! answer, each over a relayed connection, with the same session and token rules as on this
//! host; a relay the machine refuses is a 503 that says to try again.

use std::sync::atomic::Ordering;

use tokio::io::AsyncWriteExt;

use crate::fakes::ALICE;
use crate::http::{self, Stream, get};
use crate::sessions::websocket_head;
use crate::{Harness, NOTEBOOK_TOKEN, WORKER_KEY, cookie, host, origin};

#[tokio::test]
async fn a_notebook_on_another_machine_opens_and_its_websocket_joins_through_the_relay() {
    let h = Harness::start().await;
    let id = h.notebook(&ALICE);
    h.controller.relay(&id.to_string());
    let session = cookie(&h.open(id, &ALICE).await);
    let own = origin(id);

    let page = get(h.proxy, &host(id), "/lab", &[("Cookie", &session)]).await;
    assert_eq!(page.status, 200, "{page:?}");
    assert_eq!(page.json()["uri"], "/lab", "{}", page.body);
    let token = format!("token {NOTEBOOK_TOKEN}");
    assert_eq!(
        http::echoed(&page, "authorization"),
        [token],
        "its token, added as here"
    );

    let head = websocket_head(id, &[("Origin", &own), ("Cookie", &session)]);
    let mut ws = Stream::open(h.proxy, &head).await;
    ws.wait_for("\r\n\r\n", 0).await;
    assert!(ws.seen.starts_with("HTTP/1.1 101"), "{}", ws.seen);
    ws.tcp.write_all(b"ping over the relay").await.unwrap();
    ws.wait_for("ping over the relay", 0).await;
    assert!(
        h.controller.relays.load(Ordering::SeqCst) >= 2,
        "every connection relayed"
    );
}

#[tokio::test]
async fn a_machine_that_refuses_the_relay_is_a_503_to_try_again() {
    let h = Harness::start().await;
    let id = h.notebook(&ALICE);
    let session = cookie(&h.open(id, &ALICE).await);
    h.controller.change(&id.to_string(), |t| {
        t.socket_path = "/nowhere/jl.sock".into()
    });
    h.controller.relay(&id.to_string());
    let page = get(h.proxy, &host(id), "/lab", &[("Cookie", &session)]).await;
    assert_eq!(page.status, 503, "{page:?}");
    assert!(page.body.contains("try again"), "{}", page.body);
}

#[tokio::test]
async fn an_endpoint_on_another_machine_answers_through_the_relay_with_its_own_key() {
    let h = Harness::start().await;
    let token = "tsk_relayedSECRET";
    h.api.add_token(token, ALICE);
    let id = h.endpoint(&ALICE);
    h.controller.relay(&id.to_string());
    let auth = format!("Bearer {token}");
    let head = http::head(
        "POST",
        &format!("/e/{id}/v1/chat/completions"),
        "localhost:8090",
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
        ],
    );
    let answer = http::send(h.proxy, &head, r#"{"model":"m","messages":[]}"#).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.json()["uri"], "/v1/chat/completions");
    assert_eq!(
        http::echoed(&answer, "authorization"),
        [format!("Bearer {WORKER_KEY}")]
    );
    assert_eq!(h.controller.relays.load(Ordering::SeqCst), 1);
}

/// The region's controllers, a standby first: the proxy finds the one leading, and keeps
/// asking it first.
#[tokio::test]
async fn the_proxy_asks_the_controller_leading_past_a_standby() {
    let h = Harness::start().await;
    let id = h.notebook(&ALICE);
    h.controller.relay(&id.to_string());
    let session = cookie(&h.open(id, &ALICE).await);
    for _ in 0..3 {
        let page = get(h.proxy, &host(id), "/lab", &[("Cookie", &session)]).await;
        assert_eq!(page.status, 200, "{page:?}");
    }
    assert_eq!(
        h.standby.refused.load(Ordering::SeqCst),
        1,
        "asked once, then the leader first"
    );
}

/// A relayed connection costs a tunnel, so one whose answer was read is kept for the next
/// request to the same run; a restarted workload's never serves its next run.
#[tokio::test]
async fn a_relayed_connection_is_kept_between_requests_and_never_across_runs() {
    let h = Harness::start().await;
    let token = "tsk_keptSECRET";
    h.api.add_token(token, ALICE);
    let id = h.endpoint(&ALICE);
    h.controller.relay(&id.to_string());
    let auth = format!("Bearer {token}");
    let path = format!("/e/{id}/v1/models");
    let headers = [("Authorization", auth.as_str())];
    let models = || get(h.proxy, "localhost:8090", &path, &headers);
    for _ in 0..10 {
        let answer = models().await;
        assert_eq!(answer.status, 200, "{answer:?}");
        // Time for the answered connection to come back to the pool.
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let tunnels = h.controller.relays.load(Ordering::SeqCst);
    assert!(tunnels <= 2, "{tunnels} tunnels for 10 requests");

    h.controller.change(&id.to_string(), |t| t.attempt = 2);
    let answer = models().await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        h.controller.relays.load(Ordering::SeqCst),
        tunnels + 1,
        "a new run, a new connection"
    );
}
