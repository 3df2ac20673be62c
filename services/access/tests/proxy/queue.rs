//! Each endpoint's queue, through the real proxy to an engine that holds every request until
//! the test lets it go: no more than the endpoint's slots at once reach the engine, the next
//! wait in order, and the rest are refused 429 with a hint in OpenAI's error shape; a waiting
//! client that goes away frees its place, and no request waits longer than its bound. While an
//! engine starts, 503 with the same hints.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use einsora_access::limits::Limits;
use einsora_runtime::shutdown::Shutdown;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::fakes::ALICE;
use crate::http::{self, Answer, Stream};
use crate::{Harness, WORKER_KEY};

const PUBLIC: &str = "localhost:8090";
const TOKEN: &str = "tsk_aliceSECRET0001";

/// An engine that holds each request until [`Engine::release`] lets one go, noting the order
/// requests arrived in (their `x-test-n`) and the most it held at once.
#[derive(Debug)]
struct Engine {
    gate: Semaphore,
    arrived: Mutex<Vec<String>>,
    holding: AtomicUsize,
    most: AtomicUsize,
}

impl Engine {
    async fn start(socket: &Path, shutdown: &Shutdown) -> Arc<Engine> {
        let engine = Arc::new(Engine {
            gate: Semaphore::new(0),
            arrived: Mutex::default(),
            holding: AtomicUsize::new(0),
            most: AtomicUsize::new(0),
        });
        let listener = tokio::net::UnixListener::bind(socket).unwrap();
        let app = axum::Router::new()
            .fallback(hold)
            .with_state(Arc::clone(&engine));
        let serving = axum::serve(listener, app).with_graceful_shutdown(shutdown.cancelled());
        tokio::spawn(async move { serving.await.unwrap() });
        engine
    }

    fn release(&self, n: usize) {
        self.gate.add_permits(n);
    }

    fn arrived(&self) -> Vec<String> {
        self.arrived.lock().unwrap().clone()
    }

    fn most(&self) -> usize {
        self.most.load(Ordering::SeqCst)
    }

