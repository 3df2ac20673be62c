//! One handler for every request: a request ID, the site from the Host header, then the
//! notebook's or the endpoints' handling; at shutdown a request still waiting is answered 503.
//! Each is counted in `einsora_http_request_duration_seconds` by its site's kind. No router:
//! there are no routes to choose among before the site is known, and every request pays for one.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use einsora_runtime::shutdown::Shutdown;
use hyper::body::Incoming;
use tracing::Instrument;
use tracing::field::display;

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

/// The proxy as the HTTP server's service.
#[derive(Debug, Clone)]
pub(crate) struct App(pub(crate) Arc<Proxy>);

impl tower::Service<Request<Incoming>> for App {
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Incoming>) -> Self::Future {
        let proxy = Arc::clone(&self.0);
        Box::pin(async move { Ok(handle(proxy, request.map(Body::new)).await) })
    }
}

async fn handle(proxy: Arc<Proxy>, request: Request) -> Response {
    let id = RequestId::new();
    // The path only: a query may carry a ticket. The ID is written as it is, as the api writes
    // its own, rather than quoted: every request pays for this span.
    let span = tracing::info_span!(
        "request",
        request_id = %id.as_str(),
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
    tracing::debug!(parent: &span, status, "answered");
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

/// Puts the caller on the request's log lines, as the api does (`display`).
pub(crate) fn record_caller(tenant_id: &str, user_id: &str, subject: &str) {
    let span = tracing::Span::current();
    span.record("tenant", display(tenant_id));
    span.record("user", display(user_id));
    span.record("subject", display(subject));
}
