//! The application over tower, with the api unreachable: routing, the envelope, the edge's
//! refusals, and the OpenAPI document against the router that really serves.

use std::net::SocketAddr;

use axum::body::Body;
use axum::extract::connect_info::MockConnectInfo;
use axum::http::{HeaderMap, Request, StatusCode};
use serde_json::Value as Json;
use tonic::transport::Endpoint;
use tower::ServiceExt;

use super::*;
use crate::hosts::Hosts;

fn app(peer: &str, proxies: &str) -> Router {
    app_with(peer, proxies, None)
}

/// The gateway listening on 127.0.0.1:8080, with `EINSORA_PUBLIC_URL` = `public`.
fn app_with(peer: &str, proxies: &str, public: Option<&str>) -> Router {
    // Nothing listens on port 1: every call fails to connect.
    let channel = Endpoint::from_static("http://127.0.0.1:1").connect_lazy();
    let public = public.map(|url| crate::Origin::parse(url).unwrap());
    let options = Options {
        proxies: TrustedProxies::parse(proxies).unwrap(),
        insecure_http: false,
        hosts: Hosts::new("127.0.0.1:8080".parse().unwrap(), public),
        shutdown: einsora_runtime::shutdown::Shutdown::new(),
    };
    let app = router(Api::load().unwrap(), channel, options).unwrap();
    app.layer(MockConnectInfo(peer.parse::<SocketAddr>().unwrap()))
}

async fn send(app: &Router, request: Request<Body>) -> (StatusCode, HeaderMap, Json) {
    let response = app.clone().oneshot(request).await.unwrap();
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let json = serde_json::from_slice(&bytes).unwrap_or(Json::Null);
    (parts.status, parts.headers, json)
}

/// A request to `localhost:8080`, unless `headers` name another host.
fn request(method: &str, uri: &str, headers: &[(&str, &str)], body: &'static str) -> Request<Body> {
    let mut builder = Request::builder().method(method).uri(uri);
    if !headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("host"))
    {
        builder = builder.header("host", "localhost:8080");
    }
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    builder.body(Body::from(body)).unwrap()
}

const JSON: (&str, &str) = ("content-type", "application/json");

fn assert_error(answer: &(StatusCode, HeaderMap, Json), status: u16, code: &str) {
    let (got, headers, body) = answer;
    assert_eq!(
        (got.as_u16(), body["error"]["code"].as_str()),
        (status, Some(code)),
        "{body}"
    );
    assert_eq!(
        body["error"]["request_id"].as_str(),
        headers["x-request-id"].to_str().ok()
    );
}

#[tokio::test]
async fn the_openapi_document_and_the_router_agree() {
    let app = app("127.0.0.1:5000", "");
    let (status, headers, document) = send(&app, request("GET", OPENAPI_PATH, &[], "")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-type"], "application/json");
    let paths = document["paths"].as_object().unwrap();

    let documented: Vec<(String, String)> = paths
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .unwrap()
                .keys()
                .map(|m| (m.to_ascii_uppercase(), path.clone()))
        })
        .collect();
    let mut routed: Vec<(String, String)> = Api::load()
        .unwrap()
        .routes
        .iter()
        .map(|r| (r.method.to_string(), r.path.clone()))
        .collect();
    routed.push(("GET".into(), OPENAPI_PATH.into()));
    routed.sort();
    let mut sorted = documented.clone();
    sorted.sort();
    assert_eq!(sorted, routed);

    for (path, item) in paths {
        let uri = path.replace("{id}", "some-id");
        let methods: Vec<String> = item
            .as_object()
            .unwrap()
            .keys()
            .map(|m| m.to_ascii_uppercase())
            .collect();
        for method in ["GET", "POST", "PUT", "PATCH", "DELETE"] {
            let body = if item[method.to_ascii_lowercase()]
                .get("requestBody")
                .is_some()
            {
                "{}"
            } else {
                ""
            };
            let answer = send(&app, request(method, &uri, &[JSON], body)).await;
            if !methods.iter().any(|m| m == method) {
                assert_error(&answer, 405, "method_not_allowed");
                let allow = answer.1["allow"].to_str().unwrap();
                assert!(
                    methods.iter().all(|m| allow.contains(m.as_str())),
                    "{path}: {allow}"
                );
            } else if path == OPENAPI_PATH {
                assert_eq!(answer.0, StatusCode::OK);
            } else {
                // Routed all the way to the (unreachable) api; every 503 says when to retry,
                // an idempotent POST's too (its key can't be claimed).
                assert_error(&answer, 503, "unavailable");
                assert_eq!(answer.1["retry-after"], "1", "{method} {path}");
                let keyed = [JSON, ("idempotency-key", "k")];
                let answer = send(&app, request(method, &uri, &keyed, body)).await;
                assert_error(&answer, 503, "unavailable");
                assert_eq!(answer.1["retry-after"], "1", "{method} {path} with a key");
                let keyed = item[method.to_ascii_lowercase()]["parameters"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|p| p["name"] == "Idempotency-Key");
                let route = Api::load()
                    .unwrap()
                    .routes
                    .into_iter()
                    .find(|r| r.method.as_str() == method && r.path == *path);
                assert_eq!(
                    keyed,
                    route.unwrap().takes_idempotency_key(),
                    "{method} {path} documents its Idempotency-Key"
                );
            }
        }
    }
    for unknown in ["/v1/nothing", "/v1/workloads/a/b/c", "/", "/v2/workloads"] {
        assert_error(
            &send(&app, request("GET", unknown, &[], "")).await,
            404,
            "not_found",
        );
    }
}

