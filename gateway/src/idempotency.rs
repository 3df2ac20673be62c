//! `Idempotency-Key` on POSTs (docs/api.md, "Idempotency-Key"; ADR 0016). The gateway hashes
//! the request (method, path, canonical JSON body), has the api claim the key for the
//! authenticated caller, runs the request only when the claim starts, and then has the api keep
//! the HTTP answer (a success whose answer carries no secret) or let the key go (a refusal or a
//! failure, which changed nothing, so a retry runs again). The store is the api's; the gateway
//! keeps nothing itself, so any number of gateways share the keys.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use einsora_proto::internal::v1 as pb;
use einsora_proto::internal::v1::IdempotencyOutcome;
use einsora_proto::internal::v1::idempotency_service_client::IdempotencyServiceClient;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tonic::metadata::MetadataMap;
use tracing::Instrument;

use crate::app::Gateway;
use crate::edge::REQUEST_ID;
use crate::errors::ApiError;
use crate::handler::{decode, record_principal, to_json};
use crate::routes::Route;
use crate::upstream;

pub(crate) const HEADER: &str = "idempotency-key";
/// On an answer sent again: `true`.
pub(crate) const REPLAYED: &str = "idempotent-replayed";
const MAX_KEY: usize = 255;
/// How long the gateway waits for the api's claim, finish or release.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// What a caller whose request with this key is still running waits before trying again.
const IN_PROGRESS_RETRY_AFTER: u64 = 1;

pub(crate) const BAD_KEY: &str =
    "the Idempotency-Key header must be 1-255 printable ASCII characters, sent once";
pub(crate) const MISMATCH: &str = "this Idempotency-Key was used for another request (another \
     method, path or body) within the keys' lifetime: send a new key for a new request";
pub(crate) const IN_PROGRESS: &str =
    "a request with this Idempotency-Key is still in progress: try again after Retry-After seconds";
pub(crate) const WITHHELD: &str = "the request with this Idempotency-Key was done already, and \
     its answer carried a secret, which is never kept: nothing was done again (send a new key \
     to do it again)";

/// A request's key and hash, once the api has claimed them for its caller.
#[derive(Debug, Clone)]
struct Claim {
    user_id: String,
    key: String,
    request_hash: Vec<u8>,
}

/// The request's `Idempotency-Key`, when its route takes one (a POST by a signed-in caller;
/// elsewhere the header is ignored). One header, 1-255 characters from space to `~`.
pub(crate) fn key(route: &Route, headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    if !route.takes_idempotency_key() {
        return Ok(None);
    }
    let mut values = headers.get_all(HEADER).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return match headers.contains_key(HEADER) {
            true => Err(ApiError::invalid(BAD_KEY)),
            false => Ok(None),
        };
    };
    let bytes = value.as_bytes();
    let printable = |b: &u8| (b' '..=b'~').contains(b);
    if bytes.is_empty() || bytes.len() > MAX_KEY || !bytes.iter().all(printable) {
        return Err(ApiError::invalid(BAD_KEY));
    }
    Ok(Some(String::from_utf8_lossy(bytes).into_owned()))
}

/// SHA-256 of the method, the path and query, and the body as canonical JSON (keys sorted, no
/// spaces; an empty body is `{}`), so the same request written another way is the same.
pub(crate) fn request_hash(method: &Method, uri: &Uri, body: &[u8]) -> Vec<u8> {
    let canonical = if body.is_empty() {
        b"{}".to_vec()
    } else {
        match serde_json::from_slice::<Value>(body) {
            Ok(value) => canonical(value).to_string().into_bytes(),
            Err(_) => body.to_vec(),
        }
    };
    let target = uri.path_and_query().map_or(uri.path(), |p| p.as_str());
    let mut hash = Sha256::new();
    for part in [method.as_str().as_bytes(), target.as_bytes(), &canonical] {
        hash.update(u64::try_from(part.len()).unwrap_or(u64::MAX).to_be_bytes());
        hash.update(part);
    }
    hash.finalize().to_vec()
}

/// The value with every object's keys in order (whatever order serde_json's maps keep).
fn canonical(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, canonical(v)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(canonical).collect()),
        other => other,
    }
}

