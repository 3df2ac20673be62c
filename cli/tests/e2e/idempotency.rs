//! Idempotency-Key over real HTTP (docs/api.md, "Idempotency-Key"; ADR 0016): the same key and
//! request get the first answer again and create nothing more, whichever of the user's
//! credentials sends it; another request with the key is a conflict that says so; concurrent
//! repeats create once; another user's same key is theirs; a refusal frees the key; a secret
//! answer isn't kept; and keys expire (`EINSORA_IDEMPOTENCY_TTL`, scaled down to 10 s here).

use std::time::{Duration, Instant};

use einsora_testkit::http::Answer;
use serde_json::{Value, json};

use crate::harness::solo::{Engine, Solo};
use crate::harness::support::Einsora;
use crate::harness::world::{Credential, a_notebook, call, tenant};

const TTL_SECS: u64 = 10;

/// `POST path` as `who` with `Idempotency-Key: key` and `body` sent as it is written.
fn keyed(solo: &Solo, who: &Credential, path: &str, key: &str, body: &str) -> Answer {
    let mut headers = who.headers();
    headers.push(("Content-Type".into(), "application/json".into()));
    headers.push(("Idempotency-Key".into(), key.into()));
    let headers: Vec<(&str, &str)> = headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    solo.request("POST", path, &headers, Some(body))
}

/// How many of `who`'s workloads are called `name`.
fn named(solo: &Solo, who: &Credential, name: &str) -> usize {
    let list = call(solo, who, "GET", "/v1/workloads", None);
    assert_eq!(list.status, 200, "{}", list.body);
    let list = list.json();
    let items = list["workloads"].as_array().expect("a list of workloads");
    items.iter().filter(|w| w["name"] == name).count()
}

fn assert_conflict(answer: &Answer, saying: &str) {
    assert_eq!(answer.status, 409, "{}", answer.body);
    let error = &answer.json()["error"];
    assert_eq!(error["code"], "conflict", "{}", answer.body);
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("Idempotency-Key") && message.contains(saying),
        "{message}"
    );
}

#[test]
fn an_idempotency_key_replays_refuses_scopes_and_expires() {
    let e = Einsora::new();
    let ttl = format!("{TTL_SECS}s");
    let env = [
        ("EINSORA_AUTH_MODE", "dev"),
        ("EINSORA_IDEMPOTENCY_TTL", ttl.as_str()),
    ];
    let solo = Solo::launch(e, Engine::Sqlite, &env);
    let a = tenant(&solo, "dev@acme");
    let b = tenant(&solo, "dev@globex");

    // The first answer, again: the same user through another credential, the same body in
    // another order and spacing.
    let started = Instant::now();
    let body = a_notebook("once").to_string();
    let first = keyed(&solo, &a.token, "/v1/workloads", "create-1", &body);
    assert_eq!(first.status, 202, "{}", first.body);
    assert_eq!(first.header("idempotent-replayed"), None);
    let id = first.json()["id"].as_str().unwrap().to_owned();
    let reordered = r#"{ "image": "jupyterlab", "gpu_class": "cpu-1c-2g",
                         "name": "once", "kind": "notebook" }"#;
    for who in [&a.token, &a.session] {
        let again = keyed(&solo, who, "/v1/workloads", "create-1", reordered);
        assert_eq!(again.status, 202, "{}", again.body);
        assert_eq!(again.header("idempotent-replayed"), Some("true"));
        assert_eq!(
            again.json(),
            first.json(),
            "the first answer, byte for byte"
        );
    }
    assert_eq!(named(&solo, &a.token, "once"), 1);

    // Another request with the key: a conflict naming it, and nothing done.
    for (path, body) in [
        ("/v1/workloads", a_notebook("other")),
        ("/v1/tokens", json!({ "name": "other" })),
    ] {
        let other = keyed(&solo, &a.session, path, "create-1", &body.to_string());
        assert_conflict(&other, "another request");
    }
    assert_eq!(named(&solo, &a.token, "other"), 0);

    // A key the header can't carry is refused, naming the header.
    let long = "k".repeat(256);
    let bad = keyed(&solo, &a.token, "/v1/workloads", &long, &body);
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert!(bad.body.contains("Idempotency-Key"), "{}", bad.body);

    // Another user's same key is their own: same body, their own workload.
    let theirs = keyed(&solo, &b.token, "/v1/workloads", "create-1", &body);
    assert_eq!(theirs.status, 202, "{}", theirs.body);
    assert_eq!(theirs.header("idempotent-replayed"), None);
    assert_ne!(theirs.json()["id"], Value::from(id.clone()));
    assert_eq!(named(&solo, &b.token, "once"), 1);
    assert!(
        started.elapsed() < Duration::from_secs(TTL_SECS),
        "too slow to test before the key expires"
    );

    // A refusal isn't kept: the key is free for the corrected request.
    let wrong = a_notebook("fixed");
    let mut wrong_class = wrong.clone();
    wrong_class["gpu_class"] = json!("no-such-class");
    let refused = keyed(
        &solo,
        &a.token,
        "/v1/workloads",
        "fix-1",
        &wrong_class.to_string(),
    );
    assert_eq!(refused.status, 400, "{}", refused.body);
    let fixed = keyed(
        &solo,
        &a.token,
        "/v1/workloads",
        "fix-1",
        &wrong.to_string(),
    );
    assert_eq!(fixed.status, 202, "{}", fixed.body);

    // An answer with a secret isn't kept: the repeat says it was done, and nothing more is.
    let token = keyed(
        &solo,
        &a.session,
        "/v1/tokens",
        "token-1",
        r#"{"name":"ci"}"#,
    );
    assert_eq!(token.status, 200, "{}", token.body);
    let repeat = keyed(
        &solo,
        &a.session,
        "/v1/tokens",
        "token-1",
        r#"{"name":"ci"}"#,
    );
    assert_conflict(&repeat, "secret");
    assert!(!repeat.body.contains("tsk_"), "{}", repeat.body);
    let tokens = call(&solo, &a.session, "GET", "/v1/tokens", None).json();
    let tokens = tokens["tokens"].as_array().expect("a list of tokens");
    assert_eq!(tokens.iter().filter(|t| t["name"] == "ci").count(), 1);

    // Concurrent repeats create once: each gets the one workload, or is told to retry.
    let race = a_notebook("race").to_string();
    let answers: Vec<Answer> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|_| scope.spawn(|| keyed(&solo, &a.token, "/v1/workloads", "race-1", &race)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut ids = std::collections::BTreeSet::new();
    for answer in &answers {
        match answer.status {
            202 => {
                ids.insert(answer.json()["id"].as_str().unwrap().to_owned());
            }
            _ => {
                assert_conflict(answer, "still in progress");
                assert_eq!(answer.header("retry-after"), Some("1"));
            }
        }
    }
    assert_eq!(ids.len(), 1, "{answers:?}");
    assert_eq!(named(&solo, &a.token, "race"), 1);

    // Expired, the key is new again: another request with it runs.
    let wait = Duration::from_secs(TTL_SECS + 1).saturating_sub(started.elapsed());
    std::thread::sleep(wait);
    let reused = keyed(
        &solo,
        &a.token,
        "/v1/workloads",
        "create-1",
        &a_notebook("later").to_string(),
    );
    assert_eq!(reused.status, 202, "{}", reused.body);
    assert_ne!(reused.json()["id"], Value::from(id));
    assert_eq!(named(&solo, &a.token, "later"), 1);
}
