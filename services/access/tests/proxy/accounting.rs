//! Token accounting that needs nothing from the client, against an engine that answers as
//! llama.cpp does (usage-only chunk when `stream_options.include_usage` asks, per-chunk
//! `timings` when `timings_per_token` asks): what the api is sent equals the engine's own
//! usage for whole, streamed and abandoned answers; what the proxy asked for that the client
//! didn't is taken out; a stream the client leaves ends the engine's request; and counts the
//! api couldn't take are sent again, once.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header;
use axum::response::Response;
use serde_json::{Value, json};
use tokio_stream::wrappers::ReceiverStream;
use uuid::Uuid;

use crate::fakes::ALICE;
use crate::http::{self, Answer, Stream};
use crate::{Harness, WORKER_KEY};

const PUBLIC: &str = "localhost:8090";
const TOKEN: &str = "tsk_aliceSECRET0001";
/// The engine's own count of every prompt (cached and evaluated).
const PROMPT: (u64, u64) = (30, 9);
/// Tokens it generates for a whole answer or a stream that runs to its end.
const GENERATED: u64 = 4;
/// Tokens a stream has generated when it stalls (sending only comments), for a client to
/// leave it.
const BEFORE_STALL: u64 = 3;

/// The engine's requests, and the streams that ended (their connection closed or they ran out).
#[derive(Debug, Default)]
struct Engine {
    sent: std::sync::Mutex<Vec<Value>>,
    streams_ended: AtomicUsize,
}

async fn start_engine(h: &Harness) -> (Arc<Engine>, Uuid, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("llm.sock");
    let engine = Arc::new(Engine::default());
    let app = axum::Router::new()
        .fallback(answer)
        .with_state(Arc::clone(&engine));
    let listener = tokio::net::UnixListener::bind(&socket).unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let id = Uuid::now_v7();
    h.controller.run(
        &id.to_string(),
        &ALICE,
        einsora_proto::common::v1::WorkloadKind::Endpoint,
        socket.to_str().unwrap(),
        WORKER_KEY,
    );
    (engine, id, dir)
}

fn timings(predicted: u64) -> Value {
    json!({"cache_n": PROMPT.0, "prompt_n": PROMPT.1, "prompt_ms": 1.5, "predicted_n": predicted,
           "predicted_ms": 0.5})
}

fn usage(completion: u64) -> Value {
    json!({"prompt_tokens": PROMPT.0 + PROMPT.1, "completion_tokens": completion,
           "total_tokens": PROMPT.0 + PROMPT.1 + completion})
}

fn event(chunk: &Value) -> String {
    format!("data: {chunk}\n\n")
}

