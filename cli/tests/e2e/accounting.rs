//! Token accounting against a real llama.cpp endpoint in Docker: the tokens recorded (and shown
//! in `GET /v1/usage?tokens=…`) equal the engine's own usage for a whole answer, a stream that
//! didn't ask for usage (and sees none of what the gateway asked for) and a stream that did;
//! for a stream its client leaves, the engine's own prompt count and its count of generated
//! tokens in the last chunk that passed the gateway (at least what the client read, at most
//! what llama.cpp's log says its slot held when it cancelled the task: the tokens it made in
//! the moments before it found its client gone were never sent), and llama.cpp stops long
//! before the tokens it could have generated.

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::cli::Cli;
use crate::harness::notebooks::*;
use crate::harness::solo::Solo;
use crate::harness::wire::events;
use crate::harness::workloads::wait_for;
use crate::harness::world::{Credential, call, tenant};
use einsora_testkit::http::{exchange, request};

/// (requests, prompt tokens, completion tokens) recorded for the tenant today, as the API
/// answers them summed over the range.
fn recorded(solo: &Solo, who: &Credential) -> (u64, u64, u64) {
    let now = time::OffsetDateTime::now_utc();
    let day = |t: time::OffsetDateTime| {
        t.format(&time::format_description::well_known::Rfc3339)
            .unwrap()
    };
    let path = format!(
        "/v1/usage?from={}&to={}&tokens=range",
        day(now - time::Duration::hours(2)),
        day(now + time::Duration::hours(2))
    );
    let answer = call(solo, who, "GET", &path, None);
    assert_eq!(answer.status, 200, "{}", answer.body);
    let number = |row: &Value, field: &str| -> u64 {
        row[field]
            .as_str()
            .map(|s| s.parse().unwrap())
            .or_else(|| row[field].as_u64())
            .unwrap_or(0)
    };
    let rows = answer.json()["tokens"].as_array().unwrap().clone();
    rows.iter().fold((0, 0, 0), |(r, p, c), row| {
        (
            r + number(row, "requests"),
            p + number(row, "prompt_tokens"),
            c + number(row, "completion_tokens"),
        )
    })
}

/// Waits for the proxy's tally of `requests` answers in all to reach the store (it sends every
/// 5 s); what was recorded since `before`.
fn recorded_since(
    solo: &Solo,
    who: &Credential,
    before: (u64, u64, u64),
    requests: u64,
) -> (u64, u64) {
    let now = einsora_testkit::eventually(
        "the answer's tokens recorded",
        Duration::from_secs(30),
        || {
            let now = recorded(solo, who);
            (now.0 >= before.0 + requests).then_some(now)
        },
    );
    assert_eq!(now.0, before.0 + requests, "one request each");
    (now.1 - before.1, now.2 - before.2)
}

fn usage_of(usage: &Value) -> (u64, u64) {
    (
        usage["prompt_tokens"].as_u64().unwrap(),
        usage["completion_tokens"].as_u64().unwrap(),
    )
}