    /// Waits until `n` requests have arrived, in all.
    async fn until_arrived(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.arrived.lock().unwrap().len() < n {
            assert!(Instant::now() < deadline, "arrived: {:?}", self.arrived());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

async fn hold(State(engine): State<Arc<Engine>>, request: Request) -> Response {
    let n = request
        .headers()
        .get("x-test-n")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("?")
        .to_owned();
    engine.arrived.lock().unwrap().push(n.clone());
    let now = engine.holding.fetch_add(1, Ordering::SeqCst) + 1;
    engine.most.fetch_max(now, Ordering::SeqCst);
    engine.gate.acquire().await.unwrap().forget();
    engine.holding.fetch_sub(1, Ordering::SeqCst);
    Response::builder()
        .header("content-type", "application/json")
        .body(Body::from(format!(r#"{{"n":"{n}"}}"#)))
        .unwrap()
}

/// A proxy held to `limits`, and an endpoint of `slots` served by a fresh [`Engine`].
async fn endpoint(limits: Limits, slots: u32) -> (Harness, Uuid, Arc<Engine>, Shutdown) {
    let h = Harness::with_limits(limits).await;
    h.api.add_token(TOKEN, ALICE);
    let id = h.endpoint(&ALICE);
    let stopped = Shutdown::new();
    let socket = h.workload.socket.with_file_name("engine.sock");
    let engine = Engine::start(&socket, &stopped).await;
    h.controller.change(&id.to_string(), |t| {
        t.socket_path = socket.to_str().unwrap().to_owned();
        t.slots = slots;
    });
    (h, id, engine, stopped)
}

fn limits(queue: usize, wait: Duration) -> Limits {
    Limits {
        queue,
        queue_wait: wait,
        ..Limits::default()
    }
}

fn completion(id: Uuid, n: usize) -> String {
    let bearer = format!("Bearer {TOKEN}");
    let n = n.to_string();
    http::head(
        "POST",
        &format!("/e/{id}/v1/completions"),
        PUBLIC,
        &[
            ("Authorization", &bearer),
            ("Content-Type", "application/json"),
            ("x-test-n", &n),
        ],
    )
}

/// Request `n`, sent in the background.
fn send(proxy: SocketAddr, id: Uuid, n: usize) -> JoinHandle<Answer> {
    tokio::spawn(async move { http::send(proxy, &completion(id, n), "{}").await })
}

/// A 429 or 503 says when to retry, in seconds and milliseconds, in OpenAI's error shape.
fn assert_hinted(answer: &Answer, status: u16, kind: &str) -> u64 {
    assert_eq!(answer.status, status, "{answer:?}");
    let seconds: u64 = answer.header("retry-after").unwrap().parse().unwrap();
    let ms: u64 = answer.header("retry-after-ms").unwrap().parse().unwrap();
    assert!(ms > 0 && seconds == ms.div_ceil(1000), "{answer:?}");
    let error = &answer.json()["error"];
    assert_eq!(error["type"], kind, "{answer:?}");
    assert!(error["message"].as_str().is_some_and(|m| !m.is_empty()));
    assert!(error.get("request_id").is_none(), "the ID is a header");
    assert!(answer.header("x-request-id").is_some());
    ms
}

/// N+M+R at once against N slots and a queue of M: N reach the engine, M wait and are served
/// in the order they came, R are refused with a hint; nothing is lost and the engine never
/// holds more than N.
#[tokio::test]
async fn n_at_once_m_in_order_and_the_rest_refused_with_a_hint() {
    let (n, m, r) = (2, 3, 2);
    let (h, id, engine, _stopped) = endpoint(limits(m, Duration::from_secs(30)), 2).await;
    let mut sent = Vec::new();
    for i in 0..n + m {
        sent.push(send(h.proxy, id, i));
        // Each joins before the next.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    engine.until_arrived(n).await;
    for i in n + m..n + m + r {
        let refused = http::send(h.proxy, &completion(id, i), "{}").await;
        let hint = assert_hinted(&refused, 429, "rate_limit_error");
        assert!((100..=60_000).contains(&hint), "{hint}");
        assert_eq!(refused.json()["error"]["code"], "rate_limit_exceeded");
    }
    assert_eq!(engine.arrived(), ["0", "1"], "only N reached the engine");
    for served in n..n + m {
        engine.release(1);
        engine.until_arrived(served + 1).await;
    }
    engine.release(n);
    for (i, answer) in sent.into_iter().enumerate() {
        let answer = answer.await.unwrap();
        assert_eq!(answer.status, 200, "{i}: {answer:?}");
        assert_eq!(answer.json()["n"], i.to_string());
    }
    assert_eq!(engine.arrived(), ["0", "1", "2", "3", "4"], "in order");
    assert_eq!(engine.most(), n, "never more than its slots at once");
}

/// The cap is the endpoint's slots only as far as `EINSORA_ENDPOINT_CONCURRENCY` allows.
#[tokio::test]
async fn no_more_than_the_setting_whatever_the_slots() {
    let limits = Limits {
        concurrency: 1,
        ..limits(4, Duration::from_secs(30))
    };
    let (h, id, engine, _stopped) = endpoint(limits, 8).await;
    let sent: Vec<_> = (0..3).map(|i| send(h.proxy, id, i)).collect();
    engine.until_arrived(1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(engine.arrived().len(), 1, "{:?}", engine.arrived());
    engine.release(3);
    for answer in sent {
        assert_eq!(answer.await.unwrap().status, 200);
    }
    assert_eq!(engine.most(), 1);
}

/// A waiting client that goes away leaves the queue: its place is free for the next, which is
/// served in its turn; the one that left never reaches the engine.
#[tokio::test]
async fn a_waiting_client_that_leaves_frees_its_place() {
    let (h, id, engine, _stopped) = endpoint(limits(1, Duration::from_secs(30)), 1).await;
    let first = send(h.proxy, id, 0);
    engine.until_arrived(1).await;
    let head = format!("{}\r\nContent-Length: 2", completion(id, 1));
    let leaving = Stream::open_with(h.proxy, &head, "{}").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(leaving);
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The queue holds one: had the one that left kept its place, this would be refused.
    let next = send(h.proxy, id, 2);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!next.is_finished(), "it waits its turn");
    engine.release(2);
    assert_eq!(first.await.unwrap().status, 200);
    let next = next.await.unwrap();
    assert_eq!(next.status, 200, "{next:?}");
    assert_eq!(engine.arrived(), ["0", "2"]);
}

/// No request waits longer than `EINSORA_ENDPOINT_QUEUE_WAIT`: then 429, with a hint, and it
/// never reaches the engine.
#[tokio::test]
async fn a_request_waits_no_longer_than_the_bound() {
    let wait = Duration::from_millis(800);
    let (h, id, engine, _stopped) = endpoint(limits(4, wait), 1).await;
    let first = send(h.proxy, id, 0);
    engine.until_arrived(1).await;
    let started = Instant::now();
    let waited = http::send(h.proxy, &completion(id, 1), "{}").await;
    let took = started.elapsed();
    assert_hinted(&waited, 429, "rate_limit_error");
    assert!(
        waited.body.contains("EINSORA_ENDPOINT_QUEUE_WAIT"),
        "{waited:?}"
    );
    assert!(took >= wait && took < wait * 5, "{took:?}");
    engine.release(1);
    assert_eq!(first.await.unwrap().status, 200);
    assert_eq!(engine.arrived(), ["0"]);
}

/// While its engine starts (the controller says it isn't ready), an endpoint answers 503 with
/// the same hints, and serves once it is ready.
#[tokio::test]
async fn a_starting_endpoint_answers_503_with_a_hint() {
    let h = Harness::start().await;
    h.api.add_token(TOKEN, ALICE);
    let id = h.endpoint(&ALICE);
    h.controller.starting(&id.to_string(), true);
    let bearer = format!("Bearer {TOKEN}");
    let auth = [("Authorization", bearer.as_str())];
    let path = format!("/e/{id}/v1/models");
    let starting = http::get(h.proxy, PUBLIC, &path, &auth).await;
    let hint = assert_hinted(&starting, 503, "overloaded_error");
    assert_eq!(hint, 5000, "{starting:?}");
    assert!(starting.body.contains("starting"), "{starting:?}");
    h.controller.starting(&id.to_string(), false);
    let ready = http::get(h.proxy, PUBLIC, &path, &auth).await;
    assert_eq!(ready.status, 200, "{ready:?}");
    assert_eq!(
        http::echoed(&ready, "authorization"),
        [format!("Bearer {WORKER_KEY}")]
    );
}
