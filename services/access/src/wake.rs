//! Scale-to-zero at the proxy: a request to an endpoint parked after its idle time (the
//! controller says so: `LookupError::Parked`) wakes it. The api starts it for the request's
//! caller as `POST /v1/workloads/{id}/start` would (`ApiInternalService.WakeEndpoint`: the
//! caller's scope, the quotas, then admission in turn), its timeline naming who woke it; the
//! request is held until the endpoint is ready, at most `EINSORA_ENDPOINT_WAKE_WAIT`, then
//! served. Requests arriving meanwhile share the wake: each endpoint is asked for at most once
//! every [`ASK_AGAIN`], and a start asked for an endpoint already on its way changes nothing.
//!
//! A streaming client (`"stream": true`) gets its 200 at once and an SSE comment
//! (`: waking the endpoint`) every [`COMMENT_EVERY`] while it waits, so neither it nor a proxy
//! in between gives up on a silent connection; then the engine's events, or one error event
//! when the wait runs out. Others just wait, and past the bound get a 503 with `Retry-After`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use einsora_proto::common::v1::WorkloadKind;
use futures::StreamExt;
use serde_json::Value;
use uuid::Uuid;

use crate::app::Proxy;
use crate::endpoint::{self, Prepared};
use crate::errors::{Envelope, Failure, RequestId};
use crate::translate;
use crate::upstream::{Caller, LookupError, Target};

/// How often a held request looks whether its endpoint is ready.
const POLL: Duration = Duration::from_millis(500);
/// A wake is asked for again, by a request still finding its endpoint parked, after this.
pub(crate) const ASK_AGAIN: Duration = Duration::from_secs(10);
/// How long a wake is remembered (at least the longest wake wait anyone sets, in practice).
const REMEMBERED: Duration = Duration::from_secs(3600);
/// How often a held stream hears that it is still waiting.
pub(crate) const COMMENT_EVERY: Duration = Duration::from_secs(3);
/// The comment a held stream gets.
pub(crate) const COMMENT: &str = ": waking the endpoint\n\n";
/// A request held as long as the proxy holds one.
const WAITED: &str = "it is waking from idle and wasn't ready within the time a request is \
    held (EINSORA_ENDPOINT_WAKE_WAIT); try again shortly";
/// When to try again, once a wake took longer than the proxy holds a request.
const RETRY: Duration = Duration::from_secs(10);

/// When each endpoint was last asked to wake.
#[derive(Debug, Default)]
pub(crate) struct Wakes {
    asked: Mutex<HashMap<Uuid, Instant>>,
}

impl Wakes {
    /// Whether this request asks for the wake: none was asked for the endpoint in the last
    /// [`ASK_AGAIN`].
    fn first(&self, endpoint: Uuid) -> bool {
        let mut asked = self.asked.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        asked.retain(|_, at| now.duration_since(*at) < REMEMBERED);
        if asked
            .get(&endpoint)
            .is_some_and(|at| now.duration_since(*at) < ASK_AGAIN)
        {
            return false;
        }
        asked.insert(endpoint, now);
        true
    }

    /// Whether a request asked this proxy to wake the endpoint within `within`: one starting
    /// then is starting for it, and a request now is held as the first was.
    pub(crate) fn waking(&self, endpoint: Uuid, within: Duration) -> bool {
        let asked = self.asked.lock().unwrap_or_else(PoisonError::into_inner);
        asked.get(&endpoint).is_some_and(|at| at.elapsed() < within)
    }

    /// A wake that failed is asked for again by the next request.
    fn forget(&self, endpoint: Uuid) {
        let mut asked = self.asked.lock().unwrap_or_else(PoisonError::into_inner);
        asked.remove(&endpoint);
    }
}

/// Serves `prepared` once the parked (or, `Wake::Woken`, waking) `endpoint` is awake: held
/// (a stream with comments) for at most the wake wait.
pub(crate) async fn serve(
    proxy: &Arc<Proxy>,
    endpoint: Uuid,
    held: Held,
    wake: Wake,
    id: &RequestId,
) -> Result<Response, Failure> {
    // Asked before anything is held: a caller who may not wake it is told at once.
    if wake == Wake::Parked {
        ask(proxy, endpoint, &held.caller, id).await?;
    }
    if !streams(&held.prepared.body) {
        let target = until_ready(proxy, endpoint, &held.caller, id).await?;
        return held.send(proxy, &target, id).await;
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(4);
    let (proxy, id) = (Arc::clone(proxy), id.clone());
    tokio::spawn(async move {
        let comments = async {
            let mut tick = tokio::time::interval(COMMENT_EVERY);
            loop {
                tick.tick().await;
                if tx
                    .send(Ok(Bytes::from_static(COMMENT.as_bytes())))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        };
        let ready = tokio::select! {
            ready = until_ready(&proxy, endpoint, &held.caller, &id) => ready,
            // The client left.
            () = comments => return,
        };
        let answer = match ready {
            Ok(target) => held.send(&proxy, &target, &id).await,
            Err(failure) => Err(failure),
        };
        match answer {
            Ok(response) => {
                let mut body = response.into_body().into_data_stream();
                while let Some(chunk) = body.next().await {
                    let chunk = chunk.map_err(std::io::Error::other);
                    if tx.send(chunk).await.is_err() {
                        return;
                    }
                }
            }
            Err(failure) => {
                let _ = tx.send(Ok(error_event(failure, &id).await)).await;
            }
        }
    });
    let body = Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx));
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    *response.status_mut() = StatusCode::OK;
    Ok(response)
}

