//! What every request goes through first: a generated X-Request-ID, the caller's address, a
//! tracing span with the request ID (and the api's tenant and subject once known), and the
//! browser protections (crate::hosts): a request that names a host this installation doesn't
//! answer to is refused before anything else (DNS rebinding), and a state-changing request
//! whose `Origin` is not one of the installation's own, `null` included, is refused (an absent
//! Origin, as from the CLI or curl, is fine).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{ConnectInfo, MatchedPath, Request, State};
use axum::http::header::{HOST, ORIGIN};
use axum::http::{HeaderMap, HeaderValue, Method};
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;
use tracing::field::Empty;

use crate::app::Gateway;
use crate::errors::ApiError;
use crate::hosts::Hosts;

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

/// Every host the request names (its one `Host` header, and an absolute target's authority)
/// is one the installation answers to.
fn host_allowed(request: &Request, hosts: &Hosts) -> bool {
    let mut headers = request.headers().get_all(HOST).iter();
    let header = match (headers.next(), headers.next()) {
        (Some(host), None) => match host.to_str() {
            Ok(host) => Some(host),
            Err(_) => return false,
        },
        (None, _) => None,
        (Some(_), Some(_)) => return false,
    };
    let target = request.uri().authority().map(|a| a.as_str());
    let named: Vec<&str> = header.into_iter().chain(target).collect();
    !named.is_empty() && named.iter().all(|host| hosts.answers_to(host))
}

/// `Origin` absent, or one of the installation's own: never built from the request's Host.
fn origin_allowed(headers: &HeaderMap, hosts: &Hosts) -> bool {
    let mut origins = headers.get_all(ORIGIN).iter();
    match (origins.next(), origins.next()) {
        (None, _) => true,
        (Some(origin), None) => origin.to_str().is_ok_and(|o| hosts.is_own_origin(o)),
        (Some(_), Some(_)) => false,
    }
}

const FOREIGN_HOST: &str = "this installation does not answer to the host this request names \
     (it answers to its own address, localhost, and EINSORA_PUBLIC_URL's host)";

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
    // A caller that traces its own requests (W3C `traceparent`) gets this one in its trace.
    einsora_runtime::telemetry::traces::continue_from(&span, headers);
    let (method, path) = (request.method().clone(), request.uri().path().to_owned());
    let route = route_label(&request, &path);
    let refusal = if !host_allowed(&request, &gateway.hosts) {
        Some(ApiError::invalid(FOREIGN_HOST))
    } else if state_changing(&method) && !origin_allowed(headers, &gateway.hosts) {
        Some(ApiError::forbidden(
            "cross-origin requests may not change anything",
        ))
    } else {
        None
    };
    request.extensions_mut().insert(id.clone());
    request.extensions_mut().insert(caller);
    let started = Instant::now();
    let answer = async {
        match refusal {
            Some(refusal) => refusal.into_response(&id),
            None => next.run(request).await,
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
    let status = response.status().as_u16();
    einsora_runtime::metrics::http_request(&route, method.as_str(), status, started.elapsed());
    response
}

/// The request's route for metrics: the template it matched (`/v1/workloads/{id}`), else
/// `dashboard` outside `/v1` and `unmatched` inside it, never the path itself.
fn route_label(request: &Request, path: &str) -> String {
    match request.extensions().get::<MatchedPath>() {
        Some(matched) => matched.as_str().to_owned(),
        None if path == "/v1" || path.starts_with("/v1/") => "unmatched".to_owned(),
        None => "dashboard".to_owned(),
    }
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

    fn solo() -> Hosts {
        Hosts::new("127.0.0.1:8080".parse().unwrap(), None)
    }

    fn to(uri: &str, host_headers: &[&str]) -> Request {
        let mut request = axum::http::Request::builder().uri(uri);
        for host in host_headers {
            request = request.header(HOST, *host);
        }
        request.body(axum::body::Body::empty()).unwrap()
    }

    #[test]
    fn every_host_a_request_names_must_be_answered() {
        let hosts = solo();
        assert!(host_allowed(&to("/v1/me", &["localhost:8080"]), &hosts));
        assert!(host_allowed(
            &to("http://localhost:8080/v1/me", &[]),
            &hosts
        ));
        for (uri, headers) in [
            ("/v1/me", &["evil.example:8080"][..]),
            ("/v1/me", &[]),
            ("/v1/me", &["localhost:8080", "localhost:8080"]),
            ("http://evil.example:8080/v1/me", &["localhost:8080"]),
            ("http://localhost:8080/v1/me", &["evil.example:8080"]),
        ] {
            assert!(
                !host_allowed(&to(uri, headers), &hosts),
                "{uri} {headers:?}"
            );
        }
    }

    #[test]
    fn origins_must_be_absent_or_the_installations_own() {
        let hosts = solo();
        assert!(origin_allowed(&HeaderMap::new(), &hosts));
        for own in ["http://localhost:8080", "http://127.0.0.1:8080"] {
            assert!(
                origin_allowed(&headers(&[("origin", own)]), &hosts),
                "{own}"
            );
        }
        for foreign in ["null", "http://evil.example:8080", "https://localhost:8080"] {
            assert!(
                !origin_allowed(&headers(&[("origin", foreign)]), &hosts),
                "{foreign}"
            );
        }
        let mut two = headers(&[("origin", "http://localhost:8080")]);
        two.append(ORIGIN, HeaderValue::from_static("http://localhost:8080"));
        assert!(!origin_allowed(&two, &hosts), "two Origin headers");
        assert!(state_changing(&Method::POST) && state_changing(&Method::DELETE));
        assert!(!state_changing(&Method::GET));
    }
}
