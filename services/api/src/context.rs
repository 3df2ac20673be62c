//! The request context, in one layer around every service: each RPC runs in a tracing span with
//! its request ID (the gateway's `x-request-id`, else a new one) and, once the caller is known,
//! its tenant and subject, so every line the request logs carries them. The same two go back as
//! `x-einsora-tenant` and `x-einsora-subject` response metadata, on answers and errors alike, for
//! the gateway's own log lines (docs/api.md).
//!
//! Of the request's metadata only the request ID is read here: the credentials beside it are
//! secrets and never reach a span.

use std::sync::{Arc, OnceLock};

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use einsora_core::ids::TenantId;
use tonic::service::Routes;
use tracing::Instrument;
use tracing::field::{Empty, display};

pub const REQUEST_ID: &str = "x-request-id";
pub use einsora_proto::metadata::SUBJECT;
pub use einsora_proto::metadata::TENANT;

tokio::task_local! {
    /// The context of the request this task is serving.
    static CURRENT: Arc<Context>;
}

#[derive(Debug)]
struct Context {
    span: tracing::Span,
    principal: OnceLock<Principal>,
}

/// The authenticated caller, as response metadata.
#[derive(Debug)]
struct Principal {
    tenant: HeaderValue,
    subject: HeaderValue,
}

/// Every service of `routes` (those added so far), inside the request context.
pub fn layer(routes: Routes) -> Routes {
    let router = routes.into_axum_router();
    Routes::from(router.layer(axum::middleware::from_fn(in_context)))
}

async fn in_context(request: Request, next: Next) -> Response {
    let id = request_id(request.headers());
    let span = tracing::info_span!(
        "rpc",
        request_id = %id,
        rpc = %request.uri().path(),
        tenant = Empty,
        subject = Empty,
    );
    let context = Arc::new(Context {
        span: span.clone(),
        principal: OnceLock::new(),
    });
    // The handler runs inside this future (tonic answers a unary call only once it returns), so
    // whatever it authenticated is known when the response comes back.
    let served = CURRENT.scope(Arc::clone(&context), next.run(request));
    let mut response = served.instrument(span).await;
    if let Some(principal) = context.principal.get() {
        let headers = response.headers_mut();
        headers.insert(TENANT, principal.tenant.clone());
        headers.insert(SUBJECT, principal.subject.clone());
    }
    response
}

/// Names the authenticated caller on the current request's span and response. Outside a
/// request (a service called in-process) there is nothing to name it on.
pub(crate) fn authenticated(tenant: TenantId, subject: &str) {
    let _outside = CURRENT.try_with(|context| {
        let tenant = tenant.to_string();
        context.span.record("tenant", display(&tenant));
        context.span.record("subject", display(subject));
        let principal = Principal {
            tenant: metadata_value(&tenant),
            subject: metadata_value(subject),
        };
        // A second authentication in one request is the same caller.
        let _first = context.principal.set(principal);
    });
}

/// The gateway's request ID when it looks like one; otherwise (a caller other than the gateway,
/// or a value unsafe to log) a new UUIDv7.
fn request_id(headers: &HeaderMap) -> String {
    let safe = |id: &&str| {
        (1..=64).contains(&id.len())
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    };
    let given = headers.get(REQUEST_ID).and_then(|v| v.to_str().ok());
    given
        .filter(safe)
        .map_or_else(|| uuid::Uuid::now_v7().to_string(), str::to_owned)
}

/// Visible ASCII as it is; any other byte, and `%`, percent-encoded: metadata carries only
/// visible ASCII, and an email may not be.
fn metadata_value(s: &str) -> HeaderValue {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_graphic() && b != b'%' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    HeaderValue::try_from(out).unwrap_or(HeaderValue::from_static(""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gateways_request_id_is_kept_only_when_safe_to_log() {
        let with =
            |id: &str| HeaderMap::from_iter([(REQUEST_ID.parse().unwrap(), id.parse().unwrap())]);
        let theirs = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";
        assert_eq!(request_id(&with(theirs)), theirs);
        for unsafe_id in ["has space", "a\"b", &"x".repeat(65), "tsk_ok;injected=1"] {
            let made = request_id(&with(unsafe_id));
            assert_ne!(made, unsafe_id);
            assert_eq!(uuid::Uuid::parse_str(&made).unwrap().get_version_num(), 7);
        }
        let made = request_id(&HeaderMap::new());
        assert_ne!(made, request_id(&HeaderMap::new()), "a new one each time");
    }

    #[test]
    fn metadata_values_are_visible_ascii() {
        assert_eq!(metadata_value("you@example.com"), "you@example.com");
        assert_eq!(metadata_value("jörg@example.com"), "j%C3%B6rg@example.com");
        assert_eq!(metadata_value("100%@x y"), "100%25@x%20y");
    }
}
