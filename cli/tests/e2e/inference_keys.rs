//! Inference keys against real llama.cpp endpoints in Docker: a key for endpoint A is refused on
//! endpoint B exactly as an unknown endpoint is, and its answers on A count its limits down in
//! the `x-ratelimit-*` headers (requests at once, tokens as the engine counted them) until a
//! 429 says when to retry. Needs the engine, the images and EINSORA_TEST_MODEL, as docker.rs.

use serde_json::{Value, json};

use crate::harness::cli::{Cli, dev_password};
use crate::harness::notebooks::{endpoint_base, solo, token};
use crate::harness::solo::Solo;
use crate::harness::workloads::wait_for;
use crate::harness::world::{call, tenant};
use einsora_testkit::http::{Answer, exchange, request};

fn chat(solo: &Solo, host: &str, prefix: &str, key: &str) -> Answer {
    let body = json!({ "messages": [{ "role": "user", "content": "hello" }], "max_tokens": 8 })
        .to_string();
    let auth = format!("Bearer {key}");
    let headers = [
        ("Content-Type", "application/json"),
        ("Authorization", auth.as_str()),
    ];
    let path = format!("{prefix}/chat/completions");
    exchange(&solo.access, &request("POST", &path, host, &headers, &body))
}

fn header<'a>(answer: &'a Answer, name: &str) -> &'a str {
    answer
        .header(name)
        .unwrap_or_else(|| panic!("no {name}: {} {}", answer.status, answer.body))
}

fn used(answer: &Answer) -> u64 {
    let usage = &answer.json()["usage"];
    let count = |k: &str| {
        usage[k]
            .as_u64()
            .unwrap_or_else(|| panic!("{}", answer.body))
    };
    count("prompt_tokens") + count("completion_tokens")
}

#[test]
fn a_key_for_one_endpoint_is_refused_on_another_and_its_limits_count_down() {
    let (solo, _leftovers) = solo();
    let acme = tenant(&solo, "dev@acme");
    let launch = |name: &str| {
        let body = json!({ "kind": "endpoint", "name": name, "gpu_class": "cpu-1c-2g",
                           "image": "openai-endpoint", "endpoint": { "model": "tiny.gguf" } });
        let made = call(&solo, &acme.token, "POST", "/v1/workloads", Some(body));
        assert_eq!(made.status, 202, "{}", made.body);
        made.json()["id"].as_str().unwrap().to_owned()
    };
    let (a, b) = (launch("a"), launch("b"));
    for id in [&a, &b] {
        wait_for(&solo, &acme.session, id, "running");
        Cli::with_token(&solo, token(&acme)).logs_until(id, "serve.py: listening on");
    }
    let (host, on_a) = endpoint_base(&solo, &acme.token, &a);
    let (_, on_b) = endpoint_base(&solo, &acme.token, &b);
    let unknown = on_b.replace(&b, &einsora_core::ids::WorkloadId::new().to_string());

    // A key for A alone, 4 requests a minute; the tenant's tokens per minute, generous.
    let asked = json!({ "name": "chat", "endpoint_ids": [a],
                        "limits": { "requests_per_minute": 4 } });
    let made = call(
        &solo,
        &acme.session,
        "POST",
        "/v1/inference-keys",
        Some(asked),
    );
    assert_eq!(made.status, 200, "{}", made.body);
    let key = made.json()["key"].as_str().unwrap().to_owned();
    let limits = json!({ "limits": { "tokens_per_minute": 100_000 } });
    let set = call(
        &solo,
        &acme.session,
        "PUT",
        "/v1/inference-limits",
        Some(limits),
    );
    assert_eq!(set.status, 200, "{}", set.body);

    // On B, as on an endpoint that doesn't exist (and counted, as every request is).
    let refused = chat(&solo, &host, &on_b, &key);
    let nowhere = chat(&solo, &host, &unknown, &key);
    assert_eq!(refused.status, 404, "{}", refused.body);
    assert_eq!(refused.body, nowhere.body);
    // The API token still reaches B.
    assert_eq!(chat(&solo, &host, &on_b, token(&acme)).status, 200);

    // The tenant's tokens: down by what the API token's answer on B used, then by exactly
    // what each answer before used, as the engine counted.
    let mut tokens_left: Option<u64> = None;
    for requests_left in ["1", "0"] {
        let answer = chat(&solo, &host, &on_a, &key);
        assert_eq!(answer.status, 200, "{}", answer.body);
        assert_eq!(header(&answer, "x-ratelimit-limit-requests"), "4");
        assert_eq!(
            header(&answer, "x-ratelimit-remaining-requests"),
            requests_left
        );
        let remaining: u64 = header(&answer, "x-ratelimit-remaining-tokens")
            .parse()
            .unwrap();
        match tokens_left {
            None => assert!(remaining < 100_000, "{remaining}"),
            Some(left) => assert_eq!(remaining, left),
        }
        tokens_left = Some(remaining - used(&answer));
    }
    let over = chat(&solo, &host, &on_a, &key);
    assert_eq!(over.status, 429, "{}", over.body);
    let error: Value = over.json()["error"].clone();
    assert_eq!(error["type"], "rate_limit_error");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("this inference key's limit of 4 requests per minute"),
        "{error}"
    );
    let ms: u64 = header(&over, "retry-after-ms").parse().unwrap();
    assert!(ms > 0 && ms <= 60_000, "{ms}");
    assert_eq!(header(&over, "x-ratelimit-remaining-requests"), "0");

    // What the key used is in the API, and its secret nowhere.
    let listed = call(&solo, &acme.session, "GET", "/v1/inference-keys", None);
    assert!(!listed.body.contains(&key[8..]), "{}", listed.body);
}

/// `einsora keys`: a key made for all endpoints with a limit, listed with its owner and limit
/// (never its secret), revoked; the tenant's limits set and shown; a member sets none.
#[test]
fn keys_and_limits_are_managed_from_the_cli() {
    let solo = Solo::start(&[("EINSORA_AUTH_MODE", "dev")]);
    let owner = Cli::new(&solo, "owner");
    owner.login("dev@acme", &dev_password(&solo, "dev@acme"));
    let made = owner.json(&[
        "keys",
        "create",
        "--name",
        "chat",
        "--all-endpoints",
        "--requests-per-minute",
        "5",
    ]);
    let key = made["key"].as_str().unwrap().to_owned();
    assert!(key.starts_with("isk_"), "{made}");
    let id = made["inference_key"]["id"].as_str().unwrap().to_owned();
    let listed = owner.json(&["keys", "list"]);
    let shown = &listed["keys"][0];
    assert_eq!(shown["owner_email"], "dev@acme", "{listed}");
    assert_eq!(shown["limits"]["requests_per_minute"], 5, "{listed}");
    let table = owner.ok(&["keys", "list"]);
    assert!(table.contains("chat") && table.contains("all"), "{table}");
    assert!(!table.contains(&key[8..]), "never the secret: {table}");

    let set = owner.json(&["keys", "limits", "--tokens-per-day", "1000"]);
    assert_eq!(set["limits"]["tokens_per_day"], 1000, "{set}");
    assert_eq!(set["tokens_left_today"], "1000", "64-bit, a string: {set}");
    let shown = owner.ok(&["keys", "limits"]);
    assert!(shown.contains("1000"), "{shown}");
    let cleared = owner.json(&["keys", "limits", "--unlimited"]);
    assert_eq!(cleared["limits"], json!({}), "{cleared}");

    let revoked = owner.json(&["keys", "revoke", &id]);
    assert!(revoked["revoked_at"].is_string(), "{revoked}");
}