async fn answer(State(engine): State<Arc<Engine>>, request: Request) -> Response {
    let stalls = request.headers().contains_key("x-test-stall");
    let bytes = axum::body::to_bytes(request.into_body(), 1 << 20)
        .await
        .unwrap();
    let sent: Value = serde_json::from_slice(&bytes).unwrap();
    engine.sent.lock().unwrap().push(sent.clone());
    if sent["stream"] != true {
        let whole = json!({"object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "abcd"},
                         "finish_reason": "length"}],
            "usage": usage(GENERATED), "timings": timings(GENERATED)});
        return Response::builder()
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(whole.to_string()))
            .unwrap();
    }
    let per_token = sent["timings_per_token"] == true;
    let with_usage = sent["stream_options"]["include_usage"] == true;
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<String, std::io::Error>>(1);
    tokio::spawn(async move {
        let send = |text: String| {
            let tx = tx.clone();
            async move { tx.send(Ok(text)).await.is_ok() }
        };
        let mut events = vec![event(&json!({"object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": null}}]}))];
        let tokens = if stalls { BEFORE_STALL } else { GENERATED };
        for n in 1..=tokens {
            let mut chunk = json!({"object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {"content": "x"}}]});
            if per_token {
                chunk["timings"] = timings(n);
            }
            events.push(event(&chunk));
        }
        let mut open = true;
        for e in events {
            open = open && send(e).await;
        }
        if stalls {
            // Generating on, showing nothing, until its client goes.
            while open {
                tokio::time::sleep(Duration::from_millis(20)).await;
                open = send(": still thinking\n\n".into()).await;
            }
        } else {
            let mut last = json!({"object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]});
            if !with_usage {
                // llama.cpp times the last chunk whatever was asked.
                last["timings"] = timings(GENERATED);
            }
            send(event(&last)).await;
            if with_usage {
                let chunk = json!({"object": "chat.completion.chunk", "choices": [],
                                   "usage": usage(GENERATED), "timings": timings(GENERATED)});
                send(event(&chunk)).await;
            }
            send("data: [DONE]\n\n".into()).await;
        }
        engine.streams_ended.fetch_add(1, Ordering::SeqCst);
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(ReceiverStream::new(rx)))
        .unwrap()
}

fn head(id: Uuid, extra: &[(&str, &str)]) -> String {
    let bearer = format!("Bearer {TOKEN}");
    let mut headers = vec![
        ("Authorization", bearer.as_str()),
        ("Content-Type", "application/json"),
    ];
    headers.extend_from_slice(extra);
    http::head(
        "POST",
        &format!("/e/{id}/v1/chat/completions"),
        PUBLIC,
        &headers,
    )
}

async fn chat(h: &Harness, id: Uuid, body: &Value) -> Answer {
    http::send(h.proxy, &head(id, &[]), &body.to_string()).await
}

fn messages() -> Value {
    json!([{"role": "user", "content": "hello"}])
}

/// (requests, prompt, completion) the api was sent for `id`, once the proxy has stopped
/// (which sends what it holds).
async fn recorded(h: &mut Harness, id: Uuid) -> (u64, u64, u64) {
    h.stop_proxy().await;
    let batches = h.api.token_batches.lock().unwrap();
    let mut sums = (0, 0, 0);
    for count in batches.values().flatten() {
        assert_eq!(count.endpoint_id, id.to_string());
        assert_eq!(
            (count.tenant_id.as_str(), count.user_id.as_str()),
            (ALICE.tenant, ALICE.user)
        );
        assert_eq!(count.key_id, "", "an API token has no key");
        let hour = count.hour_start.unwrap();
        assert_eq!((hour.seconds % 3600, hour.nanos), (0, 0));
        sums.0 += count.requests;
        sums.1 += count.prompt_tokens;
        sums.2 += count.completion_tokens;
    }
    sums
}

const ENGINES_OWN: (u64, u64, u64) = (1, PROMPT.0 + PROMPT.1, GENERATED);

#[tokio::test]
async fn a_whole_answer_records_the_engines_usage() {
    let mut h = Harness::start().await;
    h.api.add_token(TOKEN, ALICE);
    let (_engine, id, _dir) = start_engine(&h).await;
    let answer = chat(&h, id, &json!({"messages": messages()})).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.json()["usage"]["completion_tokens"], GENERATED);
    assert_eq!(recorded(&mut h, id).await, ENGINES_OWN);
}

#[tokio::test]
async fn a_stream_is_counted_from_usage_the_client_never_asked_for_nor_sees() {
    let mut h = Harness::start().await;
    h.api.add_token(TOKEN, ALICE);
    let (engine, id, _dir) = start_engine(&h).await;
    let answer = chat(&h, id, &json!({"messages": messages(), "stream": true})).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let sent = engine.sent.lock().unwrap()[0].clone();
    assert_eq!(sent["stream_options"]["include_usage"], true, "{sent}");
    assert_eq!(sent["timings_per_token"], true, "{sent}");
    assert!(!answer.body.contains("usage"), "{}", answer.body);
    assert!(!answer.body.contains("timings"), "{}", answer.body);
    let chunks = answer.body.matches("data: {").count();
    assert_eq!(chunks as u64, 1 + GENERATED + 1, "{}", answer.body);
    assert!(answer.body.ends_with("data: [DONE]\n\n"), "{}", answer.body);
    assert_eq!(recorded(&mut h, id).await, ENGINES_OWN);
}

#[tokio::test]
async fn a_stream_that_asked_for_usage_sees_it() {
    let mut h = Harness::start().await;
    h.api.add_token(TOKEN, ALICE);
    let (engine, id, _dir) = start_engine(&h).await;
    let body = json!({"messages": messages(), "stream": true,
                      "stream_options": {"include_usage": true}, "timings_per_token": true});
    let answer = chat(&h, id, &body).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(engine.sent.lock().unwrap()[0], {
        let mut sent = body.clone();
        sent["max_tokens"] = json!(4096);
        sent
    });
    assert!(
        answer.body.contains("\"choices\":[],"),
        "the usage chunk stays: {}",
        answer.body
    );
    assert_eq!(
        answer.body.matches("\"timings\"").count() as u64,
        GENERATED + 1
    );
    assert_eq!(recorded(&mut h, id).await, ENGINES_OWN);
}

#[tokio::test]
async fn a_stream_the_client_leaves_ends_the_engines_request_and_counts_what_it_generated() {
    let mut h = Harness::start().await;
    h.api.add_token(TOKEN, ALICE);
    let (engine, id, _dir) = start_engine(&h).await;
    let body = json!({"messages": messages(), "stream": true}).to_string();
    let mut stream = Stream::open_with(
        h.proxy,
        &head(
            id,
            &[
                ("x-test-stall", "1"),
                ("Content-Length", &body.len().to_string()),
            ],
        ),
        &body,
    )
    .await;
    stream.wait_for(": still thinking", 0).await;
    assert!(!stream.seen.contains("timings"), "{}", stream.seen);
    drop(stream);
    let ended = async {
        while engine.streams_ended.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), ended)
        .await
        .expect("the engine's request ends with its client");
    let left = (1, PROMPT.0 + PROMPT.1, BEFORE_STALL);
    assert_eq!(recorded(&mut h, id).await, left);
}

#[tokio::test]
async fn counts_the_api_could_not_take_are_sent_again_and_taken_once() {
    let mut h = Harness::start().await;
    h.api.add_token(TOKEN, ALICE);
    let (_engine, id, _dir) = start_engine(&h).await;
    h.api.token_failures.store(3, Ordering::SeqCst);
    for _ in 0..2 {
        let answer = chat(&h, id, &json!({"messages": messages()})).await;
        assert_eq!(answer.status, 200, "{answer:?}");
    }
    let (requests, prompt, completion) = recorded(&mut h, id).await;
    assert_eq!(
        h.api.token_failures.load(Ordering::SeqCst),
        0,
        "it was refused"
    );
    assert_eq!(
        (requests, prompt, completion),
        (2, 2 * ENGINES_OWN.1, 2 * ENGINES_OWN.2)
    );
}