#[tokio::test]
async fn an_unreachable_api_is_503_with_retry_after() {
    let app = app("127.0.0.1:5000", "");
    let answer = send(&app, request("GET", "/v1/catalog", &[], "")).await;
    assert_error(&answer, 503, "unavailable");
    assert_eq!(answer.1["retry-after"], "1");
}

#[tokio::test]
async fn cross_origin_writes_are_forbidden_and_reads_are_not() {
    let app = app("127.0.0.1:5000", "");
    for origin in ["http://evil.example", "null", "https://localhost:8080"] {
        let answer = send(
            &app,
            request("POST", "/v1/workloads", &[JSON, ("origin", origin)], "{}"),
        )
        .await;
        assert_error(&answer, 403, "forbidden");
        let answer = send(
            &app,
            request("DELETE", "/v1/tokens/t1", &[("origin", origin)], ""),
        )
        .await;
        assert_error(&answer, 403, "forbidden");
    }
    let own = send(
        &app,
        request(
            "POST",
            "/v1/workloads",
            &[JSON, ("origin", "http://localhost:8080")],
            "{}",
        ),
    )
    .await;
    assert_error(&own, 503, "unavailable");
    let read = send(
        &app,
        request(
            "GET",
            "/v1/workloads",
            &[("origin", "http://evil.example")],
            "",
        ),
    )
    .await;
    assert_error(&read, 503, "unavailable");
}

#[tokio::test]
async fn a_foreign_host_is_refused_whatever_its_origin_says() {
    let app = app("127.0.0.1:5000", "");
    let rebound = [("host", "rebound.example:8080")];
    let own_origin = [("origin", "http://rebound.example:8080")];
    for (method, uri, headers, body) in [
        (
            "POST",
            "/v1/workloads",
            [rebound[0], own_origin[0], JSON].to_vec(),
            "{}",
        ),
        ("POST", "/v1/sessions", [rebound[0], JSON].to_vec(), "{}"),
        ("GET", "/v1/me", rebound.to_vec(), ""),
        ("GET", OPENAPI_PATH, rebound.to_vec(), ""),
        ("GET", "/", [rebound[0], PAGE_LOAD].to_vec(), ""),
    ] {
        let answer = send(&app, request(method, uri, &headers, body)).await;
        // 400 before anything else: an unreachable api would have been a 503.
        assert_error(&answer, 400, "invalid_request");
        let message = answer.2["error"]["message"].as_str().unwrap();
        assert!(message.contains("does not answer to the host"), "{message}");
    }
    // The listener's own names are answered.
    for host in ["localhost:8080", "127.0.0.1:8080", "[::1]:8080"] {
        let answer = send(&app, request("GET", "/v1/me", &[("host", host)], "")).await;
        assert_error(&answer, 503, "unavailable");
    }
}

#[tokio::test]
async fn origins_are_the_installations_own_never_the_requests_host() {
    let app = app_with(
        "10.0.0.5:5000",
        "10.0.0.0/8",
        Some("https://einsora.example"),
    );
    let public = ("host", "einsora.example");
    let https = ("x-forwarded-proto", "https");
    let post = |headers: Vec<(&'static str, &'static str)>| {
        let mut all = vec![JSON, https];
        all.extend(headers);
        request("POST", "/v1/workloads", &all, "{}")
    };
    for origin in [
        "https://einsora.example",
        "https://einsora.example:443",
        "http://localhost:8080",
    ] {
        let answer = send(&app, post(vec![public, ("origin", origin)])).await;
        assert_error(&answer, 503, "unavailable");
    }
    for origin in [
        "http://einsora.example",
        "https://evil.example",
        "https://einsora.example:8443",
    ] {
        let answer = send(&app, post(vec![public, ("origin", origin)])).await;
        assert_error(&answer, 403, "forbidden");
    }
    // A Host the installation answers to doesn't make its own origin out of another one.
    let answer = send(
        &app,
        post(vec![
            ("host", "localhost:8080"),
            ("origin", "https://localhost:8080"),
        ]),
    )
    .await;
    assert_error(&answer, 403, "forbidden");
    // Without the public URL the proxied name is foreign.
    let unnamed = app_with("10.0.0.5:5000", "10.0.0.0/8", None);
    let answer = send(
        &unnamed,
        post(vec![public, ("origin", "https://einsora.example")]),
    )
    .await;
    assert_error(&answer, 400, "invalid_request");
}

