//! Scale-to-zero against a real llama.cpp endpoint in Docker: an endpoint that parks after a
//! minute without requests is parked (its container stopped) once it has been idle that long,
//! and a request with an inference key wakes it, is held while it starts and then answered;
//! the timeline names the key's user and the key. Needs the engine, the images and
//! EINSORA_TEST_MODEL, as docker.rs.

use std::time::Duration;

use serde_json::json;

use crate::harness::cli::Cli;
use crate::harness::notebooks::{endpoint_base, solo_with, token};
use crate::harness::workloads::{timeline, wait_for, wait_for_within};
use crate::harness::world::{call, tenant};
use einsora_testkit::http::{exchange, request};

#[test]
fn an_idle_endpoint_parks_and_a_request_wakes_it_naming_the_keys_user() {
    // Passes every second, so it parks within a second or two of its minute.
    let (solo, _leftovers) = solo_with(&[("EINSORA_CONTROLLER_INTERVAL", "1s")]);
    let acme = tenant(&solo, "dev@acme");
    let body = json!({ "kind": "endpoint", "name": "sleepy", "gpu_class": "cpu-1c-2g",
                       "image": "openai-endpoint",
                       "endpoint": { "model": "tiny.gguf", "park_after_idle_s": 60 } });
    let made = call(&solo, &acme.token, "POST", "/v1/workloads", Some(body));
    assert_eq!(made.status, 202, "{}", made.body);
    assert_eq!(
        made.json()["endpoint"]["park_after_idle_s"],
        60,
        "{}",
        made.body
    );
    let id = made.json()["id"].as_str().unwrap().to_owned();
    wait_for(&solo, &acme.session, &id, "running");
    Cli::with_token(&solo, token(&acme)).logs_until(&id, "serve.py: listening on");

    let asked = json!({ "name": "wake", "all_endpoints": true });
    let key = call(
        &solo,
        &acme.session,
        "POST",
        "/v1/inference-keys",
        Some(asked),
    );
    assert_eq!(key.status, 200, "{}", key.body);
    let prefix_of_key = key.json()["inference_key"]["prefix"]
        .as_str()
        .unwrap()
        .to_owned();
    let key = key.json()["key"].as_str().unwrap().to_owned();
    let (host, prefix) = endpoint_base(&solo, &acme.token, &id);
    let chat = || {
        let body = json!({ "messages": [{ "role": "user", "content": "hello" }],
                           "max_tokens": 4 })
        .to_string();
        let auth = format!("Bearer {key}");
        let headers = [
            ("Content-Type", "application/json"),
            ("Authorization", auth.as_str()),
        ];
        let path = format!("{prefix}/chat/completions");
        exchange(
            &solo.access,
            &request("POST", &path, &host, &headers, &body),
        )
    };
    let answer = chat();
    assert_eq!(answer.status, 200, "{}", answer.body);

    // A minute without requests after that one: parked, through the normal stop.
    wait_for_within(
        &solo,
        &acme.session,
        &id,
        "stopped",
        Duration::from_secs(150),
    );
    let parked = timeline(&solo, &acme.session, &id);
    assert!(
        parked
            .iter()
            .any(|e| e == "stopping: parked after 1 min without requests"),
        "{parked:?}"
    );

    // A request wakes it, is held while it starts, and is answered.
    let answer = chat();
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(
        answer.json()["object"],
        "chat.completion",
        "{}",
        answer.body
    );
    let woken = timeline(&solo, &acme.session, &id);
    let expected = format!(
        "pending: woken by a request from dev@acme (inference key \"wake\" ({prefix_of_key}…))"
    );
    assert!(woken.contains(&expected), "{woken:?}");
    assert_eq!(
        woken
            .iter()
            .filter(|e| e.starts_with("pending: woken"))
            .count(),
        1,
        "{woken:?}"
    );
}
