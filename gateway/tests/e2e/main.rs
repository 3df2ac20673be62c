//! End to end over real HTTP and real gRPC: the real gateway (`einsora_gateway::serve`) in front
//! of a tonic server with canned answers, joined by mutual TLS from a fresh installation CA.

// A test harness: a failed unwrap is a failed test, and it reads its own environment.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod fake_api;
mod hosts;
mod http;
mod login_flood;
mod running;

use einsora_gateway::Config;
use einsora_runtime::grpc::InternalTls;
use einsora_runtime::shutdown::Shutdown;
use einsora_testkit::logs::{Captured, Format};
use fake_api::{CSRF, KNOWN_CLIENT, SESSION_ID, Seen};
use http::send;
use serde_json::json;

use einsora_testkit::settings_in as settings;

const JSON: (&str, &str) = ("content-type", "application/json");
const TOKEN: &str = "Bearer tsk_e2eSecretToken";

#[tokio::test]
async fn the_gateway_serves_the_api_over_http_and_grpc() {
    let logs = Captured::global(
        "trace,h2=info,hyper=info,tower=info,rustls=info",
        Format::Json,
    );
    let seen = Seen::default();
    let running = running::start(fake_api::routes(&seen), &[]).await;
    let http = running.http;

    // A GET, transcoded both ways.
    let catalog = send(
        http,
        "GET",
        "/v1/catalog",
        &[("x-request-id", "my-trace.42")],
        "",
    )
    .await;
    assert_eq!(catalog.status, 200, "{}", catalog.raw);
    assert_eq!(catalog.header("content-type"), "application/json");
    assert_eq!(
        catalog.body["regions"],
        json!([{ "name": "local", "is_default": true }])
    );
    assert_eq!(catalog.body["classes"][0]["accelerator"], "cpu");
    assert_eq!(catalog.body["classes"][0]["devices"], 0);
    assert!(
        catalog.body["classes"][0]
            .get("unified_memory_gib")
            .is_none()
    );
    let id = catalog.header("x-request-id").to_owned();
    assert_eq!(uuid::Uuid::parse_str(&id).unwrap().get_version_num(), 7);
    assert_ne!(id, "my-trace.42");
    let metadata = seen.last();
    assert_eq!(metadata.get("x-request-id").unwrap(), id.as_str());
    assert_eq!(metadata.get("x-einsora-client-addr").unwrap(), "127.0.0.1");

    // A POST with a body: 202 and the workload, with the credentials passed on.
    let create = r#"{"kind": "notebook", "name": "nb", "gpu_class": "cpu-4c-16g", "image": "jupyterlab", "notebook": {}}"#;
    let headers = [JSON, ("authorization", TOKEN), ("x-csrf-token", CSRF)];
    let created = send(http, "POST", "/v1/workloads", &headers, create).await;
    assert_eq!(created.status, 202, "{}", created.raw);
    assert_eq!(created.body["state"], "pending");
    assert_eq!(created.body["kind"], "notebook");
    assert_eq!(created.body["version"], "1");
    assert_eq!(created.body["created_at"], "2025-01-31T09:30:00Z");
    let metadata = seen.last();
    assert_eq!(metadata.get("authorization").unwrap(), TOKEN);
    assert_eq!(metadata.get("x-einsora-csrf").unwrap(), CSRF);
    assert!(metadata.get("x-einsora-session").is_none());

    // A streaming route: one page as JSON; following, NDJSON, one page a line, an error last.
    let page = send(http, "GET", "/v1/workloads/w1/logs?tail=5", &[], "").await;
    assert_eq!(page.status, 200, "{}", page.raw);
    assert_eq!(page.header("content-type"), "application/json");
    assert_eq!(page.body["lines"][0]["text"], "line 1");
    let follow = "/v1/workloads/w1/logs?follow=true";
    let followed = send(http, "GET", follow, &[], "").await;
    assert_eq!(followed.status, 200, "{}", followed.raw);
    assert_eq!(followed.header("content-type"), "application/x-ndjson");
    let lines: Vec<serde_json::Value> = followed
        .raw
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{}", followed.raw);
    assert_eq!(lines[1]["lines"][0]["text"], "line 2");
    assert_eq!(lines[1]["next_after"], "2");
    assert_eq!(lines[2]["error"]["code"], "not_found");
    assert_eq!(
        lines[2]["error"]["request_id"],
        followed.header("x-request-id")
    );

    // Errors, per the table.
    let missing = send(http, "GET", "/v1/workloads/nope", &[], "").await;
    missing.assert_error(404, "not_found");
    assert_eq!(missing.body["error"]["message"], "no workload nope");
    send(http, "POST", "/v1/workloads/w1/stop", &[], "")
        .await
        .assert_error(409, "invalid_transition");
    let limited = send(http, "GET", "/v1/workloads", &[], "").await;
    limited.assert_error(429, "rate_limited");
    assert_eq!(limited.header("retry-after"), "7");
    let broken = send(http, "DELETE", "/v1/workloads/w1", &[], "").await;
    broken.assert_error(500, "internal");
    assert!(
        !broken.raw.contains("secret/path"),
        "details stay in the log"
    );
    send(
        http,
        "POST",
        "/v1/workloads",
        &[JSON, ("origin", "http://evil.example")],
        create,
    )
    .await
    .assert_error(403, "forbidden");

    // Login: the cookie from session_id, the session as the body, and the cookie used after.
    let login = r#"{"email": "you@example.com", "password": "correct horse"}"#;
    let session = send(http, "POST", "/v1/sessions", &[JSON], login).await;
    assert_eq!(session.status, 200, "{}", session.raw);
    assert_eq!(
        session.header("set-cookie"),
        format!("einsora_session={SESSION_ID}; HttpOnly; SameSite=Strict; Path=/; Max-Age=604800")
    );
    assert_eq!(session.cookie("einsora_client"), Some(KNOWN_CLIENT));
    assert!(
        session.headers.get_all("set-cookie").iter().any(|c| c
            == format!(
                "einsora_client={KNOWN_CLIENT}; HttpOnly; SameSite=Strict; Path=/v1/sessions; \
                 Max-Age=7776000"
            )
            .as_str()),
        "{:?}",
        session.headers
    );
    assert_eq!(session.body["csrf_token"], CSRF);
    assert_eq!(session.body["me"]["email"], "you@example.com");
    assert!(
        !session.raw.contains(SESSION_ID),
        "the session ID never reaches a body"
    );
    // The proof of that sign-in goes back to the api with the next Login, and only with it.
    let known = format!("einsora_client={KNOWN_CLIENT}");
    let wrong = r#"{"email": "you@example.com", "password": "wrong"}"#;
    send(
        http,
        "POST",
        "/v1/sessions",
        &[JSON, ("cookie", &known)],
        wrong,
    )
    .await
    .assert_error(401, "unauthenticated");
    let presented = seen.last();
    assert_eq!(
        presented.get("x-einsora-known-client").unwrap(),
        KNOWN_CLIENT
    );
    let cookie = format!("theme=dark; einsora_session={SESSION_ID}; {known}");
    let me = send(http, "GET", "/v1/me", &[("cookie", &cookie)], "").await;
    assert_eq!(
        (me.status, me.body["user_id"].as_str()),
        (200, Some("user-1")),
        "{}",
        me.raw
    );
    assert!(seen.last().get("x-einsora-known-client").is_none());
    send(http, "GET", "/v1/me", &[], "")
        .await
        .assert_error(401, "unauthenticated");
    let logout = send(
        http,
        "DELETE",
        "/v1/sessions/current",
        &[("cookie", &cookie), ("x-csrf-token", CSRF)],
        "",
    )
    .await;
    assert_eq!(logout.status, 200);
    assert!(
        logout
            .header("set-cookie")
            .starts_with("einsora_session=; ")
    );
    assert!(logout.header("set-cookie").contains("Max-Age=0"));

    running.stop().await;

    let text = logs.text();
    for secret in [
        SESSION_ID,
        CSRF,
        KNOWN_CLIENT,
        "correct horse",
        "tsk_e2eSecretToken",
    ] {
        assert!(!text.contains(secret), "a secret reached the log");
    }
    let line = text
        .lines()
        .find(|l| l.contains(&id) && l.contains("answered"))
        .expect("the request's log line");
    assert!(
        line.contains(r#""client_request_id":"my-trace.42""#),
        "{line}"
    );
    assert!(
        line.contains(r#""tenant":"tenant-1""#) && line.contains(r#""subject":"user-1""#),
        "{line}"
    );
    assert!(
        text.contains("disk full"),
        "the full error is in the operator's log"
    );
}

#[tokio::test]
async fn run_checks_certificates_then_names_a_port_in_use() {
    let dir = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let settings = settings(dir.path(), &[("EINSORA_HTTP_ADDR", &addr)]);
    let run = || einsora_gateway::run(Config::from_settings(&settings).unwrap(), Shutdown::new());
    let error = run().await.unwrap_err();
    assert!(
        format!("{error:#}").contains("EINSORA_PKI_DIR"),
        "{error:#}"
    );
    InternalTls::from_settings(&settings)
        .unwrap()
        .init()
        .unwrap();
    let error = run().await.unwrap_err();
    assert!(
        format!("{error:#}").contains("EINSORA_HTTP_ADDR"),
        "{error:#}"
    );
}

#[test]
fn bad_settings_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("EINSORA_TRUSTED_PROXIES", "10.0.0.0/40"),
        ("EINSORA_INSECURE_HTTP", "yes"),
        ("EINSORA_HTTP_ADDR", "localhost"),
        ("EINSORA_PUBLIC_URL", "einsora.example"),
        ("EINSORA_PUBLIC_URL", "https://einsora.example/dashboard"),
        ("EINSORA_PUBLIC_URL", "https://einsora.example:0"),
    ];
    for (name, value) in cases {
        let error = Config::from_settings(&settings(dir.path(), &[(name, value)])).unwrap_err();
        assert_eq!(error.setting(), name);
    }
    let path = [("EINSORA_PUBLIC_URL", "https://einsora.example/dashboard")];
    let error = Config::from_settings(&settings(dir.path(), &path)).unwrap_err();
    assert!(error.to_string().contains("must be an origin"), "{error}");
    let cfg = Config::from_settings(&settings(
        dir.path(),
        &[
            ("EINSORA_TRUSTED_PROXIES", "10.0.0.0/8, ::1"),
            ("EINSORA_INSECURE_HTTP", "true"),
            ("EINSORA_PUBLIC_URL", "https://Einsora.Example/"),
        ],
    ))
    .unwrap();
    assert!(cfg.insecure_http);
    let public = einsora_gateway::Origin::parse("https://einsora.example").unwrap();
    assert_eq!(cfg.public_url, Some(public));
    assert_eq!(cfg.http_addr.to_string(), "127.0.0.1:8080");
    let solo = Config::from_settings(&settings(dir.path(), &[])).unwrap();
    assert_eq!(solo.public_url, None);
}
