//! Real workloads on a real Docker engine: `einsora up` enrols this machine, whose agent has the
//! docker driver; a JupyterLab notebook and a llama.cpp endpoint run in the images `images/build`
//! made, and open through the access proxy as a browser and an API client would. Needs the
//! engine and the images (the README's test command starts one and builds them) and
//! EINSORA_TEST_MODEL, a small GGUF model.

use std::time::Duration;

use serde_json::json;

use crate::harness::cli::Cli;
use crate::harness::workloads::{timeline, wait_for};
use einsora_testkit::http::{exchange, request};

use crate::harness::notebooks::*;
use crate::harness::wire::events;
use crate::harness::world::{call, tenant};

/// Launched and driven from the CLI, opened with a real HTTP client through the proxy: a cell
/// runs on a kernel over the WebSocket; stopped and started, its files are still there; deleted,
/// nothing of it is left.
#[test]
fn a_notebook_runs_opens_keeps_its_files_and_is_deleted() {
    let (solo, _leftovers) = solo();
    let acme = tenant(&solo, "dev@acme");
    let cli = Cli::with_token(&solo, token(&acme));
    let launched = cli.launch_notebook("nb");
    let id = launched["id"].as_str().unwrap().to_owned();
    wait_for(&solo, &acme.session, &id, "running");

    let link = cli.ok(&["open", &id]);
    let own_origin = format!(
        "http://w-{id}.localhost:{}/_einsora/open?ticket=",
        port(&solo)
    );
    assert!(link.trim().starts_with(&own_origin), "{link}");
    let (host, cookie) = open(&solo, &acme.session, &id);
    let status = notebook(&solo, &host, &cookie, "GET", "/api/status", "");
    assert!(status["started"].is_string(), "{status}");
    assert_eq!(run_cell(&solo, &host, &cookie, "print(6 * 7)"), "42\n");
    let file = json!({ "type": "file", "format": "text", "content": "still here" }).to_string();
    notebook(
        &solo,
        &host,
        &cookie,
        "PUT",
        "/api/contents/kept.txt",
        &file,
    );

    cli.ok(&["stop", &id]);
    wait_for(&solo, &acme.session, &id, "stopped");
    assert!(
        data_dir(&solo, &id).join("kept.txt").is_file(),
        "its data is kept"
    );
    cli.ok(&["start", &id]);
    wait_for(&solo, &acme.session, &id, "running");
    let stale = exchange(
        &solo.access,
        &request("GET", "/api/status", &host, &[("Cookie", &cookie)], ""),
    );
    assert_eq!(stale.status, 401, "a session ends with the run it opened");
    let (host, cookie) = open(&solo, &acme.session, &id);
    let kept = notebook(&solo, &host, &cookie, "GET", "/api/contents/kept.txt", "");
    assert_eq!(kept["content"], "still here");

    cli.ok(&["delete", &id]);
    wait_for(&solo, &acme.session, &id, "deleted");
    assert!(containers(&id).is_empty(), "its container is gone");
    assert!(!data_dir(&solo, &id).exists(), "its data is gone");
    let steps = timeline(&solo, &acme.session, &id);
    assert!(steps[1].ends_with("with docker"), "{steps:?}");
}

/// A llama.cpp endpoint answers chat completions, whole and streamed, to an API token through
/// the proxy, with the request's region, class and fallback; without a token it is 401, with
/// another tenant's 404, and with a revoked one 401.
#[test]
fn an_endpoint_serves_chat_completions_to_api_tokens_only() {
    let (solo, _leftovers) = solo();
    let acme = tenant(&solo, "dev@acme");
    let body = json!({ "kind": "endpoint", "name": "llm", "gpu_class": "cpu-1c-2g",
                       "image": "openai-endpoint", "endpoint": { "model": "tiny.gguf" } });
    let made = call(&solo, &acme.token, "POST", "/v1/workloads", Some(body));
    assert_eq!(made.status, 202, "{}", made.body);
    let id = made.json()["id"].as_str().unwrap().to_owned();
    wait_for(&solo, &acme.session, &id, "running");
    // What its server printed starting is in its logs.
    let listening = "serve.py: listening on";
    Cli::with_token(&solo, token(&acme)).logs_until(&id, listening);
    let (host, prefix) = endpoint_base(&solo, &acme.token, &id);

    let chat = |bearer: Option<&str>, stream: bool| {
        // llama.cpp's `ignore_eos`: the test model's weights are random, and it may end an
        // answer at its first token; the stream is checked for pieces.
        let body = json!({ "messages": [{ "role": "user", "content": "hello" }],
                           "max_tokens": 8, "stream": stream, "ignore_eos": true })
        .to_string();
        let auth = bearer.map(|t| format!("Bearer {t}"));
        let mut headers = vec![("Content-Type", "application/json")];
        if let Some(auth) = &auth {
            headers.push(("Authorization", auth));
        }
        request(
            "POST",
            &format!("{prefix}/chat/completions"),
            &host,
            &headers,
            &body,
        )
    };
    let answer = exchange(&solo.access, &chat(Some(token(&acme)), false));
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(
        answer.json()["object"],
        "chat.completion",
        "{}",
        answer.body
    );
    assert_eq!(answer.header("x-einsora-class"), Some("cpu-1c-2g"));
    // The tokens it said it used are counted in the proxy's metrics.
    let used = answer.json()["usage"]["completion_tokens"]
        .as_u64()
        .unwrap();
    assert!(used > 0, "{}", answer.body);
    let metrics = solo.metrics_addr();
    let page = exchange(
        &metrics,
        &request("GET", "/metrics/access", &metrics, &[], ""),
    );
    let counted =
        format!("einsora_endpoint_tokens_total{{class=\"cpu-1c-2g\",kind=\"completion\"}} {used}");
    assert!(page.body.contains(&counted), "{counted}:\n{}", page.body);
    assert_eq!(answer.header("x-einsora-fallback"), Some("false"));
    assert!(answer.header("x-einsora-region").is_some());
    assert!(answer.header("x-request-id").is_some());
    let (status, data) = events(&solo.access, &chat(Some(token(&acme)), true));
    assert!(status.contains(" 200 "), "{status}");
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"), "{data:?}");
    assert!(data.len() > 2, "streamed in pieces: {data:?}");

    assert_eq!(exchange(&solo.access, &chat(None, false)).status, 401);
    let globex = tenant(&solo, "dev@globex");
    assert_eq!(
        exchange(&solo.access, &chat(Some(token(&globex)), false)).status,
        404
    );
    let tokens = call(&solo, &acme.session, "GET", "/v1/tokens", None).json();
    let laptop = tokens["tokens"][0]["id"].as_str().unwrap().to_owned();
    crate::harness::world::revoke_token(&solo, &acme.session, &laptop);
    // The proxy reuses the api's word on a credential for a second (credentials.rs).
    einsora_testkit::eventually("the revoked token refused", Duration::from_secs(3), || {
        let status = exchange(&solo.access, &chat(Some(token(&acme)), false)).status;
        (status == 401).then_some(())
    });
}
