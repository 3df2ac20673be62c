//! Endpoints at the public URL's host: `/e/<id>/v1/{models,completions,chat/completions}` for
//! API tokens and inference keys only. The credential is checked on every request (against the
//! api's answer of the last second, `credentials.rs`) and, while a response streams, every
//! [`RECHECK`], so a revoked token or key is refused within a second and its stream ends within
//! seconds. A key answers as unknown every endpoint outside its scope, and every request is held
//! to the key's and the tenant's inference limits (`ratelimit.rs`). Cookies never authenticate
//! inference and never reach the worker. Each request is held to the endpoint limits
//! (`limits.rs`).

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::header::{
    AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, COOKIE, HOST, HeaderMap, HeaderValue, SET_COOKIE,
};
use axum::http::{HeaderName, Method, Request, StatusCode, Uri, Version};
use axum::response::Response;
use einsora_proto::common::v1::WorkloadKind;
use uuid::Uuid;

use crate::app::{Proxy, record_caller};
use crate::body::{Guarded, Stop};
use crate::cut::Cut;
use crate::errors::{Envelope, Failure, REQUEST_ID, RequestId};
use crate::host::canonical_uuid;
use crate::queue::Place;
use crate::ratelimit::Spend;
use crate::upstream::{Caller, LookupError, Target, Upstream};
use crate::{forward, gateway, keys, limits, routing, tally, translate, usage, wake};

pub(crate) const RECHECK: Duration = Duration::from_secs(2);
/// Any credential that doesn't work, alike.
const UNAUTHENTICATED: &str =
    "endpoints need an API token or an inference key: Authorization: Bearer tsk_… or isk_…";
pub(crate) const ROUTES: [&str; 6] = [
    "models",
    "completions",
    "chat/completions",
    "embeddings",
    // Translated onto chat completions (`translate/`).
    "messages",
    "responses",
];

const REGION: HeaderName = HeaderName::from_static("x-einsora-region");
const CLASS: HeaderName = HeaderName::from_static("x-einsora-class");
const FALLBACK: HeaderName = HeaderName::from_static("x-einsora-fallback");

pub(crate) async fn handle(
    proxy: &Arc<Proxy>,
    request: Request<Body>,
    id: &RequestId,
) -> Result<Response, Failure> {
    let path = request.uri().path();
    // `/v1/<route>` is the one base URL's (`gateway.rs`); `/e/<id>/v1/<route>` one endpoint's.
    let one_base = gateway::route(path);
    let dialect = route(path)
        .map(|(_, route)| route)
        .or(one_base)
        .and_then(translate::Dialect::of);
    let answer = match one_base {
        Some(_) => gateway::serve(proxy, request, id).await,
        None => serve(proxy, request, id).await,
    };
    match answer {
        // The Messages API's clients parse Anthropic's error shape.
        Err(failure) if dialect == Some(translate::Dialect::Messages) => {
            Ok(failure.response(id, Envelope::Anthropic))
        }
        answer => answer,
    }
}

async fn serve(
    proxy: &Arc<Proxy>,
    mut request: Request<Body>,
    id: &RequestId,
) -> Result<Response, Failure> {
    let no_such = || Failure::not_found("no such endpoint");
    let (workload, route) = route(request.uri().path()).ok_or_else(no_such)?;
    let (caller, api_token) = caller(proxy, &mut request, route, id).await?;
    // An inference key outside its scope: as unknown as an endpoint that doesn't exist.
    if caller.key.as_ref().is_some_and(|k| !k.allows(workload)) {
        return Err(no_such());
    }
    let resolved = proxy
        .targets
        .resolve(&proxy.upstream, workload, &caller.tenant_id, id)
        .await;
    // Parked after its idle time: this request wakes it, and is served once it is up; one
    // starting because a request woke it is held as that one is.
    let wake = match &resolved {
        Err(LookupError::Parked) => Some(wake::Wake::Parked),
        Err(LookupError::NotReady) if proxy.wakes.waking(workload, proxy.limits.wake_wait) => {
            Some(wake::Wake::Woken)
        }
        _ => None,
    };
    if let Some(wake) = wake {
        let (prepared, translation) = prepare(proxy, request, route).await?;
        let held = wake::Held {
            prepared,
            translation,
            caller,
            api_token,
        };
        return wake::serve(proxy, workload, held, wake, id).await;
    }
    let target = resolved.map_err(|e| e.failure("controller", no_such()))?;
    if target.kind != WorkloadKind::Endpoint {
        return Err(no_such());
    }
    let (prepared, translation) = prepare(proxy, request, route).await?;
    let response = forward_to(proxy, &target, &prepared, &caller, &api_token, id)
        .await
        .map_err(|tried| tried.failure)?;
    // The engine's chat answer (its usage counted above) in the client's API.
    translate::answer(translation, response).await
}

