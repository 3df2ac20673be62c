//! The routes clients use beyond chat and completions, against a real llama.cpp endpoint in
//! Docker (the tiny model: gibberish, but the server, template and protocol are real):
//! embeddings from the same server that generates; tools and tool_choice reaching the engine;
//! Anthropic's Messages API and OpenAI's Responses API answered in their own shapes, whole and
//! streamed, their usage the engine's; and the official `anthropic` Python SDK against the
//! Messages route (`anthropic_sdk/check.py`; scripts/test installs the SDK, pinned, and hands
//! its interpreter over as EINSORA_ANTHROPIC_PYTHON).

use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::harness::cli::Cli;
use crate::harness::notebooks::{endpoint_base, solo, token};
use crate::harness::wire::events;
use crate::harness::workloads::wait_for;
use crate::harness::world::{call, tenant};
use einsora_testkit::http::{Answer, exchange, request};

/// Each streamed event's data, as JSON.
fn data(lines: &[String]) -> Vec<Value> {
    lines
        .iter()
        .filter(|l| l.as_str() != "[DONE]")
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn kinds(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or(""))
        .collect()
}

#[test]
fn the_routes_clients_use_are_served_by_a_real_engine() {
    let (solo, _leftovers) = solo();
    let acme = tenant(&solo, "dev@acme");
    let body = json!({ "kind": "endpoint", "name": "llm", "gpu_class": "cpu-1c-2g",
                       "image": "openai-endpoint", "endpoint": { "model": "tiny.gguf" } });
    let made = call(&solo, &acme.token, "POST", "/v1/workloads", Some(body));
    assert_eq!(made.status, 202, "{}", made.body);
    let id = made.json()["id"].as_str().unwrap().to_owned();
    wait_for(&solo, &acme.session, &id, "running");
    Cli::with_token(&solo, token(&acme)).logs_until(&id, "serve.py: listening on");
    let (host, prefix) = endpoint_base(&solo, &acme.token, &id);
    let bearer = format!("Bearer {}", token(&acme));
    let auth = [("Authorization", bearer.as_str())];
    let api_key = [
        ("x-api-key", token(&acme)),
        ("anthropic-version", "2023-06-01"),
    ];
    let post = |route: &str, headers: &[(&str, &str)], body: &Value| {
        let mut all = vec![("Content-Type", "application/json")];
        all.extend_from_slice(headers);
        let path = format!("{prefix}/{route}");
        request("POST", &path, &host, &all, &body.to_string())
    };
    let send = |route: &str, headers: &[(&str, &str)], body: &Value| -> Answer {
        exchange(&solo.access, &post(route, headers, body))
    };
    let stream = |route: &str, headers: &[(&str, &str)], body: &Value| -> Vec<Value> {
        let (status, lines) = events(&solo.access, &post(route, headers, body));
        assert!(status.contains(" 200 "), "{status}");
        data(&lines)
    };

    // Embeddings, from the server that also generates.
    let answer = send("embeddings", &auth, &json!({"input": ["hello", "world"]}));
    assert_eq!(answer.status, 200, "{}", answer.body);
    let vectors = answer.json()["data"].as_array().unwrap().clone();
    assert_eq!(vectors.len(), 2, "{}", answer.body);
    assert!(
        vectors
            .iter()
            .all(|v| !v["embedding"].as_array().unwrap().is_empty())
    );
    assert!(answer.json()["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
    let hello = json!([{"role": "user", "content": "hello"}]);
    let chat = send(
        "chat/completions",
        &auth,
        &json!({"messages": hello, "max_tokens": 4}),
    );
    assert_eq!(chat.status, 200, "{}", chat.body);

    // Tools and tool_choice reach the engine, which parses them (the tiny model's template shows
    // no tools, and it never calls one): what it says of them comes back as it said it.
    let tools = json!([{"type": "function", "function": {"name": "weather",
                        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]);
    let with_tools = send(
        "chat/completions",
        &auth,
        &json!({"messages": hello, "max_tokens": 4, "tools": tools, "tool_choice": "required"}),
    );
    assert_eq!(with_tools.status, 200, "{}", with_tools.body);
    for (asked, says) in [
        (
            json!({"tools": tools, "tool_choice": "bogus"}),
            "Invalid tool_choice",
        ),
        (
            json!({"tools": [{"type": "bogus"}]}),
            "Unsupported tool type",
        ),
    ] {
        let mut body = json!({"messages": hello, "max_tokens": 4});
        body.as_object_mut()
            .unwrap()
            .extend(asked.as_object().unwrap().clone());
        let refused = send("chat/completions", &auth, &body);
        assert!(refused.status >= 400, "{}", refused.body);
        assert!(refused.body.contains(says), "{}", refused.body);
    }

    // Anthropic's Messages API, whole and streamed. Greedy (temperature 0): the test model's
    // weights are random, and sampling may end an answer at its first token (content is what
    // is checked here).
    let message = json!({"model": "claude-x", "max_tokens": 8, "temperature": 0, "system": "Be brief.",
                         "messages": [{"role": "user", "content": [{"type": "text", "text": "Say"},
                                                                   {"type": "text", "text": "hello."}]}]});
    let answer = send("messages", &api_key, &message);
    assert_eq!(answer.status, 200, "{}", answer.body);
    let whole = answer.json();
    assert_eq!(whole["type"], "message", "{whole}");
    assert_eq!(whole["model"], "claude-x");
    assert_eq!(whole["content"][0]["type"], "text", "{whole}");
    assert!(
        whole["usage"]["input_tokens"].as_u64().unwrap() > 0,
        "{whole}"
    );
    let used = whole["usage"]["output_tokens"].as_u64().unwrap();
    assert!((1..=8).contains(&used), "{whole}");
    let mut streamed = message.clone();
    streamed["stream"] = json!(true);
    let got = stream("messages", &api_key, &streamed);
    let kinds = kinds(&got);
    assert_eq!(kinds.first(), Some(&"message_start"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"message_stop"), "{kinds:?}");
    assert!(kinds.contains(&"content_block_delta"), "{kinds:?}");
    let delta = got.iter().find(|e| e["type"] == "message_delta").unwrap();
    assert!(
        delta["usage"]["output_tokens"].as_u64().unwrap() > 0,
        "{delta}"
    );
    let anthropic_tools = json!([{"name": "weather", "input_schema": {"type": "object"}}]);
    let mut with_tools = message.clone();
    with_tools["tools"] = anthropic_tools;
    with_tools["tool_choice"] = json!({"type": "any"});
    let answer = send("messages", &api_key, &with_tools);
    assert_eq!(answer.status, 200, "{}", answer.body);
    // A tool's result reaches the prompt.
    let mut with_result = with_tools.clone();
    let turns = with_result["messages"].as_array_mut().unwrap();
    turns.push(json!({"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}}]}));
    turns.push(json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny and warm ".repeat(8)}]}));
    let answer = send("messages", &api_key, &with_result);
    assert_eq!(answer.status, 200, "{}", answer.body);
    let input = |v: &Value| v["usage"]["input_tokens"].as_u64().unwrap();
    assert!(input(&answer.json()) > input(&whole) + 8, "{}", answer.body);
    let refused = send(
        "messages",
        &[("x-api-key", "tsk_notAKeyOfAnyone0000000000")],
        &message,
    );
    assert_eq!(refused.status, 401, "{}", refused.body);
    assert_eq!(refused.json()["error"]["type"], "authentication_error");

    // OpenAI's Responses API, whole and streamed; greedy, as above.
    let asked = json!({"model": "m", "instructions": "Be brief.", "input": "Say hello.",
                       "max_output_tokens": 8, "temperature": 0});
    let answer = send("responses", &auth, &asked);
    assert_eq!(answer.status, 200, "{}", answer.body);
    let response = answer.json();
    assert_eq!(response["object"], "response", "{response}");
    assert_eq!(response["output"][0]["type"], "message", "{response}");
    assert!(
        response["usage"]["input_tokens"].as_u64().unwrap() > 0,
        "{response}"
    );
    let mut streamed = asked.clone();
    streamed["stream"] = json!(true);
    let got = stream("responses", &auth, &streamed);
    let kinds = self::kinds(&got);
    assert_eq!(kinds.first(), Some(&"response.created"), "{kinds:?}");
    let last = *kinds.last().unwrap();
    assert!(
        ["response.completed", "response.incomplete"].contains(&last),
        "{kinds:?}"
    );
    assert!(kinds.contains(&"response.output_text.delta"), "{kinds:?}");
    let done = &got.last().unwrap()["response"];
    assert!(
        done["usage"]["output_tokens"].as_u64().unwrap() > 0,
        "{done}"
    );

    // The official Anthropic SDK.
    let base_url = format!("http://{host}{}", prefix.trim_end_matches("/v1"));
    let (passed, output) = anthropic_sdk(&base_url, token(&acme));
    assert!(passed, "{output}");
}

/// Runs `anthropic_sdk/check.py` with the SDK's interpreter against `base_url`.
fn anthropic_sdk(base_url: &str, api_key: &str) -> (bool, String) {
    let python = std::env::var("EINSORA_ANTHROPIC_PYTHON").unwrap_or_else(|_| {
        panic!("EINSORA_ANTHROPIC_PYTHON is not set: run ./scripts/test, which installs anthropic")
    });
    let script = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/e2e/anthropic_sdk/check.py"
    ));
    let out = Command::new(python)
        .arg(script)
        // Only what this test gives: none of the runner's Anthropic or proxy settings.
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("ANTHROPIC_BASE_URL", base_url)
        .env("ANTHROPIC_API_KEY", api_key)
        .env("EINSORA_BAD_KEY", "tsk_notAKeyOfAnyone0000000000")
        .stdin(Stdio::null())
        .output()
        .expect("the SDK's interpreter runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}