/// Answers a request that carries a key: the first answer again, a refusal, or the request
/// run once and its answer kept.
pub(crate) async fn answer(
    gateway: &Arc<Gateway>,
    route: &Arc<Route>,
    key: String,
    request_hash: Vec<u8>,
    encoded: Bytes,
    metadata: MetadataMap,
) -> Result<Response, ApiError> {
    let request = pb::ClaimIdempotencyKeyRequest {
        key: key.clone(),
        request_hash: request_hash.clone(),
    };
    let mut client = IdempotencyServiceClient::new(gateway.channel.clone());
    let claimed = tokio::time::timeout(
        CALL_TIMEOUT,
        client.claim_idempotency_key(timed(metadata.clone(), request)),
    )
    .await
    .unwrap_or_else(|_| {
        Err(tonic::Status::deadline_exceeded(
            "the api did not answer in time",
        ))
    });
    let claimed = match claimed {
        Ok(claimed) => {
            record_principal(claimed.metadata());
            claimed.into_inner()
        }
        Err(status) => {
            record_principal(status.metadata());
            return Err(ApiError::from_status(&status));
        }
    };
    match claimed.outcome() {
        IdempotencyOutcome::Started => {}
        IdempotencyOutcome::InProgress => {
            return Err(ApiError::conflict(IN_PROGRESS).retry_after(IN_PROGRESS_RETRY_AFTER));
        }
        IdempotencyOutcome::Mismatch => return Err(ApiError::conflict(MISMATCH)),
        IdempotencyOutcome::Done => return replay(claimed.status, claimed.body),
        IdempotencyOutcome::Unspecified => {
            tracing::error!("the api's idempotency claim has no outcome");
            return Err(ApiError::internal());
        }
    }
    let claim = Claim {
        user_id: claimed.user_id,
        key,
        request_hash,
    };
    // Run and record in a task of its own: a caller that goes away mid-request doesn't stop
    // the answer from being kept, so its retry gets it rather than a claim in progress.
    let run = run(
        Arc::clone(gateway),
        Arc::clone(route),
        claim,
        encoded,
        metadata,
    );
    tokio::spawn(run.instrument(tracing::Span::current()))
        .await
        .unwrap_or_else(|err| {
            tracing::error!(%err, "an idempotent request's task failed");
            Err(ApiError::internal())
        })
}

/// The request's call, then its claim finished (a success) or released (anything else).
async fn run(
    gateway: Arc<Gateway>,
    route: Arc<Route>,
    claim: Claim,
    encoded: Bytes,
    metadata: MetadataMap,
) -> Result<Response, ApiError> {
    let request_id = metadata.get(REQUEST_ID).cloned();
    let call = upstream::call(
        gateway.channel.clone(),
        route.grpc_path.clone(),
        encoded,
        metadata,
    );
    let answered = match call.await {
        Ok(answer) => {
            record_principal(answer.metadata());
            decode(&route, answer.into_inner())
                .and_then(|output| to_json(&gateway, &route, &output))
        }
        Err(status) => {
            record_principal(status.metadata());
            Err(ApiError::from_status(&status))
        }
    };
    let mut client = IdempotencyServiceClient::new(gateway.channel.clone());
    let mut metadata = MetadataMap::new();
    if let Some(id) = request_id {
        metadata.insert(REQUEST_ID, id);
    }
    let recorded = match &answered {
        Ok(json) => {
            // A secret is never kept: the replay says the request was done instead.
            let body = (!route.answer_carries_secret).then(|| json.to_string());
            let request = pb::FinishIdempotencyKeyRequest {
                user_id: claim.user_id,
                key: claim.key,
                request_hash: claim.request_hash,
                status: u32::from(route.success.as_u16()),
                body,
            };
            let finish = client.finish_idempotency_key(timed(metadata, request));
            tokio::time::timeout(CALL_TIMEOUT, finish)
                .await
                .map(|r| r.map(drop))
        }
        Err(_) => {
            let request = pb::ReleaseIdempotencyKeyRequest {
                user_id: claim.user_id,
                key: claim.key,
                request_hash: claim.request_hash,
            };
            let release = client.release_idempotency_key(timed(metadata, request));
            tokio::time::timeout(CALL_TIMEOUT, release)
                .await
                .map(|r| r.map(drop))
        }
    };
    match recorded {
        Ok(Ok(())) => {}
        Ok(Err(status)) => {
            tracing::warn!(code = ?status.code(), message = status.message(), "couldn't record an Idempotency-Key's answer: the key stays in progress until it is abandoned");
        }
        Err(_) => {
            tracing::warn!(
                "couldn't record an Idempotency-Key's answer in time: the key stays in progress until it is abandoned"
            );
        }
    }
    let json = answered?;
    Ok(json_response(route.success, json.to_string(), false))
}

/// The first answer again, or, when it carried a secret, a conflict that says it was done.
fn replay(kept: u32, body: Option<String>) -> Result<Response, ApiError> {
    let status = u16::try_from(kept)
        .ok()
        .and_then(|s| StatusCode::from_u16(s).ok())
        .filter(StatusCode::is_success);
    let Some(status) = status else {
        tracing::error!(
            status = kept,
            "a kept idempotent answer has no success status"
        );
        return Err(ApiError::internal());
    };
    match body {
        Some(body) => Ok(json_response(status, body, true)),
        None => Err(ApiError::conflict(WITHHELD)),
    }
}

fn json_response(status: StatusCode, body: String, replayed: bool) -> Response {
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if replayed {
        headers.insert(REPLAYED, HeaderValue::from_static("true"));
    }
    (status, headers, Body::from(body)).into_response()
}

fn timed<T>(metadata: MetadataMap, message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::from_parts(metadata, Default::default(), message);
    request.set_timeout(CALL_TIMEOUT);
    request
}

#[cfg(test)]
mod tests;