/// Who asks: the bearer token (or a translated route's own header) the api knows, checked
/// again while the answer streams (`until_revoked`). The same for one endpoint's URL and the
/// one base URL (`gateway.rs`).
pub(crate) async fn caller(
    proxy: &Proxy,
    request: &mut Request<Body>,
    route: &str,
    id: &RequestId,
) -> Result<(Caller, String), Failure> {
    translate::credentials(route, request.headers_mut())?;
    let unauthenticated = || Failure::unauthenticated(UNAUTHENTICATED);
    let api_token = bearer(request.headers())
        .ok_or_else(unauthenticated)?
        .to_owned();
    let mut caller = proxy
        .credentials
        .authenticate(&proxy.upstream, &api_token, id)
        .await
        .map_err(|e| e.failure("api", unauthenticated()))?;
    record_caller(&caller.tenant_id, &caller.user_id, &caller.subject);
    // Once per request, whichever endpoint it reaches: the key's and the tenant's limits.
    caller.limited = proxy.rate_limits.admit(&keys::rules(&caller))?;
    Ok((caller, api_token))
}

/// A request made ready for an endpoint's engine, whichever it is: within the limits, in the
/// engine's route and shape; sent as often as replicas are tried (`gateway.rs`).
pub(crate) struct Prepared {
    method: Method,
    uri: Uri,
    version: Version,
    headers: HeaderMap,
    pub(crate) body: Bytes,
    /// A POST whose answer's tokens are counted.
    counted: bool,
    /// What the proxy asked of the engine that the client didn't (`usage.rs`).
    added: usage::Added,
}

impl Prepared {
    /// A copy to send to one engine.
    fn request(&self) -> Request<Body> {
        let mut request = Request::new(Body::from(self.body.clone()));
        *request.method_mut() = self.method.clone();
        *request.uri_mut() = self.uri.clone();
        *request.version_mut() = self.version;
        *request.headers_mut() = self.headers.clone();
        request
    }
}

/// The request as any engine takes it (`Prepared`), and how its answer is translated back.
pub(crate) async fn prepare(
    proxy: &Proxy,
    request: Request<Body>,
    route: &'static str,
) -> Result<(Prepared, Option<translate::Translation>), Failure> {
    let limits = &proxy.limits;
    let (mut parts, body) = request.into_parts();
    let counted = parts.method == Method::POST && route != "models";
    let generates = counted && route != "embeddings";
    // Messages and Responses requests as chat requests, from here to the engine.
    let (body, translation) = translate::request(route, &parts.method, body, limits).await?;
    let (body, added) = limits::bounded_counted_body(body, limits, generates).await?;
    parts.headers.remove(CONTENT_LENGTH);
    let query = parts
        .uri
        .query()
        .map(|q| format!("?{q}"))
        .unwrap_or_default();
    let route = translate::engine_route(route, translation.as_ref());
    parts.uri = Uri::try_from(format!("/v1/{route}{query}"))
        .map_err(|_| Failure::invalid("the request target is not a valid path"))?;
    let prepared = Prepared {
        method: parts.method,
        uri: parts.uri,
        version: parts.version,
        headers: parts.headers,
        body,
        counted,
        added,
    };
    Ok((prepared, translation))
}

/// Why a request got no answer from one engine, and whether another may be tried
/// (`routing::retry`).
#[derive(Debug)]
pub(crate) struct Tried {
    pub(crate) failure: Failure,
    pub(crate) attempt: routing::Attempt,
}

impl Tried {
    fn refused(failure: Failure) -> Self {
        let attempt = routing::Attempt::Refused;
        Tried { failure, attempt }
    }

