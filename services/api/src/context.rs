//! The request context, in one layer around every service: each RPC runs in a tracing span with
//! its request ID (the gateway's `x-request-id`, else a new one) and, once the caller is known,
//! its tenant and subject, so every line the request logs carries them. The same two go back as
//! `x-einsora-tenant` and `x-einsora-subject` response metadata, on answers and errors alike, for
//! the gateway's own log lines (docs/api.md).
//!
//! Of the request's metadata only the request ID and the client's address are read here: the
//! credentials beside them are secrets and never reach a span.
//!
//! It also keeps the tenant's activity log (ADR 0012): every public call runs as recorded
//! (`einsora_store::recording`), so the store writes an action's entry in the action's own
//! transaction once the caller is known; when the call ends, this layer writes the entry of a
//! call the api refused, or of an action that wrote nothing, on its own. A call nobody was
//! authenticated for has no tenant to be logged in (the operator's log has it); a read that
//! succeeded is not an action.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use einsora_core::ids::{ObjectId, TenantId, UserId};
use einsora_runtime::error_code::ErrorCode;
use einsora_store::{Activity, ActivityObject, Recording, Store};
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
    rpc: String,
    request_id: String,
    /// The caller's address, as the gateway saw it.
    client_addr: Option<String>,
    principal: OnceLock<Principal>,
    /// The activity entry of a public call (none for the internal service's).
    recording: Option<Arc<Recording>>,
    /// The call changes state (the caller was authenticated for a write).
    write: AtomicBool,
    /// What a refused call was about: the object its request named.
    object: Mutex<Option<ActivityObject>>,
}

/// The authenticated caller, as response metadata.
#[derive(Debug)]
struct Principal {
    tenant: HeaderValue,
    subject: HeaderValue,
}

/// The internal service (the access proxy's checks on a user's behalf) acts for no one: its
/// calls aren't in any activity log.
const INTERNAL_SERVICES: &str = "/einsora.internal.";

/// Every service of `routes` (those added so far), inside the request context; refused calls
/// and actions that wrote nothing are logged in `store`.
pub fn layer(routes: Routes, store: Arc<dyn Store>) -> Routes {
    let router = routes.into_axum_router();
    Routes::from(
        router.layer(axum::middleware::from_fn(move |request, next| {
            in_context(Arc::clone(&store), request, next)
        })),
    )
}

async fn in_context(store: Arc<dyn Store>, request: Request, next: Next) -> Response {
    let id = request_id(request.headers());
    let path = request.uri().path().to_owned();
    let span = tracing::info_span!(
        "rpc",
        request_id = %id,
        rpc = %path,
        tenant = Empty,
        subject = Empty,
    );
    // The gateway's (or the proxy's) trace goes on here.
    einsora_runtime::telemetry::traces::continue_from(&span, request.headers());
    let recording = (!path.starts_with(INTERNAL_SERVICES)).then(Recording::new);
    let client_addr = request
        .headers()
        .get(einsora_proto::metadata::CLIENT_ADDR)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<std::net::IpAddr>().ok())
        .map(|ip| ip.to_string());
    let context = Arc::new(Context {
        span: span.clone(),
        rpc: path,
        request_id: id,
        client_addr,
        principal: OnceLock::new(),
        recording: recording.clone(),
        write: AtomicBool::new(false),
        object: Mutex::new(None),
    });
    // The handler runs inside this future (tonic answers a unary call only once it returns), so
    // whatever it authenticated is known when the response comes back.
    let served = CURRENT.scope(Arc::clone(&context), next.run(request));
    let mut response = match &recording {
        Some(recording) => {
            einsora_store::recording(Arc::clone(recording), served)
                .instrument(span.clone())
                .await
        }
        None => served.instrument(span.clone()).await,
    };
    if let Some(principal) = context.principal.get() {
        let headers = response.headers_mut();
        headers.insert(TENANT, principal.tenant.clone());
        headers.insert(SUBJECT, principal.subject.clone());
    }
    if let Some(entry) = unrecorded(&context, &response) {
        // Written after the answer leaves, so the answer's time tells nothing (a failed
        // sign-in to a known account costs the same as to an unknown one).
        let written = async move {
            if let Err(e) = store.record_activity(&entry).await {
                tracing::warn!(error = %e, "couldn't write the activity log's entry");
            }
        };
        tokio::spawn(written.instrument(span));
    }
    response
}

