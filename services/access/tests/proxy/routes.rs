//! The routes clients use beyond chat and completions, against a fake engine (`engine.rs`):
//! embeddings as sent, tool calls passed through whole and streamed, and Anthropic's Messages
//! API and OpenAI's Responses API translated onto chat completions and back, whole and
//! streamed, with their errors in their own shapes.

use serde_json::{Value, json};
use uuid::Uuid;

use crate::engine::{self, ARGUMENTS, ENGINE, USAGE};
use crate::fakes::ALICE;
use crate::http::{self, Answer};
use crate::{Harness, WORKER_KEY};

const PUBLIC: &str = "localhost:8090";
const TOKEN: &str = "tsk_aliceSECRET0001";

async fn started() -> (Harness, Uuid) {
    let h = Harness::start().await;
    h.api.add_token(TOKEN, ALICE);
    let id = h.endpoint(&ALICE);
    (h, id)
}

async fn post(h: &Harness, path: &str, headers: &[(&str, &str)], body: &Value) -> Answer {
    let mut all = vec![("Content-Type", "application/json")];
    all.extend_from_slice(headers);
    let head = http::head("POST", path, PUBLIC, &all);
    http::send(h.proxy, &head, &body.to_string()).await
}

fn bearer() -> String {
    format!("Bearer {TOKEN}")
}

/// What the engine was sent.
fn sent(answer: &Answer) -> Value {
    let text = answer
        .header("x-test-request")
        .expect("the engine answered");
    serde_json::from_str(text).unwrap()
}

/// A streamed answer's events as (event name or "", data).
fn events(answer: &Answer) -> Vec<(String, Value)> {
    answer
        .body
        .split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            let (mut kind, mut data) = (String::new(), Value::Null);
            for line in e.lines() {
                if let Some(k) = line.strip_prefix("event: ") {
                    kind = k.to_owned();
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data = serde_json::from_str(d).unwrap_or(Value::String(d.to_owned()));
                }
            }
            (kind, data)
        })
        .collect()
}

fn weather_tool() -> Value {
    json!({"type": "function", "function": {"name": "weather",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}})
}

#[tokio::test]
async fn embeddings_reach_the_engine_as_sent() {
    let (h, id) = started().await;
    let auth = bearer();
    let request = json!({"model": "m", "input": ["hello", "world"]});
    let answer = post(
        &h,
        &format!("/e/{id}/v1/embeddings"),
        &[("Authorization", &auth)],
        &request,
    )
    .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let echo = answer.json();
    assert_eq!(echo["uri"], "/v1/embeddings");
    let sent: Value = serde_json::from_str(echo["body"].as_str().unwrap()).unwrap();
    assert_eq!(
        sent, request,
        "no token bound is added: embeddings generate nothing"
    );

    let answer = post(
        &h,
        &format!("/e/{id}/v1/embeddings"),
        &[("Authorization", &auth), (ENGINE, "chat")],
        &request,
    )
    .await;
    assert_eq!(answer.json()["data"][0]["embedding"], json!([0.25, -0.5]));
}

