//! An OpenAI-compatible engine, as llama.cpp answers, for requests that ask for one
//! (`x-test-engine`): chat completions whole or streamed (SSE chunks, the usage chunk when
//! `stream_options.include_usage` asks), a tool call when the request has tools, embeddings;
//! or, as told, a garbled answer (`garbled`) or a refusal (`refuse`). Each answer says what
//! the engine was sent: the body in `x-test-request`, the header names in `x-test-headers`,
//! the authorization in `x-test-authorization`.

use axum::body::Body;
use axum::extract::Request;
use axum::http::header;
use axum::response::Response;
use serde_json::{Value, json};

pub const ENGINE: &str = "x-test-engine";
pub const ARGUMENTS: &str = r#"{"city":"Paris"}"#;
pub const USAGE: (u64, u64) = (11, 3);

pub async fn answer(request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let told = parts.headers[ENGINE].to_str().unwrap_or("").to_owned();
    let bytes = axum::body::to_bytes(body, 1 << 20).await.unwrap();
    let sent: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let names: Vec<&str> = parts.headers.keys().map(|k| k.as_str()).collect();
    let authorization = parts
        .headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let streamed = sent["stream"] == true;
    let (status, content_type, body) = match (told.as_str(), parts.uri.path()) {
        ("refuse", _) => (
            400,
            "application/json",
            json!({"error": {"code": 400, "message": "Invalid tool_choice: bogus",
                             "type": "invalid_request_error"}})
            .to_string(),
        ),
        ("garbled", _) if streamed => (
            200,
            "text/event-stream",
            format!("{}data: {{\"choices\": [gar\n\n", chunk(json!({"content": "Hi"}), None)),
        ),
        ("garbled", _) => (200, "application/json", "{\"choices\": [gar".to_owned()),
        (_, "/v1/embeddings") => (
            200,
            "application/json",
            json!({"model": "m", "object": "list", "usage": {"prompt_tokens": 2, "total_tokens": 2},
                   "data": [{"object": "embedding", "index": 0, "embedding": [0.25, -0.5]}]})
            .to_string(),
        ),
        _ if streamed => (200, "text/event-stream", stream(&sent)),
        _ => (200, "application/json", whole(&sent).to_string()),
    };
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, content_type)
        .header("x-test-request", sent.to_string())
        .header("x-test-headers", names.join(","))
        .header("x-test-authorization", authorization)
        .body(Body::from(body))
        .unwrap()
}

/// The tool call a request with tools gets: its first tool, with [`ARGUMENTS`].
fn called(sent: &Value) -> Option<String> {
    let name = sent["tools"][0]["function"]["name"].as_str()?;
    Some(name.to_owned())
}

/// A whole chat answer: "Hello there", or a call of the request's first tool.
pub fn whole(sent: &Value) -> Value {
    let (message, finish) = match called(sent) {
        Some(name) => (
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_1",
                   "type": "function", "function": {"name": name, "arguments": ARGUMENTS}}]}),
            "tool_calls",
        ),
        None => (
            json!({"role": "assistant", "content": "Hello there"}),
            "stop",
        ),
    };
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "einsora-local",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": USAGE.0, "completion_tokens": USAGE.1,
                  "total_tokens": USAGE.0 + USAGE.1},
    })
}

fn chunk(delta: Value, finish: Option<&str>) -> String {
    let chunk = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                       "model": "einsora-local",
                       "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    format!("data: {chunk}\n\n")
}

/// A streamed chat answer, as llama.cpp streams one.
pub fn stream(sent: &Value) -> String {
    let mut events = chunk(json!({"role": "assistant", "content": null}), None);
    let finish = match called(sent) {
        Some(name) => {
            events += &chunk(
                json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                       "function": {"name": name, "arguments": ""}}]}),
                None,
            );
            let (first, rest) = ARGUMENTS.split_at(8);
            for part in [first, rest] {
                events += &chunk(
                    json!({"tool_calls": [{"index": 0, "function": {"arguments": part}}]}),
                    None,
                );
            }
            "tool_calls"
        }
        None => {
            for part in ["Hello", " there"] {
                events += &chunk(json!({"content": part}), None);
            }
            "stop"
        }
    };
    events += &chunk(json!({}), Some(finish));
    if sent["stream_options"]["include_usage"] == true {
        let usage = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [],
                           "usage": {"prompt_tokens": USAGE.0, "completion_tokens": USAGE.1,
                                     "total_tokens": USAGE.0 + USAGE.1}});
        events += &format!("data: {usage}\n\n");
    }
    events + "data: [DONE]\n\n"
}
