//! `GET /v1/models` at the one base URL: the names the caller's endpoints serve, once each, in
//! OpenAI's list shape, with `context_length` where an engine said it: asked of each run once
//! (llama.cpp's `/props` `default_generation_settings.n_ctx`, the context one request gets;
//! else vLLM's `/v1/models` `max_model_len`), bounded in time and size, and remembered
//! (`served.rs`). What an engine answers is its own word: a number within reason, or nothing.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderValue, Method, Request, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};

use crate::app::Proxy;
use crate::errors::RequestId;
use crate::upstream::{Served, Target};
use crate::{endpoint, forward, metrics};

/// How long one engine may take to say its context length.
const ASK_TIMEOUT: Duration = Duration::from_secs(2);
/// The most of its answer read.
const MAX_ANSWER: usize = 256 << 10;
/// The most engines asked for one listing (the rest on the next).
const MAX_ASKS: usize = 16;
/// A context length above this is not believed.
const MAX_CONTEXT: u64 = 100_000_000;

/// The list of `served`'s names.
pub(crate) async fn list(proxy: &Proxy, served: &[&Served], id: &RequestId) -> Response {
    let unknown: Vec<&Arc<Target>> = served
        .iter()
        .filter_map(|s| s.target.as_ref())
        .filter(|t| proxy.served.context(run(t)).is_none())
        .take(MAX_ASKS)
        .collect();
    let asked = futures::future::join_all(unknown.iter().map(|t| context_of(proxy, t, id))).await;
    for (target, length) in unknown.iter().zip(asked) {
        proxy.served.remember_context(run(target), length);
    }
    // By name: the shortest context any of its replicas said (a request fits them all).
    let mut names: BTreeMap<&str, Option<u64>> = BTreeMap::new();
    for s in served {
        let said = s
            .target
            .as_ref()
            .and_then(|t| proxy.served.context(run(t)).flatten());
        let entry = names.entry(s.name.as_str()).or_default();
        *entry = match (*entry, said) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    let data: Vec<Value> = names
        .into_iter()
        .map(|(name, context)| {
            let mut model = json!({
                "id": name,
                "object": "model",
                "created": 0,
                "owned_by": "einsora",
            });
            if let Some(length) = context {
                model["context_length"] = json!(length);
            }
            model
        })
        .collect();
    let body = json!({ "object": "list", "data": data }).to_string();
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn run(target: &Target) -> (uuid::Uuid, u32) {
    (target.workload, target.attempt)
}

/// What the engine says one request's context is, if it says.
async fn context_of(proxy: &Proxy, target: &Target, id: &RequestId) -> Option<u64> {
    let asked = async {
        if let Some(n) = ask(proxy, target, id, "/props")
            .await
            .and_then(|v| v.get("default_generation_settings")?.get("n_ctx")?.as_u64())
        {
            return Some(n);
        }
        let models = ask(proxy, target, id, "/v1/models").await?;
        models.get("data")?.get(0)?.get("max_model_len")?.as_u64()
    };
    let said = tokio::time::timeout(ASK_TIMEOUT, asked).await.ok()??;
    (1..=MAX_CONTEXT).contains(&said).then_some(said)
}

/// The engine's JSON answer to `GET path`, if a whole one came.
async fn ask(proxy: &Proxy, target: &Target, id: &RequestId, path: &str) -> Option<Value> {
    let mut request = Request::new(Body::empty());
    *request.method_mut() = Method::GET;
    *request.uri_mut() = path.parse().ok()?;
    endpoint::rewrite_for_worker(request.headers_mut(), target, id).ok()?;
    let site = metrics::Site::Endpoint;
    let answer = forward::send(site, target, &proxy.upstream, request, &proxy.shutdown)
        .await
        .ok()?;
    if !answer.status().is_success() {
        return None;
    }
    let bytes = axum::body::to_bytes(Body::new(answer.into_body()), MAX_ANSWER)
        .await
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}
