//! `GET /_einsora/open?ticket=…` at a notebook's host: the one-time ticket becomes a session.
//! The answer is a page from the workload's own origin that moves on to `/` by itself, so the
//! SameSite=Strict cookie goes with the next request (a redirect from the dashboard's site would
//! not carry it) and the ticket's URL leaves no history entry.

use axum::body::Body;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue, SET_COOKIE};
use axum::http::request::Parts;
use axum::http::{HeaderName, Method};
use axum::response::Response;
use einsora_proto::common::v1::WorkloadKind;
use uuid::Uuid;

use crate::app::Proxy;
use crate::errors::{Failure, RequestId};
use crate::session::{self, Session};
use crate::upstream::Target;
use einsora_runtime::shutdown::Shutdown;

pub(crate) const PATH: &str = "/_einsora/open";

const SPENT: &str = "this link has expired or was already used; open the notebook again from the \
     dashboard";

/// Cross-site requests are fine here: the link comes from the dashboard, and the ticket it
/// carries is the credential.
pub(crate) async fn open(
    proxy: &Proxy,
    workload: Uuid,
    parts: &Parts,
    id: &RequestId,
) -> Result<Response, Failure> {
    if parts.method != Method::GET {
        return Err(Failure::method_not_allowed());
    }
    let ticket = parts
        .uri
        .query()
        .and_then(|q| form_urlencoded::parse(q.as_bytes()).find(|(k, _)| k == "ticket"))
        .map(|(_, ticket)| ticket)
        .filter(|ticket| !ticket.is_empty())
        .ok_or_else(|| Failure::unauthenticated(SPENT))?;
    let (session_id, target, _) = redeem(
        proxy,
        (workload, WorkloadKind::Notebook),
        &ticket,
        id,
        (SPENT, "this notebook isn't running"),
    )
    .await?;
    tracing::info!(workload = %workload, attempt = target.attempt, "notebook opened");
    let cookie = session::set_cookie(&session_id, proxy.public.is_https());
    page(cookie).map_err(|e| {
        tracing::error!(error = %e, "no randomness for a nonce");
        Failure::unavailable("the proxy can't open sessions right now; try again shortly")
    })
}

/// A one-time ticket for `workload`, running as `kind`, redeemed into a session: its ID (a
/// notebook's cookie), the workload's target, and what ends with the session. `refusals` are
/// the words for a spent ticket and for a workload not running as `kind`.
pub(crate) async fn redeem(
    proxy: &Proxy,
    (workload, kind): (Uuid, WorkloadKind),
    ticket: &str,
    id: &RequestId,
    (spent, not_running): (&'static str, &'static str),
) -> Result<(String, Target, Shutdown), Failure> {
    let (caller, grant) = proxy
        .upstream
        .redeem(workload, ticket, id)
        .await
        .map_err(|e| e.failure("api", Failure::unauthenticated(spent)))?;
    crate::app::record_caller(&caller.tenant_id, &caller.user_id, &caller.subject);
    let not_running = || Failure::not_found(not_running);
    let target = proxy
        .upstream
        .resolve(workload, &caller.tenant_id, id)
        .await
        .map_err(|e| e.failure("controller", not_running()))?;
    if target.kind != kind {
        return Err(not_running());
    }
    let ended = proxy.shutdown.child();
    let opened = proxy.sessions.open(Session {
        tenant_id: caller.tenant_id,
        user_id: caller.user_id,
        subject: caller.subject,
        workload,
        attempt: target.attempt,
        expires: std::time::Instant::now() + session::LIFETIME,
        grant,
        ended: ended.clone(),
    });
    let session_id = opened.map_err(|e| {
        tracing::error!(error = %e, "no randomness for a session ID");
        Failure::unavailable("the proxy can't open sessions right now; try again shortly")
    })?;
    Ok((session_id, target, ended))
}

fn page(cookie: HeaderValue) -> std::io::Result<Response> {
    let nonce = session::random_hex::<16>()?;
    let html = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>Opening the notebook</title>\
         </head><body><p>Opening the notebook… <a href=\"/\">Continue</a></p>\
         <script nonce=\"{nonce}\">location.replace(\"/\")</script></body></html>"
    );
    let csp = format!(
        "default-src 'none'; script-src 'nonce-{nonce}'; base-uri 'none'; form-action 'none'; \
         frame-ancestors 'none'"
    );
    let mut response = Response::new(Body::from(html));
    let headers = response.headers_mut();
    let fixed = [
        (CONTENT_TYPE, "text/html; charset=utf-8"),
        (CACHE_CONTROL, "no-store"),
        (HeaderName::from_static("referrer-policy"), "no-referrer"),
        (HeaderName::from_static("x-content-type-options"), "nosniff"),
    ];
    for (name, value) in fixed {
        headers.insert(name, HeaderValue::from_static(value));
    }
    let csp = HeaderValue::from_str(&csp).expect("hex is a header value");
    headers.insert(HeaderName::from_static("content-security-policy"), csp);
    headers.insert(SET_COOKIE, cookie);
    Ok(response)
}
