//! A notebook's own site, `w-<id>.localhost`: the ticket's page, then every other request
//! forwarded to the workload's socket for a session opened at this host, while the attempt it
//! opened is still the one running. A VM's host serves its SSH sessions (`ssh.rs`).

use axum::body::Body;
use axum::http::header::{AUTHORIZATION, HOST, HeaderMap, HeaderValue, ORIGIN};
use axum::http::{HeaderName, Request};
use axum::response::Response;
use einsora_proto::common::v1::WorkloadKind;
use uuid::Uuid;

use crate::app::{Proxy, record_caller};
use crate::body::Guarded;
use crate::errors::{Failure, RequestId};
use crate::upstream::LookupError;
use crate::{forward, open, session, ssh};

const SEC_FETCH_SITE: HeaderName = HeaderName::from_static("sec-fetch-site");
const RESERVED: &str = "/_einsora/";

pub(crate) async fn handle(
    proxy: &Proxy,
    workload: Uuid,
    request: Request<Body>,
    id: &RequestId,
) -> Result<Response, Failure> {
    if request.uri().path() == ssh::PATH {
        return ssh::open(proxy, workload, request, id).await;
    }
    let (parts, body) = request.into_parts();
    if parts.uri.path() == open::PATH {
        return open::open(proxy, workload, &parts, id).await;
    }
    if parts.uri.path().starts_with(RESERVED) {
        return Err(Failure::not_found("nothing is served at this path"));
    }
    refuse_cross_origin(&parts.headers, || proxy.public.notebook_origin(workload))?;
    let secure = proxy.public.is_https();
    let Some(found) = proxy.sessions.find(&parts.headers, workload) else {
        return Err(Failure::unauthenticated(
            "open the notebook from the dashboard to use it here",
        ));
    };
    let session = &found.session;
    record_caller(&session.tenant_id, &session.user_id, &session.subject);
    let ended = || {
        Failure::unauthenticated(
            "this notebook has stopped or restarted since it was opened; open it again from the \
             dashboard",
        )
        .with_cleared_cookie(session::clear_cookie(secure))
    };
    let target = match proxy
        .targets
        .resolve(&proxy.upstream, workload, &session.tenant_id, id)
        .await
    {
        Ok(target)
            if target.kind == WorkloadKind::Notebook && target.attempt == session.attempt =>
        {
            target
        }
        Ok(_) | Err(LookupError::Refused) => {
            proxy.sessions.end(&found);
            tracing::info!(workload = %workload, "notebook session ended");
            return Err(ended());
        }
        Err(e) => return Err(e.failure("controller", ended())),
    };

    let mut request = Request::from_parts(parts, body);
    let websocket = forward::is_websocket(request.headers());
    let headers = request.headers_mut();
    forward::remove_hop_by_hop(headers, websocket);
    session::strip_request_cookie(headers);
    rewrite_for_jupyter(headers, &target.token)?;
    // What the session opens ends with it (and so with the proxy).
    let ended = &found.session.ended;
    let sent = forward::send(
        crate::metrics::Site::Notebook,
        &target,
        &proxy.upstream,
        request,
        ended,
    )
    .await;
    let mut response = sent.inspect_err(|_| proxy.targets.forget(workload))?;
    session::strip_set_cookie(response.headers_mut());
    let stop = Box::pin(ended.cancelled());
    Ok(response.map(|body| Body::new(Guarded::new(body, stop))))
}

/// A page on another origin can't use this one's session: browsers say where a request came
/// from, and a page on another port of the same host is same-site, not same-origin. The
/// notebook's own origin is spelled out only for a request that names one.
fn refuse_cross_origin(
    headers: &HeaderMap,
    own_origin: impl FnOnce() -> String,
) -> Result<(), Failure> {
    let cross_site = headers
        .get_all(SEC_FETCH_SITE)
        .iter()
        .any(|v| v != "same-origin" && v != "none");
    let origins = headers.get_all(ORIGIN);
    let other_origin = origins.iter().next().is_some() && {
        let own = own_origin();
        origins.iter().any(|v| v != own.as_str())
    };
    if cross_site || other_origin {
        return Err(Failure::forbidden(
            "requests from other sites are refused at a notebook's host",
        ));
    }
    Ok(())
}

/// Jupyter sees a local client holding its token: `Host: localhost`, a local Origin.
fn rewrite_for_jupyter(headers: &mut HeaderMap, token: &str) -> Result<(), Failure> {
    headers.insert(HOST, HeaderValue::from_static("localhost"));
    if headers.contains_key(ORIGIN) {
        headers.insert(ORIGIN, HeaderValue::from_static("http://localhost"));
    }
    let mut authorization = HeaderValue::from_str(&format!("token {token}"))
        .map_err(|_| Failure::unavailable("the workload isn't answering right now"))?;
    authorization.set_sensitive(true);
    headers.insert(AUTHORIZATION, authorization);
    Ok(())
}
