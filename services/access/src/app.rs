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

use crate::errors::{Envelope, Failure, REQUEST_ID, RequestId};
use crate::host::{self, Site};
use crate::limits::Limits;
use crate::queue::Queues;
use crate::session::Sessions;
use crate::targets::Targets;
use crate::upstream::Upstream;
use crate::{endpoint, metrics, notebook};
use einsora_runtime::access_url::AccessUrl;

#[derive(Debug)]
pub(crate) struct Proxy {
    pub(crate) public: AccessUrl,
    pub(crate) limits: Limits,
    /// Each endpoint's requests through to its engine, and those waiting for a place.
    pub(crate) queues: Queues,
    pub(crate) upstream: Upstream,
    pub(crate) targets: Targets,
    /// Who bearer credentials belong to, as the api said a moment ago.
    pub(crate) credentials: Arc<crate::credentials::Credentials>,
    /// Each tenant's served models, for the one base URL (`gateway.rs`).
    pub(crate) served: crate::served::ServedModels,
    pub(crate) sessions: Sessions,
    pub(crate) shutdown: Shutdown,
    /// Tokens endpoints' answers used, until sent to the api (`tally.rs`).
    pub(crate) tally: Arc<crate::tally::Tally>,
    /// Inference keys' and tenants' requests and tokens against their limits.
    pub(crate) rate_limits: Arc<crate::ratelimit::RateLimits>,
    /// Endpoints used since the controller last heard (`touch.rs`).
    pub(crate) touched: crate::touch::Touched,
    /// Parked endpoints asked to wake (`wake.rs`).
    pub(crate) wakes: crate::wake::Wakes,
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
    let mut envelope = Envelope::Einsora;
    let answer = async {
        let shutdown = proxy.shutdown.cancelled();
        tokio::select! {
            answer = dispatch(&proxy, request, &id, (&mut route, &mut envelope)) => answer,
            () = shutdown => Err(Failure::unavailable("the proxy is shutting down")),
        }
    }
    .instrument(span.clone())
    .await;
    let mut response = answer.unwrap_or_else(|failure| failure.response(&id, envelope));
    let status = response.status().as_u16();
    einsora_runtime::metrics::http_request(route, method.as_str(), status, started.elapsed());
    tracing::debug!(parent: &span, status, "answered");
    response.headers_mut().insert(REQUEST_ID, id.header());
    response
}

/// Hands the request to its site's handling; `route` says which, for the metrics, and
/// `envelope` which shape its failures are answered in.
async fn dispatch(
    proxy: &Arc<Proxy>,
    request: Request<Body>,
    id: &RequestId,
    (route, envelope): (&mut &'static str, &mut Envelope),
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
            if inference(request.uri().path()) {
                *envelope = Envelope::OpenAi;
            }
            endpoint::handle(proxy, request, id).await
        }
    }
}

/// An inference route's path, whose failures its OpenAI clients parse: an endpoint's
/// (`/e/<id>/…`) or the one base URL's (`/v1/…`).
fn inference(path: &str) -> bool {
    path.starts_with("/e/") || path == "/v1" || path.starts_with("/v1/")
}

/// Puts the caller on the request's log lines, as the api does (`display`).
pub(crate) fn record_caller(tenant_id: &str, user_id: &str, subject: &str) {
    let span = tracing::Span::current();
    span.record("tenant", display(tenant_id));
    span.record("user", display(user_id));
    span.record("subject", display(subject));
}