#[tokio::test]
async fn bodies_that_are_not_json_are_refused_before_the_api() {
    let app = app("127.0.0.1:5000", "");
    for (content_type, body) in [
        ("text/plain", "{}"),
        ("application/x-www-form-urlencoded", "kind=vm"),
        ("text/plain", ""),
    ] {
        let answer = send(
            &app,
            request(
                "POST",
                "/v1/workloads",
                &[("content-type", content_type)],
                body,
            ),
        )
        .await;
        assert_error(&answer, 400, "invalid_request");
    }
    let answer = send(
        &app,
        request(
            "POST",
            "/v1/workloads",
            &[JSON],
            r#"{"kind": "vm", "size": 3}"#,
        ),
    )
    .await;
    assert_error(&answer, 400, "invalid_request");
    assert_eq!(
        answer.2["error"]["message"],
        "field `size`: is not a known field"
    );
}

#[tokio::test]
async fn plain_http_login_is_for_loopback_or_https_through_a_trusted_proxy() {
    let body = r#"{"email": "a@example.com", "password": "pw"}"#;
    let login = |headers: &[(&str, &str)]| {
        let mut all = vec![JSON];
        all.extend_from_slice(headers);
        request("POST", "/v1/sessions", &all, body)
    };
    let remote = app("192.0.2.1:5000", "");
    let answer = send(&remote, login(&[])).await;
    assert_error(&answer, 403, "forbidden");
    assert!(
        answer.2["error"]["message"]
            .as_str()
            .unwrap()
            .contains("HTTPS")
    );
    // A proxy nobody trusts can't vouch for HTTPS.
    assert_error(
        &send(&remote, login(&[("x-forwarded-proto", "https")])).await,
        403,
        "forbidden",
    );

    let proxied = app("10.0.0.5:5000", "10.0.0.0/8");
    let https = [
        ("x-forwarded-proto", "https"),
        ("x-forwarded-for", "192.0.2.1"),
    ];
    assert_error(&send(&proxied, login(&https)).await, 503, "unavailable");
    assert_error(
        &send(&proxied, login(&[("x-forwarded-for", "192.0.2.1")])).await,
        403,
        "forbidden",
    );

    let local = app("127.0.0.1:5000", "");
    assert_error(&send(&local, login(&[])).await, 503, "unavailable");
}

const PAGE_LOAD: (&str, &str) = ("accept", "text/html,application/xhtml+xml,*/*;q=0.8");

async fn body_of(app: &Router, request: Request<Body>) -> (StatusCode, HeaderMap, Bytes) {
    let response = app.clone().oneshot(request).await.unwrap();
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    (parts.status, parts.headers, bytes)
}

#[tokio::test]
async fn the_dashboard_is_served_outside_v1_and_its_routes_survive_a_refresh() {
    let app = app("127.0.0.1:5000", "");
    let index = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../web/index.html")).unwrap();
    for path in [
        "/",
        "/signin",
        "/workloads",
        "/workloads/abc",
        "/usage",
        "/no/such/page",
    ] {
        let (status, headers, body) = body_of(&app, request("GET", path, &[PAGE_LOAD], "")).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        assert_eq!(body.as_ref(), index.as_slice(), "{path}");
        assert_eq!(headers["content-type"], "text/html; charset=utf-8");
        let csp = headers["content-security-policy"].to_str().unwrap();
        assert_eq!(
            csp,
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
             connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
        );
        assert!(!csp.contains("unsafe"));
        assert_eq!(headers["x-frame-options"], "DENY");
        assert_eq!(headers["x-content-type-options"], "nosniff");
        assert!(headers.contains_key("x-request-id"));
    }
    let (status, headers, body) = body_of(&app, request("GET", "/app.js", &[], "")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-type"], "text/javascript; charset=utf-8");
    assert!(std::str::from_utf8(&body).unwrap().contains("import"));
    let (_, headers, _) = body_of(&app, request("GET", "/style.css", &[], "")).await;
    assert_eq!(headers["content-type"], "text/css; charset=utf-8");
}

#[tokio::test]
async fn v1_stays_the_apis_even_for_a_browser() {
    let app = app("127.0.0.1:5000", "");
    for unknown in [
        "/v1/nothing",
        "/v1/workloads/a/b/c",
        "/v1",
        "/v1/index.html",
    ] {
        assert_error(
            &send(&app, request("GET", unknown, &[PAGE_LOAD], "")).await,
            404,
            "not_found",
        );
    }
    // Known API routes are never the page, whatever the Accept.
    assert_error(
        &send(&app, request("GET", "/v1/catalog", &[PAGE_LOAD], "")).await,
        503,
        "unavailable",
    );
    // Writes to a dashboard path are the API's 404, not the page.
    assert_error(
        &send(
            &app,
            request("POST", "/workloads", &[PAGE_LOAD, JSON], "{}"),
        )
        .await,
        404,
        "not_found",
    );
    // A request that doesn't ask for HTML (fetch, curl, the CLI) gets the envelope.
    assert_error(
        &send(
            &app,
            request("GET", "/workloads", &[("accept", "application/json")], ""),
        )
        .await,
        404,
        "not_found",
    );
}