/// Where the endpoint stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// Parked: the request wakes it.
    Parked,
    /// Starting after a request woke it a moment ago: held as that one is.
    Woken,
}

/// A request held for a parked endpoint: what it sends once it is awake.
pub(crate) struct Held {
    pub(crate) prepared: Prepared,
    pub(crate) translation: Option<translate::Translation>,
    pub(crate) caller: Caller,
    pub(crate) api_token: String,
}

impl Held {
    async fn send(
        self,
        proxy: &Proxy,
        target: &Target,
        id: &RequestId,
    ) -> Result<Response, Failure> {
        let Held {
            prepared,
            translation,
            caller,
            api_token,
        } = self;
        let response = endpoint::forward_to(proxy, target, &prepared, &caller, &api_token, id)
            .await
            .map_err(|tried| tried.failure)?;
        translate::answer(translation, response).await
    }
}

/// Asks the api to start it, unless another request did a moment ago.
async fn ask(
    proxy: &Proxy,
    endpoint: Uuid,
    caller: &Caller,
    id: &RequestId,
) -> Result<(), Failure> {
    if !proxy.wakes.first(endpoint) {
        return Ok(());
    }
    match proxy.upstream.wake(endpoint, caller, id).await {
        Ok(started) => {
            tracing::info!(%endpoint, started, "a request woke a parked endpoint");
            Ok(())
        }
        Err(e) => {
            proxy.wakes.forget(endpoint);
            Err(match e {
                LookupError::Refused => Failure::not_found("no such endpoint"),
                // Over a quota, say: the api's words.
                LookupError::Unreachable(why) => {
                    Failure::unreachable(format!("it is parked and couldn't be started: {why}"))
                }
                e => e.failure("api", Failure::not_found("no such endpoint")),
            })
        }
    }
}

/// Its target once it is ready, looking every [`POLL`] for at most the wake wait; a request
/// that still finds it parked asks for the wake again (after [`ASK_AGAIN`]).
async fn until_ready(
    proxy: &Proxy,
    endpoint: Uuid,
    caller: &Caller,
    id: &RequestId,
) -> Result<Arc<Target>, Failure> {
    let deadline = Instant::now() + proxy.limits.wake_wait;
    loop {
        tokio::time::sleep(POLL).await;
        match proxy
            .upstream
            .resolve(endpoint, &caller.tenant_id, id)
            .await
        {
            Ok(target) if target.kind == WorkloadKind::Endpoint => return Ok(Arc::new(target)),
            Ok(_) | Err(LookupError::Refused) => {
                return Err(Failure::not_found("no such endpoint"));
            }
            Err(LookupError::Parked) => ask(proxy, endpoint, caller, id).await?,
            // Starting, or the controller away for a moment: looked at again.
            Err(_) => {}
        }
        if Instant::now() >= deadline {
            return Err(Failure::unavailable(WAITED).retry_after(RETRY));
        }
    }
}

/// Whether the request asks for a streamed answer (`"stream": true`).
fn streams(body: &Bytes) -> bool {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("stream").and_then(Value::as_bool))
        .unwrap_or(false)
}

/// A stream's last event, in the OpenAI error shape, for a failure after its 200 was sent.
async fn error_event(failure: Failure, id: &RequestId) -> Bytes {
    let body = failure.response(id, Envelope::OpenAi).into_body();
    let json = axum::body::to_bytes(body, 1 << 16)
        .await
        .unwrap_or_default();
    let mut event = b"data: ".to_vec();
    event.extend_from_slice(&json);
    event.extend_from_slice(b"\n\n");
    Bytes::from(event)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_is_asked_for_in_the_body() {
        let of = |body: &'static str| streams(&Bytes::from_static(body.as_bytes()));
        assert!(of(r#"{"model":"m","stream":true}"#));
        for not in [r#"{"stream":false}"#, r#"{"stream":"true"}"#, "{}", "x"] {
            assert!(!of(not), "{not}");
        }
    }

    #[test]
    fn requests_meanwhile_share_one_wake() {
        let wakes = Wakes::default();
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        assert!(wakes.first(a));
        assert!(!wakes.first(a));
        assert!(wakes.first(b));
        assert!(wakes.waking(a, Duration::from_secs(60)));
        assert!(!wakes.waking(Uuid::from_u128(3), Duration::from_secs(60)));
        wakes.forget(a);
        assert!(!wakes.waking(a, Duration::from_secs(60)));
        assert!(wakes.first(a));
    }
}