#[test]
fn recorded_tokens_equal_the_engines_own_for_whole_streamed_and_abandoned_answers() {
    let (solo, _leftovers) = solo();
    let acme = tenant(&solo, "dev@acme");
    let body = json!({ "kind": "endpoint", "name": "llm", "gpu_class": "cpu-1c-2g",
                       "image": "openai-endpoint", "endpoint": { "model": "tiny.gguf" } });
    let made = call(&solo, &acme.token, "POST", "/v1/workloads", Some(body));
    assert_eq!(made.status, 202, "{}", made.body);
    let id = made.json()["id"].as_str().unwrap().to_owned();
    wait_for(&solo, &acme.session, &id, "running");
    let cli = Cli::with_token(&solo, token(&acme));
    cli.logs_until(&id, "serve.py: listening on");
    let (host, prefix) = endpoint_base(&solo, &acme.token, &id);
    let auth = format!("Bearer {}", token(&acme));
    let chat = |body: &Value| {
        let headers = [
            ("Content-Type", "application/json"),
            ("Authorization", auth.as_str()),
        ];
        let path = format!("{prefix}/chat/completions");
        request("POST", &path, &host, &headers, &body.to_string())
    };
    // Greedy, so the same request generates the same tokens each time.
    let asked = json!({ "messages": [{ "role": "user", "content": "hello" }],
                        "max_tokens": 8, "temperature": 0 });
    let with = |more: Value| {
        let mut body = asked.clone();
        body.as_object_mut()
            .unwrap()
            .extend(more.as_object().unwrap().clone());
        body
    };

    // Whole: its usage.
    let before = recorded(&solo, &acme.token);
    let answer = exchange(&solo.access, &chat(&asked));
    assert_eq!(answer.status, 200, "{}", answer.body);
    let engines = usage_of(&answer.json()["usage"]);
    assert!(engines.0 > 0 && engines.1 > 0, "{}", answer.body);
    assert_eq!(recorded_since(&solo, &acme.token, before, 1), engines);

    // Streamed without asking for usage: none of it shown, the same tokens recorded.
    let before = recorded(&solo, &acme.token);
    let (status, data) = events(&solo.access, &chat(&with(json!({ "stream": true }))));
    assert!(status.contains(" 200 "), "{status}");
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"), "{data:?}");
    for chunk in &data {
        assert!(
            !chunk.contains("\"usage\"") && !chunk.contains("\"timings\""),
            "what the gateway asked for is taken out: {chunk}"
        );
    }
    assert_eq!(recorded_since(&solo, &acme.token, before, 1), engines);

    // Streamed asking for usage: the client's usage chunk, as recorded.
    let before = recorded(&solo, &acme.token);
    let asking = with(json!({ "stream": true, "stream_options": { "include_usage": true } }));
    let (_, data) = events(&solo.access, &chat(&asking));
    let usage = data
        .iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .find(|chunk| chunk["choices"] == json!([]) && chunk["usage"].is_object())
        .unwrap_or_else(|| panic!("the usage chunk the client asked for: {data:?}"));
    let seen = usage_of(&usage["usage"]);
    assert_eq!(seen, engines, "greedy: the same tokens");
    assert_eq!(recorded_since(&solo, &acme.token, before, 1), seen);

    // Left after a few chunks: the engine stops, and the prompt and the tokens it had
    // generated by then, as its chunks counted them, are recorded. This client asks for the
    // engine's per-chunk counts itself, to see what the engine said.
    let before = recorded(&solo, &acme.token);
    let long = with(
        json!({ "stream": true, "max_tokens": 1500, "timings_per_token": true,
                            "messages": [{ "role": "user", "content": "hello again" }] }),
    );
    let streamed = einsora_testkit::http::stream(&solo.access, &chat(&long));
    assert_eq!(streamed.head.status, 200);
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let line = streamed
            .lines
            .recv_timeout(Duration::from_secs(30))
            .unwrap();
        let chunk = line
            .strip_prefix("data: ")
            .and_then(|d| serde_json::from_str::<Value>(d).ok());
        if let Some(timings) = chunk
            .as_ref()
            .map(|c| &c["timings"])
            .filter(|t| t.is_object())
        {
            let n = |k: &str| timings[k].as_u64().unwrap();
            seen.push((n("cache_n") + n("prompt_n"), n("predicted_n")));
        }
    }
    // The reading thread ends at its next line, and the connection with it.
    drop(streamed);
    let (prompt, completion) = recorded_since(&solo, &acme.token, before, 1);
    // llama.cpp's own count when it let the slot go after cancelling the task: the prompt and
    // every token it had decoded, sent or not.
    let release = |logs: &str| {
        let cancelled = logs.rfind("cancel task")?;
        logs[cancelled..]
            .split("stop processing: n_tokens = ")
            .nth(1)?
            .split(',')
            .next()?
            .trim()
            .parse::<u64>()
            .ok()
    };
    let released = einsora_testkit::eventually_or(
        "the engine cancelling the task and letting its slot go",
        Duration::from_secs(30),
        || release(&cli.ok(&["logs", &id])),
        || cli.ok(&["logs", &id]),
    );
    let (seen_prompt, seen_completion) = *seen.last().unwrap();
    eprintln!(
        "left: recorded {prompt} + {completion}; the client saw {seen_completion}; the engine's \
         slot held {released}"
    );
    assert_eq!(prompt, seen_prompt, "the engine's prompt count");
    // What the engine said in the last chunk that passed the gateway: at least what the
    // client read, at most what the engine had decoded when it found its client gone.
    assert!(
        (seen_completion..=released - prompt).contains(&completion),
        "recorded {completion}; the client saw {seen_completion}, the engine's slot held \
         {released} with the prompt's {prompt}"
    );
    assert!(
        released - prompt < 1500 / 2,
        "the engine stopped long before max_tokens: {released}"
    );
}
