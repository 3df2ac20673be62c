//! What every request goes through first: a generated X-Request-ID, the caller's address, a
//! tracing span with the request ID (and the api's tenant and subject once known), and the
//! browser protection against cross-site writes: a state-changing request whose `Origin` is
//! foreign or `null` is refused (an absent Origin, as from the CLI or curl, is fine).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::header::{HOST, ORIGIN};
use axum::http::{HeaderMap, HeaderValue, Method};
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;
use tracing::field::Empty;

use crate::app::Gateway;
use crate::errors::ApiError;

pub(crate) const REQUEST_ID: &str = "x-request-id";

/// The ID the gateway gives a request: a UUIDv7, on its response, log lines and api call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RequestId(String);

impl RequestId {
    pub(crate) fn generate() -> Self {
        RequestId(uuid::Uuid::now_v7().to_string())
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

/// Who is calling, as far as the gateway can tell.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Caller {
    pub(crate) addr: IpAddr,
    /// The request reached the edge over HTTPS (through a trusted proxy).
    pub(crate) https: bool,
}

/// A caller's own X-Request-ID, if it is safe to log.
fn client_request_id(headers: &HeaderMap) -> Option<&str> {
    let id = headers.get(REQUEST_ID)?.to_str().ok()?;
    let safe = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    (1..=64)
        .contains(&id.len())
        .then_some(id)
        .filter(|id| id.chars().all(safe))
}

fn state_changing(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// `Origin` absent, or equal to the gateway's own origin as the request addressed it.
fn origin_allowed(headers: &HeaderMap, https: bool) -> bool {
    let Some(origin) = headers.get(ORIGIN) else {
        return true;
    };
    let (Ok(origin), Some(host)) = (origin.to_str(), headers.get(HOST)) else {
        return false;
    };
    let scheme = if https { "https" } else { "http" };
    let own = format!("{scheme}://{}", host.to_str().unwrap_or_default());
    normalise(origin) == normalise(&own)
}

fn normalise(origin: &str) -> String {
    let origin = origin.to_ascii_lowercase();
    let default_port = [("http://", ":80"), ("https://", ":443")]
        .into_iter()
        .find(|(scheme, port)| origin.starts_with(scheme) && origin.ends_with(port));
    match default_port {
        Some((_, port)) => origin[..origin.len() - port.len()].to_owned(),
        None => origin,
    }
}

pub(crate) async fn edge(
    State(gateway): State<Arc<Gateway>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    mut request: Request,
    next: Next,
) -> Response {
    let id = RequestId::generate();
    let headers = request.headers();
    let caller = Caller {
        addr: gateway.proxies.client(peer.ip(), headers),
        https: gateway.proxies.https(peer.ip(), headers),
    };
    let span = tracing::info_span!(
        "request",
        request_id = id.as_str(),
        client_request_id = Empty,
        tenant = Empty,
        subject = Empty,
    );
    if let Some(theirs) = client_request_id(headers) {
        span.record("client_request_id", theirs);
    }
    let (method, path) = (request.method().clone(), request.uri().path().to_owned());
    let foreign = state_changing(&method) && !origin_allowed(headers, caller.https);
    request.extensions_mut().insert(id.clone());
    request.extensions_mut().insert(caller);
    let started = Instant::now();
    let answer = async {
        if foreign {
            ApiError::forbidden("cross-origin requests may not change anything").into_response(&id)
        } else {
            next.run(request).await
        }
    };
    let mut response = answer.instrument(span.clone()).await;
    if let Ok(value) = HeaderValue::from_str(id.as_str()) {
        response.headers_mut().insert(REQUEST_ID, value);
    }
    span.in_scope(|| {
        let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
        // The path only: a query string is the caller's to keep.
        let status = response.status().as_u16();
        tracing::info!(%method, path, %caller.addr, status, elapsed_ms, "answered");
    });
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.insert(*k, v.parse().unwrap());
        }
        map
    }

    #[test]
    fn a_callers_request_id_is_kept_only_when_safe() {
        for good in ["abc", "A.b_c-9", &"x".repeat(64)] {
            assert_eq!(
                client_request_id(&headers(&[(REQUEST_ID, good)])),
                Some(good)
            );
        }
        for bad in ["", "has space", "semi;colon", "ünï", &"x".repeat(65), "a/b"] {
            let map = HeaderMap::from_iter(
                HeaderValue::from_bytes(bad.as_bytes())
                    .ok()
                    .map(|v| (REQUEST_ID.parse().unwrap(), v)),
            );
            assert_eq!(client_request_id(&map), None, "{bad:?}");
        }
    }

    #[test]
    fn generated_ids_are_uuid_v7_and_unique() {
        let (a, b) = (RequestId::generate(), RequestId::generate());
        assert_ne!(a, b);
        let parsed = uuid::Uuid::parse_str(a.as_str()).unwrap();
        assert_eq!(parsed.get_version_num(), 7);
    }

    #[test]
    fn origins_must_be_absent_or_our_own() {
        let host = ("host", "localhost:8080");
        assert!(origin_allowed(&headers(&[host]), false));
        assert!(origin_allowed(
            &headers(&[host, ("origin", "http://localhost:8080")]),
            false
        ));
        assert!(origin_allowed(
            &headers(&[host, ("origin", "HTTP://LOCALHOST:8080")]),
            false
        ));
        for foreign in [
            "null",
            "http://evil.example",
            "https://localhost:8080",
            "http://localhost:8081",
        ] {
            assert!(
                !origin_allowed(&headers(&[host, ("origin", foreign)]), false),
                "{foreign}"
            );
        }
        let https = [
            ("host", "einsora.example"),
            ("origin", "https://einsora.example:443"),
        ];
        assert!(origin_allowed(&headers(&https), true));
        assert!(!origin_allowed(&headers(&https), false));
        assert!(
            !origin_allowed(&headers(&[("origin", "http://x")]), false),
            "no Host"
        );
        assert!(state_changing(&Method::POST) && state_changing(&Method::DELETE));
        assert!(!state_changing(&Method::GET));
    }
}