    /// Not to be tried elsewhere: the proxy's own limits refused it.
    fn limited(failure: Failure) -> Self {
        let attempt = routing::Attempt::Limited;
        Tried { failure, attempt }
    }
}

/// Sends `prepared` to `target` in its turn (`queue.rs`), and its answer back, counted and
/// held until it ends; a streamed answer its engine breaks off ends with an error event
/// (`cut.rs`).
pub(crate) async fn forward_to(
    proxy: &Proxy,
    target: &Target,
    prepared: &Prepared,
    caller: &Caller,
    api_token: &str,
    id: &RequestId,
) -> Result<Response, Tried> {
    let limits = &proxy.limits;
    let (workload, counted, added) = (target.workload, prepared.counted, prepared.added);
    let mut request = prepared.request();
    rewrite_for_worker(request.headers_mut(), target, id).map_err(Tried::refused)?;
    // Used: not to be parked for idleness (`touch.rs`).
    proxy.touched.touch(workload);
    // Its turn among the endpoint's requests (`queue.rs`), held until the answer ends.
    let bounds = limits.queue_bounds(target.slots);
    let place = proxy
        .queues
        .enter(workload, bounds)
        .await
        .map_err(|f| Tried::limited(limits_shown(f, caller)))?;
    let answered = forward::send(
        crate::metrics::Site::Endpoint,
        target,
        &proxy.upstream,
        request,
        &proxy.shutdown,
    );
    let mut response = tokio::time::timeout(limits.timeout, answered)
        .await
        .map_err(|_| {
            let message = format!(
                "the endpoint didn't answer within {}s ({})",
                limits.timeout.as_secs(),
                limits::TIMEOUT
            );
            Tried::limited(Failure::over_limit(StatusCode::GATEWAY_TIMEOUT, message))
        })?
        .inspect_err(|_| proxy.targets.forget(workload))
        .map_err(Tried::refused)?;
    let headers = response.headers_mut();
    headers.remove(SET_COOKIE);
    describe(headers, target);
    if let Some(limited) = &caller.limited {
        headers.extend(limited.headers.clone());
    }
    let stop = until_revoked(proxy, api_token.to_owned(), id.clone(), place);
    let content_type = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    let shape = usage::Shape::of(content_type).filter(|_| counted);
    if shape == Some(usage::Shape::Events) && added != usage::Added::default() {
        // Its lines are rewritten (`usage.rs`).
        response.headers_mut().remove(CONTENT_LENGTH);
    }
    // The request's tokens count against the limits it was let through under.
    let spend = caller.limited.as_ref().and_then(|l| l.spend.clone());
    let counting = usage::Counting {
        class: target.placed_class.clone(),
        added,
        tally: Some((Arc::clone(&proxy.tally), who(caller, workload))),
        on_spent: spend.map(Spend::on_spent),
    };
    let response = response.map(|body| match shape {
        // A stream its engine breaks off ends with an error event, counted as it went.
        Some(usage::Shape::Events) => {
            let body = usage::Usage::new(Cut::new(body), usage::Shape::Events, counting);
            Body::new(Guarded::new(body, stop))
        }
        Some(shape) => Body::new(Guarded::new(usage::Usage::new(body, shape, counting), stop)),
        None => Body::new(Guarded::new(body, stop)),
    });
    Ok(response)
}

/// Whose tokens an answer's are, for the tally (`tally.rs`).
fn who(caller: &Caller, endpoint: Uuid) -> tally::Who {
    tally::Who {
        tenant_id: caller.tenant_id.clone(),
        endpoint,
        user_id: caller.user_id.clone(),
        key_id: caller.key.as_ref().map(|k| k.key_id.clone()),
    }
}

/// A refusal after the limits let the request through shows where they stand too.
fn limits_shown(failure: Failure, caller: &Caller) -> Failure {
    match &caller.limited {
        Some(limited) => failure.with_headers(limited.headers.clone()),
        None => failure,
    }
}

/// `/e/<canonical uuid>/v1/<route>`, nothing else.
fn route(path: &str) -> Option<(Uuid, &'static str)> {
    let rest = path.strip_prefix("/e/")?;
    let (id, rest) = rest.split_once('/')?;
    let route = rest.strip_prefix("v1/")?;
    let route = ROUTES.into_iter().find(|r| *r == route)?;
    Some((canonical_uuid(id)?, route))
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let mut values = headers.get_all(AUTHORIZATION).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return None;
    };
    let (scheme, token) = value.to_str().ok()?.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty() && !token.contains(' '))
        .then_some(token)
}