#[tokio::test]
async fn tool_calls_pass_through_chat_whole_and_streamed() {
    let (h, id) = started().await;
    let auth = bearer();
    let path = format!("/e/{id}/v1/chat/completions");
    let mut request = json!({
        "model": "m", "max_tokens": 10,
        "messages": [
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_0", "type": "function",
              "function": {"name": "weather", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_0", "content": "sunny"}],
        "tools": [weather_tool()],
        "tool_choice": {"type": "function", "function": {"name": "weather"}},
        "parallel_tool_calls": false,
    });
    let answer = post(
        &h,
        &path,
        &[("Authorization", &auth), (ENGINE, "chat")],
        &request,
    )
    .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let sent = sent(&answer);
    for field in ["messages", "tools", "tool_choice", "parallel_tool_calls"] {
        assert_eq!(
            sent[field], request[field],
            "{field} reached the engine unchanged"
        );
    }
    assert_eq!(
        answer.json(),
        engine::whole(&sent),
        "the answer passes through unchanged"
    );
    assert_eq!(
        answer.json()["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
        ARGUMENTS
    );

    request["stream"] = json!(true);
    let answer = post(
        &h,
        &path,
        &[("Authorization", &auth), (ENGINE, "chat")],
        &request,
    )
    .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let sent = self::sent(&answer);
    assert_eq!(sent["tools"], request["tools"]);
    // Every chunk the engine streamed of the call, as it streamed it.
    let streamed = engine::stream(&sent);
    for event in streamed.split("\n\n").filter(|e| e.contains("tool_calls")) {
        assert!(answer.body.contains(event), "{event} in {}", answer.body);
    }
    assert!(answer.body.ends_with("data: [DONE]\n\n"), "{}", answer.body);
}

#[tokio::test]
async fn messages_are_answered_in_anthropics_shape_whole_and_streamed() {
    let (h, id) = started().await;
    let path = format!("/e/{id}/v1/messages");
    let anthropic = [
        ("x-api-key", TOKEN),
        ("anthropic-version", "2023-06-01"),
        (ENGINE, "chat"),
    ];
    let request = json!({
        "model": "claude-x", "max_tokens": 20, "system": "Be brief.", "temperature": 0.1,
        "stop_sequences": ["END"],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"},
                                                  {"type": "text", "text": "there"}]}],
    });
    let answer = post(&h, &path, &anthropic, &request).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let sent = sent(&answer);
    assert_eq!(
        sent["messages"][0],
        json!({"role": "system", "content": "Be brief."})
    );
    assert_eq!(
        sent["messages"][1]["content"][1],
        json!({"type": "text", "text": "there"})
    );
    assert_eq!(
        (sent["max_tokens"].clone(), sent["stop"].clone()),
        (json!(20), json!(["END"]))
    );
    let names = answer.header("x-test-headers").unwrap();
    assert!(
        !names.contains("x-api-key") && !names.contains("anthropic"),
        "{names}"
    );
    assert_eq!(
        answer.header("x-test-authorization"),
        Some(format!("Bearer {WORKER_KEY}").as_str())
    );
    assert_eq!(answer.header("content-type"), Some("application/json"));
    let message = answer.json();
    assert_eq!(message["type"], "message");
    assert_eq!(message["model"], "claude-x");
    assert_eq!(
        message["content"],
        json!([{"type": "text", "text": "Hello there"}])
    );
    assert_eq!(message["stop_reason"], "end_turn");
    assert_eq!(
        message["usage"],
        json!({"input_tokens": USAGE.0, "output_tokens": USAGE.1})
    );

    // Tools both ways, streamed; the key as a bearer token works too.
    let auth = bearer();
    let request = json!({
        "model": "claude-x", "max_tokens": 20, "stream": true,
        "messages": [{"role": "user", "content": "Weather?"}],
        "tools": [{"name": "weather", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "any"},
    });
    let answer = post(
        &h,
        &path,
        &[("Authorization", &auth), (ENGINE, "chat")],
        &request,
    )
    .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.header("content-type"), Some("text/event-stream"));
    let sent = self::sent(&answer);
    assert_eq!(sent["tool_choice"], "required");
    assert_eq!(sent["stream_options"], json!({"include_usage": true}));
    let events = events(&answer);
    let kinds: Vec<&str> = events.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ],
        "{}",
        answer.body
    );
    assert_eq!(events[1].1["content_block"]["name"], "weather");
    let json: String = events[2..4]
        .iter()
        .map(|(_, d)| d["delta"]["partial_json"].as_str().unwrap())
        .collect();
    assert_eq!(json, ARGUMENTS);
    assert_eq!(events[5].1["delta"]["stop_reason"], "tool_use");
    assert_eq!(events[5].1["usage"]["output_tokens"], USAGE.1);
}

