//! The one base URL against real llama.cpp endpoints in Docker: two endpoints serving one
//! model's name are replicas of it at `<access URL>/v1`; `GET /v1/models` lists the name once,
//! with the context length its engines said; a stream open on a replica whose container is
//! killed (`docker kill`) ends with an error event, and new requests are served by the other.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::harness::cli::Cli;
use crate::harness::notebooks::{containers, port, solo, token};
use crate::harness::workloads::wait_for;
use crate::harness::world::{call, tenant};
use einsora_testkit::http::{exchange, request};

const NAME: &str = "tiny-chat";

#[test]
fn two_replicas_of_one_model_one_killed_the_other_serves() {
    let (solo, _leftovers) = solo();
    let acme = tenant(&solo, "dev@acme");
    let cli = Cli::with_token(&solo, token(&acme));
    let mut ids = Vec::new();
    for name in ["llm-a", "llm-b"] {
        let body = json!({ "kind": "endpoint", "name": name, "gpu_class": "cpu-1c-2g",
                           "image": "openai-endpoint",
                           "endpoint": { "model": "tiny.gguf", "served_name": NAME } });
        let made = call(&solo, &acme.token, "POST", "/v1/workloads", Some(body));
        assert_eq!(made.status, 202, "{}", made.body);
        assert_eq!(
            made.json()["endpoint"]["served_name"],
            NAME,
            "{}",
            made.body
        );
        ids.push(made.json()["id"].as_str().unwrap().to_owned());
    }
    for id in &ids {
        wait_for(&solo, &acme.session, id, "running");
        cli.logs_until(id, "serve.py: listening on");
    }
    let host = format!("localhost:{}", port(&solo));
    let bearer = format!("Bearer {}", token(&acme));
    let headers = [
        ("Authorization", bearer.as_str()),
        ("Content-Type", "application/json"),
    ];

    let listed = exchange(
        &solo.access,
        &request("GET", "/v1/models", &host, &headers[..1], ""),
    );
    assert_eq!(listed.status, 200, "{}", listed.body);
    let data = listed.json()["data"].clone();
    assert_eq!(data.as_array().map(Vec::len), Some(1), "{data}");
    assert_eq!(data[0]["id"], NAME);
    assert!(
        data[0]["context_length"].as_u64().is_some_and(|n| n > 0),
        "{data}"
    );

    // Each engine's own list says the same name: it was started with it as its alias.
    for id in &ids {
        let own = exchange(
            &solo.access,
            &request(
                "GET",
                &format!("/e/{id}/v1/models"),
                &host,
                &headers[..1],
                "",
            ),
        );
        assert_eq!(own.status, 200, "{}", own.body);
        assert_eq!(own.json()["data"][0]["id"], NAME, "{}", own.body);
    }

    let chat = |stream: bool, max_tokens: u32| {
        // llama.cpp's `ignore_eos`: the stream runs its length.
        let body = json!({ "model": NAME, "max_tokens": max_tokens, "stream": stream,
                           "ignore_eos": true,
                           "messages": [{ "role": "user", "content": "Count to a thousand." }] });
        request(
            "POST",
            "/v1/chat/completions",
            &host,
            &headers,
            &body.to_string(),
        )
    };
    let mut served = Vec::new();
    for _ in 0..4 {
        let answer = exchange(&solo.access, &chat(false, 4));
        assert_eq!(answer.status, 200, "{}", answer.body);
        assert_eq!(
            answer.json()["object"],
            "chat.completion",
            "{}",
            answer.body
        );
        served.push(answer.header("x-einsora-endpoint").unwrap().to_owned());
    }
    assert!(
        ids.iter().all(|id| served.contains(id)),
        "both serve: {served:?}"
    );

    // A long stream, and the container of the replica serving it killed under it. The tiny
    // model is fast: each engine is slowed to a hundredth of a CPU first, so the stream is
    // still going when its container is killed.
    for id in &ids {
        docker(&["update", "--cpus", "0.01"], id);
    }
    let mut stream = TcpStream::connect(&solo.access).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    stream.write_all(chat(true, 900).as_bytes()).unwrap();
    let mut reader = BufReader::new(stream);
    let mut head = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line.trim().is_empty() {
            break;
        }
        head.push(line.trim().to_owned());
    }
    assert!(head[0].contains(" 200 "), "{head:?}");
    let busy = head
        .iter()
        .find_map(|h| h.strip_prefix("x-einsora-endpoint: "))
        .unwrap_or_else(|| panic!("{head:?}"))
        .to_owned();
    let mut data = Vec::new();
    let mut lines = reader.lines().map_while(Result::ok);
    for line in lines.by_ref() {
        if let Some(d) = line.strip_prefix("data: ") {
            data.push(d.to_owned());
            break;
        }
    }
    solo.expect_log("the endpoint broke off a streamed answer");
    solo.expect_log("the workload did not answer");
    docker(&["kill"], &busy);
    data.extend(lines.filter_map(|l| l.strip_prefix("data: ").map(str::to_owned)));
    assert!(
        !data.iter().any(|d| d == "[DONE]"),
        "it was cut short: {data:?}"
    );
    let last = data.last().cloned().unwrap_or_default();
    let event: serde_json::Value = serde_json::from_str(&last).unwrap_or_default();
    assert_eq!(event["error"]["code"], "upstream_failed", "{data:?}");

    // New requests: all served by the other, whatever the controller knows yet.
    let survivor = ids.iter().find(|id| **id != busy).unwrap();
    docker(&["update", "--cpus", "1"], survivor);
    let deadline = Instant::now() + Duration::from_secs(30);
    for _ in 0..6 {
        let answer = exchange(&solo.access, &chat(false, 4));
        assert_eq!(answer.status, 200, "{}", answer.body);
        assert_eq!(answer.header("x-einsora-endpoint"), Some(survivor.as_str()));
        assert!(Instant::now() < deadline);
    }
}

/// `docker <args> <container>` for each of the endpoint's containers, which must succeed.
fn docker(args: &[&str], id: &str) {
    let all = containers(id);
    assert!(!all.is_empty(), "{id} has a container");
    for container in all {
        let done = Command::new("docker")
            .args(args)
            .arg(&container)
            .output()
            .unwrap();
        assert!(done.status.success(), "docker {args:?}: {done:?}");
    }
}
