//! The installation's metrics on one loopback port (`EINSORA_METRICS_ADDR`, default
//! `127.0.0.1:9464`): each role serves its own on a free loopback port `up` gives it, and
//! `/metrics/<role>` here relays that role's as it answers (Prometheus scrapes each as a
//! target of its own, so `up{role=…}` says which roles answer); `/metrics` is the supervisor's
//! own (its restarts of each role). docs/operations.md, "Metrics".

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use einsora_runtime::http::HttpLimits;
use einsora_runtime::metrics::{self, Counters, Exposition};
use einsora_runtime::shutdown::Shutdown;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::net::TcpListener;

/// A role's scrape waits this long for the role at most.
const ROLE_TIMEOUT: Duration = Duration::from_secs(10);

const LIMITS: HttpLimits = HttpLimits {
    max_connections: 16,
    header_read: Duration::from_secs(10),
};

static RESTARTS: LazyLock<Counters<1>> = LazyLock::new(|| {
    metrics::register(
        "einsora_up_restarts",
        "Times einsora up started a role again after it stopped unexpectedly, by role.",
        Counters::default(),
    )
});

/// The supervisor restarts `role`.
pub fn restarted(role: &str) {
    RESTARTS.get_or_create(&[("role", role.to_owned())]).inc();
}

/// Where each role serves its metrics.
#[derive(Debug)]
struct Roles {
    addrs: BTreeMap<&'static str, SocketAddr>,
    client: Client<HttpConnector, Full<Bytes>>,
}

/// Serves until `shutdown`.
pub async fn serve(
    listener: TcpListener,
    roles: BTreeMap<&'static str, SocketAddr>,
    shutdown: Shutdown,
) -> std::io::Result<()> {
    let roles = Arc::new(Roles {
        addrs: roles,
        client: Client::builder(TokioExecutor::new()).build_http(),
    });
    einsora_runtime::http::serve(
        listener,
        LIMITS,
        None,
        shutdown,
        move |_peer: SocketAddr| {
            let roles = Arc::clone(&roles);
            tower::service_fn(move |request: Request<Incoming>| {
                let roles = Arc::clone(&roles);
                async move { Ok::<_, Infallible>(answer(&roles, &request).await) }
            })
        },
    )
    .await
}

async fn answer(roles: &Roles, request: &Request<Incoming>) -> Response<Full<Bytes>> {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "GET only\n".to_owned());
    }
    let accept = request.headers().get(ACCEPT);
    match request.uri().path() {
        "/metrics" => {
            let exposition = Exposition::accepted(accept.and_then(|v| v.to_str().ok()));
            let mut response = text(StatusCode::OK, metrics::encode(exposition));
            response.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static(exposition.content_type()),
            );
            response
        }
        path => match path
            .strip_prefix("/metrics/")
            .and_then(|r| roles.addrs.get(r))
        {
            Some(addr) => relay(roles, *addr, accept).await,
            None => {
                let paths: Vec<String> = roles
                    .addrs
                    .keys()
                    .map(|r| format!("/metrics/{r}"))
                    .collect();
                let index = format!(
                    "not found: this installation's metrics are at /metrics (einsora up itself) \
                     and {}\n",
                    paths.join(", ")
                );
                text(StatusCode::NOT_FOUND, index)
            }
        },
    }
}

/// The role's `/metrics` as it answers; 503 when it doesn't.
async fn relay(
    roles: &Roles,
    addr: SocketAddr,
    accept: Option<&HeaderValue>,
) -> Response<Full<Bytes>> {
    let mut request = Request::get(format!("http://{addr}/metrics"));
    if let Some(accept) = accept {
        request = request.header(ACCEPT, accept);
    }
    let Ok(request) = request.body(Full::new(Bytes::new())) else {
        return text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "bad request\n".to_owned(),
        );
    };
    let asked = async {
        let response = roles.client.request(request).await.ok()?;
        let status = response.status();
        let content_type = response.headers().get(CONTENT_TYPE).cloned();
        let body = response.into_body().collect().await.ok()?.to_bytes();
        Some((status, content_type, body))
    };
    match tokio::time::timeout(ROLE_TIMEOUT, asked).await {
        Ok(Some((status, content_type, body))) => {
            let mut response = Response::new(Full::new(body));
            *response.status_mut() = status;
            if let Some(content_type) = content_type {
                response.headers_mut().insert(CONTENT_TYPE, content_type);
            }
            response
        }
        _ => text(
            StatusCode::SERVICE_UNAVAILABLE,
            "the role isn't answering (it may be restarting)\n".to_owned(),
        ),
    }
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