pub(crate) fn rewrite_for_worker(
    headers: &mut HeaderMap,
    target: &Target,
    id: &RequestId,
) -> Result<(), Failure> {
    forward::remove_hop_by_hop(headers, false);
    headers.remove(COOKIE);
    headers.insert(HOST, HeaderValue::from_static("localhost"));
    headers.insert(REQUEST_ID, id.header());
    let mut authorization = HeaderValue::from_str(&format!("Bearer {}", target.token))
        .map_err(|_| Failure::unavailable("the endpoint isn't answering right now"))?;
    authorization.set_sensitive(true);
    headers.insert(AUTHORIZATION, authorization);
    Ok(())
}

/// Where the answer came from: region, the class it ran on, and whether that was a fallback.
fn describe(headers: &mut HeaderMap, target: &Target) {
    let fallback = if target.placed_class == target.gpu_class {
        "false"
    } else {
        "true"
    };
    for (name, value) in [
        (REGION, target.region.as_str()),
        (CLASS, target.placed_class.as_str()),
        (FALLBACK, fallback),
    ] {
        if let Ok(value) = HeaderValue::from_str(value) {
            headers.insert(name, value);
        }
    }
}

/// Completes at shutdown, once the API token no longer authenticates, or when the answer has
/// streamed for the endpoint's time limit. A lookup that fails for another reason (the api
/// restarting) keeps the stream going.
fn until_revoked(proxy: &Proxy, api_token: String, id: RequestId, place: Place) -> Stop {
    let upstream: Upstream = proxy.upstream.clone();
    let credentials = Arc::clone(&proxy.credentials);
    let shutdown = proxy.shutdown.cancelled();
    let limit = proxy.limits.timeout;
    Box::pin(async move {
        let _place = place;
        let revoked = async {
            loop {
                tokio::time::sleep(RECHECK).await;
                let checked = credentials.authenticate(&upstream, &api_token, &id).await;
                if let Err(LookupError::Refused) = checked {
                    tracing::info!("API token no longer valid; ending the stream");
                    return;
                }
            }
        };
        tokio::select! {
            () = revoked => {}
            () = shutdown => {}
            () = tokio::time::sleep(limit) => tracing::info!("the answer ran past its time limit; ending it"),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_routes_of_a_canonical_id() {
        let id = "0190a5b2-7c1e-7d3f-8a9b-0c1d2e3f4a5b";
        let uuid = Uuid::parse_str(id).unwrap();
        for route in ROUTES {
            assert_eq!(
                super::route(&format!("/e/{id}/v1/{route}")),
                Some((uuid, route))
            );
        }
        let upper = id.to_uppercase();
        for bad in [
            format!("/e/{id}/v1/embeddings/x"),
            format!("/e/{id}/v1/messages/count_tokens"),
            format!("/e/{id}/v1/responses/resp_1"),
            format!("/e/{id}/v1/models/"),
            format!("/e/{id}/v1/chat/completions/x"),
            format!("/e/{id}/health"),
            format!("/e/{id}/v1/../v1/models"),
            format!("/e/{upper}/v1/models"),
            format!("/e/{id}//v1/models"),
            "/v1/models".to_owned(),
        ] {
            assert_eq!(super::route(&bad), None, "{bad}");
        }
    }

    #[test]
    fn bearer_tokens_only() {
        let with = |values: &[&str]| {
            let mut headers = HeaderMap::new();
            for v in values {
                headers.append(AUTHORIZATION, HeaderValue::from_str(v).unwrap());
            }
            bearer(&headers).map(str::to_owned)
        };
        assert_eq!(with(&["Bearer tsk_a"]), Some("tsk_a".into()));
        assert_eq!(with(&["bearer tsk_a"]), Some("tsk_a".into()));
        for bad in [
            &[][..],
            &["token tsk_a"],
            &["Bearer "],
            &["Bearer a b"],
            &["Bearer a", "Bearer b"],
        ] {
            assert_eq!(with(bad), None, "{bad:?}");
        }
    }
}
