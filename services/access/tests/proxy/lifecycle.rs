//! Settings, shutdown, and what reaches the log.

use std::time::Duration;

use einsora_access::{Config, run};
use einsora_runtime::grpc::InternalTls;
use einsora_runtime::shutdown::Shutdown;
use einsora_testkit::logs::Captured;
use tokio::io::AsyncWriteExt;

use crate::fakes::ALICE;
use crate::http::{self, Stream, get};
use crate::sessions::websocket_head;
use crate::{Harness, NOTEBOOK_TOKEN, WORKER_KEY, cookie, host, open_path, origin, settings};

#[tokio::test]
async fn settings_are_checked_then_a_port_in_use_names_its_setting() {
    let dir = tempfile::tempdir().unwrap();
    for (url, problem) in [
        ("http://localhost:8090/prefix", "must be an origin: no path"),
        ("ftp://localhost", "is not an http(s) URL"),
    ] {
        let error = Config::from_settings(&settings(dir.path(), &[("EINSORA_ACCESS_URL", url)]))
            .unwrap_err()
            .to_string();
        assert!(error.starts_with("EINSORA_ACCESS_URL: "), "{error}");
        assert!(error.contains(problem), "{error}");
    }
    let error = Config::from_settings(&settings(dir.path(), &[("EINSORA_CONTROLLER_ADDR", "x")]))
        .unwrap_err();
    assert!(
        error.to_string().starts_with("EINSORA_CONTROLLER_ADDR"),
        "{error}"
    );

    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let settings = settings(dir.path(), &[("EINSORA_ACCESS_ADDR", &addr.to_string())]);
    let start = || run(Config::from_settings(&settings).unwrap(), Shutdown::new());
    let error = format!("{:#}", start().await.unwrap_err());
    assert!(error.contains("EINSORA_PKI_DIR"), "{error}");
    InternalTls::from_settings(&settings)
        .unwrap()
        .init()
        .unwrap();
    let error = format!("{:#}", start().await.unwrap_err());
    let expected = format!("EINSORA_ACCESS_ADDR: can't listen on {addr}");
    assert!(error.starts_with(&expected), "{error}");
}

#[tokio::test]
async fn shutdown_ends_open_streams_and_websockets() {
    let mut h = Harness::start().await;
    let token = "tsk_streamSECRET";
    h.api.add_token(token, ALICE);
    let endpoint = h.endpoint(&ALICE);
    let auth = format!("Bearer {token}");
    let head = http::head(
        "POST",
        &format!("/e/{endpoint}/v1/chat/completions"),
        "localhost:8090",
        &[
            ("Authorization", &auth),
            ("x-test-stream", "1"),
            ("Content-Length", "2"),
        ],
    );
    let mut sse = Stream::open_with(h.proxy, &head, "{}").await;
    sse.wait_for("data: tick", 0).await;

    let notebook = h.notebook(&ALICE);
    let session = cookie(&h.open(notebook, &ALICE).await);
    let own = origin(notebook);
    let head = websocket_head(notebook, &[("Origin", &own), ("Cookie", &session)]);
    let mut ws = Stream::open(h.proxy, &head).await;
    ws.wait_for("\r\n\r\n", 0).await;
    ws.tcp.write_all(b"ping").await.unwrap();
    ws.wait_for("ping", 0).await;

    h.stop_proxy().await;
    assert!(
        sse.ends_within(Duration::from_secs(5)).await,
        "{}",
        sse.seen
    );
    assert!(ws.ends_within(Duration::from_secs(5)).await, "{}", ws.seen);
}

#[tokio::test]
async fn secrets_never_reach_the_log() {
    // Tests run on a current-thread runtime, so the servers' tasks log on this thread too.
    let (captured, _guard) = Captured::scoped("einsora_access=trace,debug");

    let h = Harness::start().await;
    let api_token = "tsk_logSECRET4242";
    h.api.add_token(api_token, ALICE);
    let notebook = h.notebook(&ALICE);
    let ticket = h.ticket(notebook, &ALICE);
    let opened = get(h.proxy, &host(notebook), &open_path(&ticket), &[]).await;
    assert_eq!(opened.status, 200);
    let session = opened
        .header("set-cookie")
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let spent = get(h.proxy, &host(notebook), &open_path(&ticket), &[]).await;
    assert_eq!(spent.status, 401);
    let forwarded = get(h.proxy, &host(notebook), "/lab", &[("Cookie", &session)]).await;
    assert_eq!(forwarded.status, 200);
    let endpoint = h.endpoint(&ALICE);
    let auth = format!("Bearer {api_token}");
    let path = format!("/e/{endpoint}/v1/models");
    let answer = get(
        h.proxy,
        "localhost:8090",
        &path,
        &[("Authorization", &auth)],
    )
    .await;
    assert_eq!(answer.status, 200);
    drop(h);

    let log = captured.text();
    let session_id = session.strip_prefix("einsora_access=").unwrap();
    assert!(
        log.contains(opened.header("x-request-id").unwrap()),
        "{log}"
    );
    assert!(
        log.contains(ALICE.subject),
        "log lines name the caller: {log}"
    );
    for secret in [
        ticket.as_str(),
        session_id,
        api_token,
        NOTEBOOK_TOKEN,
        WORKER_KEY,
    ] {
        assert!(!log.contains(secret), "{secret} logged:\n{log}");
    }
}
