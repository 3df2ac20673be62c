//! The official `openai` Python SDK against the inference gateway, in front of a real llama.cpp
//! endpoint in Docker: models, chat whole and streamed with usage, completions, a bad key's
//! authentication error, the gateway's own errors parsed, and a 429 (one slot, no queue) that
//! the SDK retries after the hinted delay and then is served. The cases are
//! `openai_sdk/check.py`'s functions; scripts/test installs the SDK (pinned) and hands its
//! interpreter over as EINSORA_OPENAI_PYTHON.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::json;

use crate::harness::cli::Cli;
use crate::harness::notebooks::{solo_with, token};
use crate::harness::workloads::wait_for;
use crate::harness::world::{call, tenant};

fn check_py() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/e2e/openai_sdk/check.py"
    ))
}

/// Runs check.py's `cases` (all when empty) with the SDK's interpreter against `base_url`.
fn check(base_url: &str, api_key: &str, cases: &[&str]) -> (bool, String) {
    let python = std::env::var("EINSORA_OPENAI_PYTHON").unwrap_or_else(|_| {
        panic!("EINSORA_OPENAI_PYTHON is not set: run ./scripts/test, which installs openai")
    });
    let out = Command::new(python)
        .arg(check_py())
        .args(cases)
        // Only what this test gives: none of the runner's OpenAI or proxy settings.
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("OPENAI_BASE_URL", base_url)
        .env("OPENAI_API_KEY", api_key)
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

#[test]
fn the_openai_sdk_is_served_by_the_gateway() {
    // One slot and no queue: a second request at once is refused 429, with a hint.
    let (solo, _leftovers) = solo_with(&[("EINSORA_ENDPOINT_QUEUE", "0")]);
    let acme = tenant(&solo, "dev@acme");
    let body = json!({ "kind": "endpoint", "name": "llm", "gpu_class": "cpu-1c-2g",
                       "image": "openai-endpoint",
                       "endpoint": { "model": "tiny.gguf", "slots": 1 } });
    let made = call(&solo, &acme.token, "POST", "/v1/workloads", Some(body));
    assert_eq!(made.status, 202, "{}", made.body);
    assert_eq!(made.json()["endpoint"]["slots"], 1, "{}", made.body);
    let id = made.json()["id"].as_str().unwrap().to_owned();
    wait_for(&solo, &acme.session, &id, "running");
    Cli::with_token(&solo, token(&acme)).logs_until(&id, "serve.py: listening on");
    let grant = call(
        &solo,
        &acme.session,
        "POST",
        &format!("/v1/workloads/{id}/access"),
        Some(json!({})),
    );
    let base_url = grant.json()["endpoint"]["base_url"]
        .as_str()
        .unwrap_or_else(|| panic!("a base URL: {}", grant.body))
        .to_owned();

    let (passed, output) = check(&base_url, token(&acme), &[]);
    eprintln!("{output}");
    assert!(passed, "{output}");
    assert!(
        output.contains("ok a_429_is_retried_after_the_hinted_delay_then_served"),
        "{output}"
    );
}