#[tokio::test]
async fn messages_errors_are_in_anthropics_shape() {
    let (h, id) = started().await;
    let path = format!("/e/{id}/v1/messages");
    let request =
        json!({"model": "c", "max_tokens": 5, "messages": [{"role": "user", "content": "Hi"}]});
    let anthropic_error = |answer: &Answer, kind: &str| {
        let body = answer.json();
        assert_eq!(body["type"], "error", "{answer:?}");
        assert_eq!(body["error"]["type"], kind, "{answer:?}");
        body["error"]["message"].as_str().unwrap().to_owned()
    };
    let answer = post(&h, &path, &[("x-api-key", "tsk_unknown")], &request).await;
    assert_eq!(answer.status, 401);
    anthropic_error(&answer, "authentication_error");
    let auth = bearer();
    let answer = post(
        &h,
        &path,
        &[("x-api-key", TOKEN), ("Authorization", &auth)],
        &request,
    )
    .await;
    assert_eq!(answer.status, 401, "two keys: {answer:?}");

    let bad =
        json!({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "document"}]}]});
    let answer = post(&h, &path, &[("x-api-key", TOKEN)], &bad).await;
    assert_eq!(answer.status, 400);
    let message = anthropic_error(&answer, "invalid_request_error");
    assert!(message.contains("messages[0].content[0]"), "{message}");
    let answer = post(
        &h,
        &path,
        &[("x-api-key", TOKEN)],
        &json!({"max_tokens": 100000, "messages": []}),
    )
    .await;
    assert_eq!(answer.status, 400);
    assert!(
        anthropic_error(&answer, "invalid_request_error").contains("EINSORA_ENDPOINT_MAX_TOKENS")
    );
    let get = http::get(h.proxy, PUBLIC, &path, &[("x-api-key", TOKEN)]).await;
    assert_eq!(get.status, 405, "{get:?}");
    assert_eq!(h.workload.requests(), 0, "nothing reached the engine");

    let answer = post(
        &h,
        &path,
        &[("x-api-key", TOKEN), (ENGINE, "refuse")],
        &request,
    )
    .await;
    assert_eq!(answer.status, 400);
    assert_eq!(
        anthropic_error(&answer, "invalid_request_error"),
        "Invalid tool_choice: bogus"
    );
    let answer = post(
        &h,
        &path,
        &[("x-api-key", TOKEN), (ENGINE, "garbled")],
        &request,
    )
    .await;
    assert_eq!(answer.status, 502, "{answer:?}");
    assert!(anthropic_error(&answer, "api_error").contains("not JSON"));
    let mut streamed = request.clone();
    streamed["stream"] = json!(true);
    let answer = post(
        &h,
        &path,
        &[("x-api-key", TOKEN), (ENGINE, "garbled")],
        &streamed,
    )
    .await;
    let events = events(&answer);
    let (kind, data) = events.last().unwrap();
    assert_eq!(kind, "error", "{}", answer.body);
    assert_eq!(data["error"]["type"], "api_error");
}

#[tokio::test]
async fn responses_are_answered_in_their_shape_whole_and_streamed() {
    let (h, id) = started().await;
    let path = format!("/e/{id}/v1/responses");
    let auth = bearer();
    let headers = [("Authorization", auth.as_str()), (ENGINE, "chat")];
    let request = json!({"model": "gpt-x", "instructions": "Be brief.", "input": "Hi",
                         "max_output_tokens": 16, "metadata": {"k": "v"}});
    let answer = post(&h, &path, &headers, &request).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let sent = sent(&answer);
    assert_eq!(
        sent["messages"],
        json!([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])
    );
    assert_eq!(sent["max_tokens"], 16);
    let response = answer.json();
    assert_eq!(response["object"], "response");
    assert_eq!(response["status"], "completed");
    assert_eq!(response["metadata"], json!({"k": "v"}));
    assert_eq!(response["output"][0]["content"][0]["text"], "Hello there");
    assert_eq!(response["usage"]["input_tokens"], USAGE.0);
    assert_eq!(response["usage"]["output_tokens"], USAGE.1);

    let request = json!({
        "model": "gpt-x", "stream": true,
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "Weather?"}]}],
        "tools": [{"type": "function", "name": "weather", "parameters": {"type": "object"}}],
    });
    let answer = post(&h, &path, &headers, &request).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let events = events(&answer);
    let kinds: Vec<&str> = events.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(kinds.first(), Some(&"response.created"), "{}", answer.body);
    assert_eq!(kinds.last(), Some(&"response.completed"), "{}", answer.body);
    assert!(kinds.contains(&"response.function_call_arguments.delta"));
    let done = &events.last().unwrap().1["response"];
    assert_eq!(done["output"][0]["type"], "function_call");
    assert_eq!(done["output"][0]["name"], "weather");
    assert_eq!(done["output"][0]["arguments"], ARGUMENTS);
    assert_eq!(done["usage"]["total_tokens"], USAGE.0 + USAGE.1);

    // Its errors are OpenAI's.
    let answer = post(
        &h,
        &path,
        &headers,
        &json!({"input": "x", "previous_response_id": "resp_1"}),
    )
    .await;
    assert_eq!(answer.status, 400);
    assert_eq!(answer.json()["error"]["type"], "invalid_request_error");
    assert!(
        answer.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("previous_response_id")
    );
    let answer = post(
        &h,
        &path,
        &[("Authorization", &auth), (ENGINE, "refuse")],
        &json!({"input": "x"}),
    )
    .await;
    assert_eq!(answer.status, 400);
    assert_eq!(
        answer.json()["error"]["message"],
        "Invalid tool_choice: bogus"
    );
    let answer = post(&h, &path, &[("x-api-key", TOKEN)], &json!({"input": "x"})).await;
    assert_eq!(answer.status, 401, "x-api-key is the Messages API's alone");
}
