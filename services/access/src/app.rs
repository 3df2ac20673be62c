//! One handler for every request: a request ID, the site from the Host header, then the
//! notebook's or the endpoints' handling; at shutdown a request still waiting is answered 503.
//! Each is counted in `einsora_http_request_duration_seconds` by its site's kind.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use einsora_runtime::shutdown::Shutdown;
use tracing::Instrument;

use crate::errors::{Failure, REQUEST_ID, RequestId};
use crate::host::{self, Site};
use crate::limits::{InFlight, Limits};
use crate::session::Sessions;
use crate::targets::Targets;
use crate::upstream::Upstream;
use crate::{endpoint, metrics, notebook};
use einsora_runtime::access_url::AccessUrl;

#[derive(Debug)]
pub(crate) struct Proxy {
    pub(crate) public: AccessUrl,
    pub(crate) limits: Limits,
    pub(crate) in_flight: InFlight,
    pub(crate) upstream: Upstream,
    pub(crate) targets: Targets,
    pub(crate) sessions: Sessions,
    pub(crate) shutdown: Shutdown,
}

pub(crate) fn router(proxy: Arc<Proxy>) -> axum::Router {
    axum::Router::new().fallback(handle).with_state(proxy)
}

async fn handle(State(proxy): State<Arc<Proxy>>, request: Request) -> Response {
    let id = RequestId::new();
    // The path only: a query may carry a ticket.
    let span = tracing::info_span!(
        "request",
        request_id = id.as_str(),
        method = %request.method(),
        path = request.uri().path(),
        tenant = tracing::field::Empty,
        user = tracing::field::Empty,
        subject = tracing::field::Empty,
    );
    let (started, method) = (Instant::now(), request.method().clone());
    let mut route = "other";
    let answer = async {
        let shutdown = proxy.shutdown.cancelled();
        tokio::select! {
            answer = dispatch(&proxy, request, &id, &mut route) => answer,
            () = shutdown => Err(Failure::unavailable("the proxy is shutting down")),
        }
    }
    .instrument(span.clone())
    .await;
    let mut response = answer.unwrap_or_else(|failure| failure.response(&id));
    let status = response.status().as_u16();
    einsora_runtime::metrics::http_request(route, method.as_str(), status, started.elapsed());
    span.in_scope(|| tracing::debug!(status = response.status().as_u16(), "answered"));
    response.headers_mut().insert(REQUEST_ID, id.header());
    response
}

/// Hands the request to its site's handling; `route` says which, for the metrics.
async fn dispatch(
    proxy: &Proxy,
    request: Request<Body>,
    id: &RequestId,
    route: &mut &'static str,
) -> Result<Response, Failure> {
    let (parts, body) = request.into_parts();
    let site = host::site(&parts, &proxy.public)?;
    let request = Request::from_parts(parts, body);
    match site {
        Site::Notebook(workload) => {
            *route = metrics::Site::Notebook.word();
            notebook::handle(proxy, workload, request, id).await
        }
        Site::Endpoints => {
            *route = metrics::Site::Endpoint.word();
            endpoint::handle(proxy, request, id).await
        }
    }
}

/// Puts the caller on the request's log lines.
pub(crate) fn record_caller(tenant_id: &str, user_id: &str, subject: &str) {
    let span = tracing::Span::current();
    span.record("tenant", tenant_id);
    span.record("user", user_id);
    span.record("subject", subject);
}
