//! The one base URL: `<EINSORA_ACCESS_URL>/v1/<route>` serves the caller's tenant's endpoints
//! by the name each serves its model under (`EndpointParams.served_name`): a request goes to
//! one of the running endpoints serving its body's `model` (its replicas), chosen and retried
//! as `routing.rs` decides, through the same steps as one endpoint's own URL (`endpoint.rs`:
//! the caller check, limits, queue, usage, translation). `GET /v1/models` lists the names
//! (`models.rs`).

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{HeaderName, HeaderValue, Method, Request};
use axum::response::Response;
use serde_json::Value;

use crate::app::Proxy;
use crate::endpoint::{self, ROUTES};
use crate::errors::{Failure, RequestId};
use crate::routing::{self, Attempt, Replica};
use crate::upstream::{Caller, Served};
use crate::{models, translate, wake};

/// Which endpoint answered, on answers through the one base URL.
const ENDPOINT: HeaderName = HeaderName::from_static("x-einsora-endpoint");
/// Whether it was the CPU fallback, where GPU replicas of the model exist.
const FALLBACK: HeaderName = HeaderName::from_static("x-einsora-fallback");
/// When to retry a model whose endpoints are all starting.
const STARTING: std::time::Duration = std::time::Duration::from_secs(5);
const NO_MODEL: &str =
    "name the model: the request's \"model\" is one of the ids GET /v1/models lists";

/// `/v1/<route>`, for the routes one endpoint's URL serves.
pub(crate) fn route(path: &str) -> Option<&'static str> {
    let route = path.strip_prefix("/v1/")?;
    ROUTES.into_iter().find(|r| *r == route)
}

pub(crate) async fn serve(
    proxy: &Arc<Proxy>,
    mut request: Request<Body>,
    id: &RequestId,
) -> Result<Response, Failure> {
    let route = route(request.uri().path()).ok_or_else(|| Failure::not_found("no such route"))?;
    let (caller, api_token) = endpoint::caller(proxy, &mut request, route, id).await?;
    let served = proxy
        .served
        .list(&proxy.upstream, &caller.tenant_id, id)
        .await
        .map_err(|e| e.failure("controller", Failure::not_found("no such route")))?;
    let served: Vec<&Served> = served.iter().filter(|s| may_use(&caller, s)).collect();
    if route == "models" {
        if request.method() != Method::GET {
            return Err(Failure::method_not_allowed());
        }
        return Ok(models::list(proxy, &served, id).await);
    }
    let (prepared, translation) = endpoint::prepare(proxy, request, route).await?;
    let name = model_of(&prepared.body).ok_or_else(|| Failure::invalid(NO_MODEL))?;
    let replicas: Vec<&Served> = served.into_iter().filter(|s| s.name == name).collect();
    if replicas.is_empty() {
        return Err(Failure::no_such_model(
            "no running endpoint of yours serves this model; GET /v1/models lists those that do",
        ));
    }
    let up: Vec<_> = replicas
        .iter()
        .filter_map(|s| Some((s.target.as_ref()?, s.cpu)))
        .collect();
    // None up, and the name's endpoints parked after their idle time (the controller lists
    // one only then): the request wakes one, a GPU one first, and is served by it; one a
    // request woke a moment ago, still starting, holds this request too (`wake.rs`).
    let wait = proxy.limits.wake_wait;
    let mut asleep: Vec<(&&Served, wake::Wake)> = replicas
        .iter()
        .filter_map(|s| match (s.parked, &s.target) {
            (true, _) => Some((s, wake::Wake::Parked)),
            (false, None) if proxy.wakes.waking(s.workload, wait) => Some((s, wake::Wake::Woken)),
            _ => None,
        })
        .collect();
    // One already waking first, then GPU before CPU.
    asleep.sort_by_key(|(s, wake)| (*wake == wake::Wake::Parked, s.cpu));
    if let (true, Some((sleeper, wake))) = (up.is_empty(), asleep.first()) {
        let held = wake::Held {
            prepared,
            translation,
            caller,
            api_token,
        };
        proxy.served.forget(&held.caller.tenant_id);
        return wake::serve(proxy, sleeper.workload, held, *wake, id).await;
    }
    if up.is_empty() {
        return Err(Failure::unavailable(
            "every endpoint serving this model is starting or unreachable; try again shortly",
        )
        .retry_after(STARTING));
    }
    let weighed: Vec<Replica> = up
        .iter()
        .map(|(target, cpu)| {
            let depth = proxy.queues.depth(target.workload);
            Replica {
                cpu: *cpu,
                depth: depth.in_flight + depth.waiting,
            }
        })
        .collect();
    let has_gpu = replicas.iter().any(|s| !s.cpu);
    let mut last = Err(Failure::unavailable(
        "no endpoint serving this model answered",
    ));
    for at in routing::order(&weighed, proxy.served.turn()) {
        let (target, cpu) = up[at];
        let tried = endpoint::forward_to(proxy, target, &prepared, &caller, &api_token, id).await;
        let attempt = match &tried {
            Ok(response) => Attempt::Answered(response.status()),
            Err(tried) => tried.attempt,
        };
        last = tried
            .map(|mut response| {
                let headers = response.headers_mut();
                if let Ok(value) = HeaderValue::from_str(&target.workload.to_string()) {
                    headers.insert(ENDPOINT, value);
                }
                if cpu && has_gpu {
                    headers.insert(FALLBACK, HeaderValue::from_static("true"));
                }
                response
            })
            .map_err(|tried| tried.failure);
        if !routing::retry(attempt) {
            break;
        }
        // Its list may be stale (the endpoint stopped): asked afresh by the next request.
        proxy.served.forget(&caller.tenant_id);
        tracing::info!(endpoint = %target.workload, ?attempt, "a replica refused; the next is tried, if any");
    }
    // The engine's chat answer in the client's API.
    translate::answer(translation, last?).await
}

/// Whether the caller may use this endpoint: an inference key only those in its scope; one
/// out of it is as if it weren't there.
fn may_use(caller: &Caller, served: &Served) -> bool {
    caller
        .key
        .as_ref()
        .is_none_or(|key| key.allows(served.workload))
}

/// The request body's `model`, a string (every route's body is a JSON object by now).
fn model_of(body: &Bytes) -> Option<String> {
    match serde_json::from_slice::<Value>(body).ok()? {
        Value::Object(mut object) => match object.remove("model")? {
            Value::String(name) => Some(name),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_routes_of_one_endpoint_at_v1() {
        for r in ROUTES {
            assert_eq!(route(&format!("/v1/{r}")), Some(r));
        }
        for bad in [
            "/v1/models/",
            "/v1/x",
            "/v1//models",
            "/e/x/v1/models",
            "/v1",
            "/",
        ] {
            assert_eq!(route(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_model_is_the_bodys_string() {
        let of = |body: &'static str| model_of(&Bytes::from_static(body.as_bytes()));
        assert_eq!(of(r#"{"model":"tiny","messages":[]}"#), Some("tiny".into()));
        for none in [
            r#"{"model":1}"#,
            r#"{}"#,
            "[]",
            "not json",
            r#"{"model":null}"#,
        ] {
            assert_eq!(of(none), None, "{none}");
        }
    }
}
