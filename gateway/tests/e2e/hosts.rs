//! Over real HTTP: a request naming a host the installation doesn't answer to never reaches
//! the api, whatever its Origin says (DNS rebinding), and the installation's own hosts and
//! origins are the listener's and `EINSORA_PUBLIC_URL`'s, never built from the request.

use crate::fake_api::{self, Seen};
use crate::http::send;
use crate::{JSON, running};

const CREATE: &str = r#"{"kind": "notebook", "name": "nb", "gpu_class": "cpu-4c-16g", "image": "jupyterlab", "notebook": {}}"#;
const LOGIN: &str = r#"{"email": "you@example.com", "password": "correct horse"}"#;

#[tokio::test]
async fn a_foreign_host_with_a_matching_origin_never_reaches_the_api() {
    let seen = Seen::default();
    let public = [("EINSORA_PUBLIC_URL", "https://einsora.test")];
    let running = running::start(fake_api::routes(&seen), &public).await;
    let http = running.http;
    let port = http.port();
    let calls = || seen.0.lock().unwrap().len();

    // A page of rebound.example whose name now resolves to 127.0.0.1: its own origin.
    let rebound = format!("rebound.example:{port}");
    let origin = format!("http://{rebound}");
    let as_rebound = [
        JSON,
        ("host", rebound.as_str()),
        ("origin", origin.as_str()),
    ];
    for (method, path, body) in [
        ("POST", "/v1/workloads", CREATE),
        ("POST", "/v1/sessions", LOGIN),
        ("GET", "/v1/catalog", ""),
        ("GET", "/", ""),
    ] {
        let answer = send(http, method, path, &as_rebound, body).await;
        answer.assert_error(400, "invalid_request");
        assert!(answer.cookie("einsora_session").is_none());
        assert!(
            answer.raw.contains("does not answer to the host"),
            "{}",
            answer.raw
        );
    }
    assert_eq!(calls(), 0, "nothing reached the api");

    // The listener's names, and the public URL's host, each with an origin of the installation.
    let localhost = format!("localhost:{port}");
    let dashboard = format!("http://localhost:{port}");
    let bound = http.to_string();
    for (host, origin) in [
        (localhost.as_str(), dashboard.as_str()),
        (bound.as_str(), dashboard.as_str()),
        ("einsora.test", "https://einsora.test"),
    ] {
        let headers = [JSON, ("host", host), ("origin", origin)];
        let created = send(http, "POST", "/v1/workloads", &headers, CREATE).await;
        assert_eq!(created.status, 202, "{host}: {}", created.raw);
    }
    assert_eq!(calls(), 3);

    // A Host the installation answers to doesn't make another origin its own.
    for (host, origin) in [
        ("einsora.test", "https://rebound.example"),
        (localhost.as_str(), "http://einsora.test"),
        (localhost.as_str(), origin.as_str()),
    ] {
        let headers = [JSON, ("host", host), ("origin", origin)];
        send(http, "POST", "/v1/workloads", &headers, CREATE)
            .await
            .assert_error(403, "forbidden");
    }
    assert_eq!(calls(), 3);
    running.stop().await;
}
