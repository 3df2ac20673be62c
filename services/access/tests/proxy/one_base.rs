//! The one base URL, `<public URL>/v1`: a request goes by its `model` to one of the caller's
//! endpoints serving that name (its replicas), the least busy GPU one first; a replica that
//! refuses before any byte of its answer is retried on another; a CPU replica serves only when
//! no GPU one is up; a stream its engine breaks off ends with an error event; `GET /v1/models`
//! lists the names with their context length. Each replica here is a small engine of its own.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::header;
use axum::response::Response;
use einsora_proto::common::v1::WorkloadKind;
use einsora_runtime::shutdown::Shutdown;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::fakes::{ALICE, BOB, Who};
use crate::http::{self, Stream, get};
use crate::{Harness, WORKER_KEY};

const PUBLIC: &str = "localhost:8090";
const ALICE_TOKEN: &str = "tsk_aliceSECRET0001";
const BOB_TOKEN: &str = "tsk_bobSECRET0002";

/// How a replica's engine answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Behaviour {
    /// A chat answer naming the replica; streamed when asked, one event and then held open
    /// until the client goes.
    Answers,
    /// 503 while its model loads, as llama.cpp says.
    Loading,
    /// Streams two events, then its connection breaks.
    Dies,
}

/// A replica's engine on its own socket, counting what it was asked.
struct Engine {
    socket: PathBuf,
    chats: Arc<AtomicUsize>,
    props: Arc<AtomicUsize>,
    stop: Shutdown,
}

#[derive(Clone)]
struct Said {
    name: &'static str,
    behaviour: Behaviour,
    context: Option<u64>,
    chats: Arc<AtomicUsize>,
    props: Arc<AtomicUsize>,
}

impl Engine {
    async fn start(
        dir: &Path,
        name: &'static str,
        behaviour: Behaviour,
        context: Option<u64>,
    ) -> Engine {
        let socket = dir.join(format!("{name}-{}.sock", Uuid::now_v7().simple()));
        let said = Said {
            name,
            behaviour,
            context,
            chats: Arc::default(),
            props: Arc::default(),
        };
        let (chats, props) = (Arc::clone(&said.chats), Arc::clone(&said.props));
        let listener = tokio::net::UnixListener::bind(&socket).unwrap();
        let app = axum::Router::new().fallback(engine).with_state(said);
        let stop = Shutdown::new();
        let serving = axum::serve(listener, app).with_graceful_shutdown(stop.cancelled());
        tokio::spawn(async move { serving.await.unwrap() });
        Engine {
            socket,
            chats,
            props,
            stop,
        }
    }

    fn socket(&self) -> &str {
        self.socket.to_str().unwrap()
    }

    fn chats(&self) -> usize {
        self.chats.load(Ordering::SeqCst)
    }

    /// Its container is gone: nothing listens at its socket any more.
    fn kill(&self) {
        self.stop.trigger();
        let _ = std::fs::remove_file(&self.socket);
    }
}

