//! Endpoints at the public URL's host: `/e/<id>/v1/{models,completions,chat/completions}` for
//! API tokens only. The token is checked on every request and, while a response streams, every
//! [`RECHECK`], so a revoked token's stream ends within seconds. Cookies never authenticate
//! inference and never reach the worker. Each request is held to the endpoint limits
//! (`limits.rs`).

use std::time::Duration;

use axum::body::Body;
use axum::http::header::{
    AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, COOKIE, HOST, HeaderMap, HeaderValue, SET_COOKIE,
};
use axum::http::{HeaderName, Method, Request, StatusCode, Uri};
use axum::response::Response;
use einsora_proto::common::v1::WorkloadKind;
use tokio::sync::OwnedSemaphorePermit;
use uuid::Uuid;

use crate::app::{Proxy, record_caller};
use crate::body::{Guarded, Stop};
use crate::errors::{Failure, REQUEST_ID, RequestId};
use crate::host::canonical_uuid;
use crate::upstream::{LookupError, Target, Upstream};
use crate::{forward, limits, usage};

pub(crate) const RECHECK: Duration = Duration::from_secs(2);
const ROUTES: [&str; 3] = ["models", "completions", "chat/completions"];

const REGION: HeaderName = HeaderName::from_static("x-einsora-region");
const CLASS: HeaderName = HeaderName::from_static("x-einsora-class");
const FALLBACK: HeaderName = HeaderName::from_static("x-einsora-fallback");

pub(crate) async fn handle(
    proxy: &Proxy,
    request: Request<Body>,
    id: &RequestId,
) -> Result<Response, Failure> {
    let no_such = || Failure::not_found("no such endpoint");
    let (workload, route) = route(request.uri().path()).ok_or_else(no_such)?;
    let unauthenticated =
        || Failure::unauthenticated("endpoints need an API token: Authorization: Bearer tsk_…");
    let api_token = bearer(request.headers())
        .ok_or_else(unauthenticated)?
        .to_owned();
    let caller = proxy
        .upstream
        .authenticate(&api_token, id)
        .await
        .map_err(|e| e.failure("api", unauthenticated()))?;
    record_caller(&caller.tenant_id, &caller.user_id, &caller.subject);
    let target = proxy
        .targets
        .resolve(&proxy.upstream, workload, &caller.tenant_id, id)
        .await
        .map_err(|e| e.failure("controller", no_such()))?;
    if target.kind != WorkloadKind::Endpoint {
        return Err(no_such());
    }
    let limits = &proxy.limits;
    let in_flight = proxy.in_flight.enter(workload, limits)?;

    let (mut parts, body) = request.into_parts();
    let generates = parts.method == Method::POST && route != "models";
    let body = limits::bounded_body(body, limits, generates).await?;
    parts.headers.remove(CONTENT_LENGTH);
    let query = parts
        .uri
        .query()
        .map(|q| format!("?{q}"))
        .unwrap_or_default();
    parts.uri = Uri::try_from(format!("/v1/{route}{query}"))
        .map_err(|_| Failure::invalid("the request target is not a valid path"))?;
    rewrite_for_worker(&mut parts.headers, &target, id)?;
    let request = Request::from_parts(parts, Body::from(body));
    let answered = forward::send(
        crate::metrics::Site::Endpoint,
        &target,
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
            Failure::over_limit(StatusCode::GATEWAY_TIMEOUT, message)
        })?
        .inspect_err(|_| proxy.targets.forget(workload))?;
    let headers = response.headers_mut();
    headers.remove(SET_COOKIE);
    describe(headers, &target);
    // Its place among the endpoint's requests is held until the answer ends.
    let stop = until_revoked(proxy, api_token, id.clone(), in_flight);
    let content_type = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    let shape = usage::Shape::of(content_type).filter(|_| generates);
    let class = target.placed_class.clone();
    Ok(response.map(|body| match shape {
        Some(shape) => Body::new(Guarded::new(usage::Usage::new(body, shape, &class), stop)),
        None => Body::new(Guarded::new(body, stop)),
    }))
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

fn rewrite_for_worker(
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
fn until_revoked(
    proxy: &Proxy,
    api_token: String,
    id: RequestId,
    in_flight: OwnedSemaphorePermit,
) -> Stop {
    let upstream: Upstream = proxy.upstream.clone();
    let shutdown = proxy.shutdown.cancelled();
    let limit = proxy.limits.timeout;
    Box::pin(async move {
        let _in_flight = in_flight;
        let revoked = async {
            loop {
                tokio::time::sleep(RECHECK).await;
                if let Err(LookupError::Refused) = upstream.authenticate(&api_token, &id).await {
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
    fn only_the_three_routes_of_a_canonical_id() {
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
            format!("/e/{id}/v1/embeddings"),
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