/// The entry the call's end still owes the log: a refusal's, or an action's that wrote
/// nothing in the store; none once the action's transaction wrote it, for a read that
/// succeeded, or when no caller was known.
fn unrecorded(context: &Context, response: &Response) -> Option<Activity> {
    let recording = context.recording.as_ref()?;
    if recording.recorded() {
        return None;
    }
    let mut entry = recording.entry()?;
    let header = |key: &str| response.headers().get(key).and_then(|v| v.to_str().ok());
    // A refusal comes in the answer's head; an answer's own status, in its trailers, is OK.
    let code = header("grpc-status")
        .and_then(|c| c.parse::<i32>().ok())
        .map(tonic::Code::from_i32)
        .filter(|c| *c != tonic::Code::Ok);
    let write = context.write.load(Ordering::Acquire);
    let error = code.map(|code| {
        ErrorCode::from_grpc(code, header(einsora_proto::metadata::ERROR))
            .unwrap_or(ErrorCode::Internal)
    });
    entry.result = match error {
        // A read the api failed (an outage) is not something the caller did.
        Some(ErrorCode::Internal | ErrorCode::Unavailable) if !write => return None,
        Some(error) => error.as_str().to_owned(),
        None if write => "ok".to_owned(),
        None => return None,
    };
    entry.object = context
        .object
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    entry.id = uuid::Uuid::now_v7();
    entry.at = time::OffsetDateTime::now_utc();
    Some(entry)
}

/// Who is calling, for the log lines, the response and the activity log.
#[derive(Debug)]
pub(crate) struct Who<'a> {
    pub tenant: TenantId,
    pub user: UserId,
    pub subject: &'a str,
    /// The credential's description, as timelines show it.
    pub actor: String,
    /// The call changes state.
    pub write: bool,
}

/// Names the authenticated caller on the current request's span, response and activity
/// entry. Outside a request (a service called in-process) there is nothing to name it on.
pub(crate) fn authenticated(who: Who<'_>) {
    let _outside = CURRENT.try_with(|context| {
        let tenant = who.tenant.to_string();
        context.span.record("tenant", display(&tenant));
        context.span.record("subject", display(who.subject));
        let principal = Principal {
            tenant: metadata_value(&tenant),
            subject: metadata_value(who.subject),
        };
        // A second authentication in one request is the same caller.
        if context.principal.set(principal).is_err() {
            return;
        }
        if who.write {
            context.write.store(true, Ordering::Release);
        }
        if let Some(recording) = &context.recording {
            recording.caller(entry(context, who));
        }
    });
}

/// A sign-in to a known account that failed: the account's tenant logs it (as a refusal with
/// the account as actor), and nothing else is named. A caller authenticated already stays
/// the one logged.
pub(crate) fn attempted(who: Who<'_>) {
    let _outside = CURRENT.try_with(|context| {
        context.write.store(true, Ordering::Release);
        if let Some(recording) = &context.recording
            && recording.entry().is_none()
        {
            recording.caller(entry(context, who));
        }
    });
}

/// The entry of the current call as `who`'s, before it has an object, a result or a time.
fn entry(context: &Context, who: Who<'_>) -> Activity {
    Activity {
        id: uuid::Uuid::nil(),
        tenant_id: who.tenant,
        user_id: Some(who.user),
        at: time::OffsetDateTime::UNIX_EPOCH,
        actor: who.actor,
        action: action(&context.rpc),
        object: None,
        result: String::new(),
        request_id: context.request_id.clone(),
        client_addr: context.client_addr.clone(),
    }
}

/// The object the current call names (its request's ID), for its entry should it be refused.
pub(crate) fn object<T: ObjectId>(id: T) {
    let _outside = CURRENT.try_with(|context| {
        *context
            .object
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(ActivityObject::of(id));
    });
}

/// An RPC's action word: `/einsora.workloads.v1.WorkloadService/CreateWorkload` is
/// `create_workload`.
fn action(rpc: &str) -> String {
    let method = rpc.rsplit('/').next().unwrap_or_default();
    let mut word = String::with_capacity(method.len() + 4);
    for (i, c) in method.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                word.push('_');
            }
            word.push(c.to_ascii_lowercase());
        } else {
            word.push(c);
        }
    }
    word
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