async fn engine(State(said): State<Said>, request: Request) -> Response {
    let json = |status: u16, body: Value| {
        Response::builder()
            .status(status)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string()))
            .unwrap()
    };
    if request.uri().path() == "/props" {
        said.props.fetch_add(1, Ordering::SeqCst);
        return match said.context {
            Some(n) => json(200, json!({"default_generation_settings": {"n_ctx": n}})),
            None => json(404, json!({"error": "no"})),
        };
    }
    said.chats.fetch_add(1, Ordering::SeqCst);
    let bytes = axum::body::to_bytes(request.into_body(), 1 << 20)
        .await
        .unwrap();
    let sent: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let event = |n: u32| {
        let chunk = json!({"object": "chat.completion.chunk", "served_by": said.name,
                           "choices": [{"index": 0, "delta": {"content": format!("t{n}")}}]});
        Ok::<_, std::io::Error>(Bytes::from(format!("data: {chunk}\n\n")))
    };
    match said.behaviour {
        Behaviour::Loading => json(
            503,
            json!({"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}),
        ),
        Behaviour::Dies => {
            use futures::StreamExt;
            // What it sent is on its way first: then its connection breaks.
            let death = futures::stream::once(async {
                tokio::time::sleep(Duration::from_millis(300)).await;
                Err(std::io::Error::other("the engine died"))
            });
            let broken = futures::stream::iter([event(1), event(2)]).chain(death);
            Response::builder()
                .header(header::CONTENT_TYPE, "text/event-stream")
                .body(Body::from_stream(broken))
                .unwrap()
        }
        Behaviour::Answers if sent["stream"] == true => {
            use futures::StreamExt;
            let events = futures::stream::iter([event(1)]).chain(futures::stream::pending());
            Response::builder()
                .header(header::CONTENT_TYPE, "text/event-stream")
                .body(Body::from_stream(events))
                .unwrap()
        }
        Behaviour::Answers => json(
            200,
            json!({"object": "chat.completion", "served_by": said.name, "model": sent["model"],
                   "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}],
                   "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}),
        ),
    }
}

/// Alice's running endpoint at `engine`, serving `name`, on a CPU class or not.
fn replica(h: &Harness, who: &Who, engine: &Engine, name: &str, cpu: bool) -> Uuid {
    let id = Uuid::now_v7();
    let workload = id.to_string();
    h.controller.run(
        &workload,
        who,
        WorkloadKind::Endpoint,
        engine.socket(),
        WORKER_KEY,
    );
    h.controller.serve_as(&workload, name, cpu);
    h.controller.change(&workload, |t| {
        let class = if cpu { "cpu-4c-16g" } else { "l40s-48gb" };
        t.placed_class = class.into();
        t.gpu_class = class.into();
    });
    id
}

async fn harness() -> (Harness, tempfile::TempDir) {
    let h = Harness::start().await;
    h.api.add_token(ALICE_TOKEN, ALICE);
    h.api.add_token(BOB_TOKEN, BOB);
    // Short paths: a Unix socket's path is at most ~100 bytes.
    let dir = tempfile::Builder::new().tempdir_in("/tmp").unwrap();
    (h, dir)
}

async fn chat(h: &Harness, token: &str, body: &str) -> http::Answer {
    let auth = format!("Bearer {token}");
    let head = http::head(
        "POST",
        "/v1/chat/completions",
        PUBLIC,
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
        ],
    );
    http::send(h.proxy, &head, body).await
}

async fn ask(h: &Harness, model: &str) -> http::Answer {
    let body = json!({"model": model, "messages": [{"role": "user", "content": "hi"}]});
    chat(h, ALICE_TOKEN, &body.to_string()).await
}

fn served_by(answer: &http::Answer) -> String {
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.json()["served_by"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_request_goes_by_its_model_to_the_callers_endpoint_serving_it() {
    let (h, dir) = harness().await;
    let chat_engine = Engine::start(dir.path(), "chat-a", Behaviour::Answers, None).await;
    let other_engine = Engine::start(dir.path(), "other", Behaviour::Answers, None).await;
    let bobs_engine = Engine::start(dir.path(), "bobs", Behaviour::Answers, None).await;
    let chat_id = replica(&h, &ALICE, &chat_engine, "chat", false);
    replica(&h, &ALICE, &other_engine, "other", false);
    replica(&h, &BOB, &bobs_engine, "secret", false);

    let answer = ask(&h, "chat").await;
    assert_eq!(served_by(&answer), "chat-a");
    assert_eq!(
        answer.json()["model"],
        "chat",
        "the body is the engine's as sent"
    );
    assert_eq!(
        answer.header("x-einsora-endpoint"),
        Some(chat_id.to_string().as_str())
    );
    assert_eq!(answer.header("x-einsora-class"), Some("l40s-48gb"));
    assert_eq!(served_by(&ask(&h, "other").await), "other");

    // Another tenant's name is as unknown as one nobody serves: 404, nothing reaches it.
    for unknown in ["secret", "nope"] {
        let answer = ask(&h, unknown).await;
        assert_eq!(answer.status, 404, "{answer:?}");
        assert_eq!(answer.openai_error_code(), "model_not_found");
        assert!(answer.body.contains("GET /v1/models"), "{answer:?}");
    }
    assert_eq!(bobs_engine.chats(), 0);
    for body in [r#"{"messages":[]}"#, r#"{"model":7}"#] {
        let answer = chat(&h, ALICE_TOKEN, body).await;
        assert_eq!(answer.status, 400, "{body}: {answer:?}");
        assert!(answer.body.contains("model"), "{answer:?}");
    }
    // The caller is checked as at one endpoint's URL.
    let refused = chat(&h, "tsk_unknown", r#"{"model":"chat"}"#).await;
    assert_eq!(refused.status, 401, "{refused:?}");
    let before = chat_engine.chats();
    let no_token = get(h.proxy, PUBLIC, "/v1/models", &[]).await;
    assert_eq!(no_token.status, 401, "{no_token:?}");
    assert_eq!(chat_engine.chats(), before);
}

/// Two replicas of one model, one of them gone (its container killed): every request is
/// served by the other, the gone one tried at most once each; and one answering 503 while its
/// model loads is passed over the same way.
#[tokio::test]
async fn a_replica_that_refuses_is_passed_over_for_another() {
    let (h, dir) = harness().await;
    let a = Engine::start(dir.path(), "a", Behaviour::Answers, None).await;
    let b = Engine::start(dir.path(), "b", Behaviour::Answers, None).await;
    replica(&h, &ALICE, &a, "chat", false);
    replica(&h, &ALICE, &b, "chat", false);
    // Idle replicas are used in turn.
    let mut seen: Vec<String> = Vec::new();
    for _ in 0..4 {
        seen.push(served_by(&ask(&h, "chat").await));
    }
    assert!(
        seen.contains(&"a".to_owned()) && seen.contains(&"b".to_owned()),
        "{seen:?}"
    );

    a.kill();
    for _ in 0..6 {
        assert_eq!(served_by(&ask(&h, "chat").await), "b");
    }

    let loading = Engine::start(dir.path(), "loading", Behaviour::Loading, None).await;
    let c = Engine::start(dir.path(), "c", Behaviour::Answers, None).await;
    replica(&h, &ALICE, &loading, "tiny", false);
    replica(&h, &ALICE, &c, "tiny", false);
    for _ in 0..4 {
        assert_eq!(served_by(&ask(&h, "tiny").await), "c");
    }
    assert!(loading.chats() <= 4, "at most once per request");

    // With none left to try, the last refusal is the answer.
    b.kill();
    let answer = ask(&h, "chat").await;
    assert_eq!(answer.status, 503, "{answer:?}");
    let only = Engine::start(dir.path(), "only", Behaviour::Loading, None).await;
    replica(&h, &ALICE, &only, "solo", false);
    let answer = ask(&h, "solo").await;
    assert_eq!(answer.status, 503, "{answer:?}");
    assert_eq!(only.chats(), 1, "tried once");
}

/// Each endpoint serving a name starting (none up yet): 503 with a hint, not 404.
#[tokio::test]
async fn a_model_whose_replicas_all_start_is_unavailable_for_now() {
    let (h, dir) = harness().await;
    let a = Engine::start(dir.path(), "a", Behaviour::Answers, None).await;
    let id = replica(&h, &ALICE, &a, "chat", false);
    h.controller.starting(&id.to_string(), true);
    let answer = ask(&h, "chat").await;
    assert_eq!(answer.status, 503, "{answer:?}");
    assert!(answer.header("retry-after").is_some(), "{answer:?}");
    assert_eq!(a.chats(), 0);
    h.controller.starting(&id.to_string(), false);
    assert_eq!(served_by(&ask(&h, "chat").await), "a");
}

/// A CPU replica serves only while no GPU replica is up: not when the GPU one is busy, only
/// once it stops or refuses; and says it was the fallback.
#[tokio::test]
async fn the_cpu_replica_serves_only_when_no_gpu_replica_is_up() {
    let (h, dir) = harness().await;
    let gpu = Engine::start(dir.path(), "gpu", Behaviour::Answers, None).await;
    let cpu = Engine::start(dir.path(), "cpu", Behaviour::Answers, None).await;
    let gpu_id = replica(&h, &ALICE, &gpu, "chat", false);
    replica(&h, &ALICE, &cpu, "chat", true);
    // The GPU replica busy with a stream: still it, not the idle CPU one.
    let auth = format!("Bearer {ALICE_TOKEN}");
    let body = r#"{"model":"chat","stream":true}"#;
    let length = body.len().to_string();
    let head = http::head(
        "POST",
        "/v1/chat/completions",
        PUBLIC,
        &[("Authorization", &auth), ("Content-Length", &length)],
    );
    let mut held = Stream::open_with(h.proxy, &head, body).await;
    held.wait_for("served_by", 0).await;
    for _ in 0..4 {
        let answer = ask(&h, "chat").await;
        assert_eq!(served_by(&answer), "gpu");
        assert_eq!(answer.header("x-einsora-fallback"), Some("false"));
    }
    assert_eq!(cpu.chats(), 0);

    // The GPU replica stopped: the CPU one takes over, and says so.
    h.controller.starting(&gpu_id.to_string(), true);
    let answer = ask(&h, "chat").await;
    assert_eq!(served_by(&answer), "cpu");
    assert_eq!(answer.header("x-einsora-fallback"), Some("true"));
    // Up again, then gone without the controller knowing: refused, so the CPU one again.
    h.controller.starting(&gpu_id.to_string(), false);
    assert_eq!(served_by(&ask(&h, "chat").await), "gpu");
    gpu.kill();
    assert_eq!(served_by(&ask(&h, "chat").await), "cpu");
}

/// A stream whose engine dies mid-way: what came is passed on, then one error event, in
/// OpenAI's shape, and the answer ends; never retried elsewhere once bytes went out.
#[tokio::test]
async fn a_stream_whose_engine_dies_ends_with_an_error_event() {
    let (h, dir) = harness().await;
    let dying = Engine::start(dir.path(), "dying", Behaviour::Dies, None).await;
    let id = replica(&h, &ALICE, &dying, "chat", false);
    let auth = format!("Bearer {ALICE_TOKEN}");
    let body = r#"{"model":"chat","stream":true}"#;
    let length = body.len().to_string();
    for path in [
        "/v1/chat/completions".to_owned(),
        format!("/e/{id}/v1/chat/completions"),
    ] {
        let head = http::head(
            "POST",
            &path,
            PUBLIC,
            &[("Authorization", &auth), ("Content-Length", &length)],
        );
        let mut stream = Stream::open_with(h.proxy, &head, body).await;
        assert!(
            stream.ends_within(Duration::from_secs(10)).await,
            "{path}: {}",
            stream.seen
        );
        let seen = &stream.seen;
        assert!(seen.starts_with("HTTP/1.1 200"), "{path}: {seen}");
        let t2 = seen.find("t2").unwrap_or_else(|| panic!("{path}: {seen}"));
        let error = seen
            .find("data: {\"error\"")
            .unwrap_or_else(|| panic!("{path}: {seen}"));
        assert!(t2 < error, "{seen}");
        let line = seen[error..].lines().next().unwrap();
        let event: Value = serde_json::from_str(line.strip_prefix("data: ").unwrap()).unwrap();
        assert_eq!(event["error"]["code"], "upstream_failed", "{seen}");
        assert!(seen.ends_with("\r\n0\r\n\r\n"), "it ends cleanly: {seen}");
    }
    assert_eq!(dying.chats(), 2, "once each, never resent");
}

/// `GET /v1/models`: the caller's names once each, OpenAI's list shape, the shortest context
/// its replicas said; the engines asked once per run.
#[tokio::test]
async fn models_lists_the_callers_served_names_with_their_context_length() {
    let (h, dir) = harness().await;
    let a = Engine::start(dir.path(), "a", Behaviour::Answers, Some(2048)).await;
    let b = Engine::start(dir.path(), "b", Behaviour::Answers, Some(1024)).await;
    let quiet = Engine::start(dir.path(), "quiet", Behaviour::Answers, None).await;
    let bobs = Engine::start(dir.path(), "bobs", Behaviour::Answers, Some(9)).await;
    replica(&h, &ALICE, &a, "chat", false);
    replica(&h, &ALICE, &b, "chat", true);
    replica(&h, &ALICE, &quiet, "embed", false);
    replica(&h, &BOB, &bobs, "secret", false);
    let starting = replica(&h, &ALICE, &bobs, "warming", false);
    h.controller.starting(&starting.to_string(), true);

    let auth = format!("Bearer {ALICE_TOKEN}");
    let listed = get(h.proxy, PUBLIC, "/v1/models", &[("Authorization", &auth)]).await;
    assert_eq!(listed.status, 200, "{listed:?}");
    let list = listed.json();
    assert_eq!(list["object"], "list");
    let data = list["data"].as_array().unwrap();
    let ids: Vec<&str> = data.iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["chat", "embed", "warming"], "{list}");
    for m in data {
        assert_eq!(m["object"], "model");
        assert!(m["created"].is_u64() && m["owned_by"].is_string(), "{m}");
    }
    assert_eq!(data[0]["context_length"], 1024);
    assert!(data[1].get("context_length").is_none(), "{list}");
    assert_eq!(
        bobs.props.load(Ordering::SeqCst),
        0,
        "Bob's engine isn't asked"
    );

    let again = get(h.proxy, PUBLIC, "/v1/models", &[("Authorization", &auth)]).await;
    assert_eq!(again.json()["data"], list["data"]);
    for engine in [&a, &b] {
        assert_eq!(engine.props.load(Ordering::SeqCst), 1, "asked once per run");
    }
    assert!(quiet.props.load(Ordering::SeqCst) <= 2);
    let posted = http::send(
        h.proxy,
        &http::head("POST", "/v1/models", PUBLIC, &[("Authorization", &auth)]),
        "",
    )
    .await;
    assert_eq!(posted.status, 405, "{posted:?}");
    let bob = format!("Bearer {BOB_TOKEN}");
    let bobs_list = get(h.proxy, PUBLIC, "/v1/models", &[("Authorization", &bob)]).await;
    let ids: Vec<Value> = bobs_list.json()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].clone())
        .collect();
    assert_eq!(ids, [json!("secret")]);
}

/// An inference key reaches only the endpoints in its scope at the one base URL too: the
/// others' names aren't listed, and are as unknown as a name nobody serves.
#[tokio::test]
async fn an_inference_key_sees_and_reaches_its_scope_only() {
    const KEY: &str = "isk_aliceKEY00000000000000000000000009";
    let (h, dir) = harness().await;
    let a = Engine::start(dir.path(), "a", Behaviour::Answers, None).await;
    let b = Engine::start(dir.path(), "b", Behaviour::Answers, None).await;
    let c = Engine::start(dir.path(), "c", Behaviour::Answers, None).await;
    let in_scope = replica(&h, &ALICE, &a, "chat", false);
    // A replica of the same name outside the scope: never used by the key.
    replica(&h, &ALICE, &b, "chat", false);
    replica(&h, &ALICE, &c, "other", false);
    h.api.add_key(KEY, ALICE, &[in_scope], Default::default());
    let auth = format!("Bearer {KEY}");
    let listed = get(h.proxy, PUBLIC, "/v1/models", &[("Authorization", &auth)]).await;
    assert_eq!(listed.status, 200, "{listed:?}");
    let ids: Vec<Value> = listed.json()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].clone())
        .collect();
    assert_eq!(ids, [json!("chat")]);
    for _ in 0..4 {
        let body = json!({"model": "chat", "messages": []}).to_string();
        assert_eq!(served_by(&chat(&h, KEY, &body).await), "a");
    }
    let other = chat(&h, KEY, r#"{"model":"other","messages":[]}"#).await;
    assert_eq!(other.status, 404, "{other:?}");
    assert_eq!((b.chats(), c.chats()), (0, 0));
}
