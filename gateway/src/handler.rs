//! One route's handler: the request transcoded into its RPC's message, the call with the
//! metadata of docs/api.md ("Gateway → api"), and the answer written back as JSON. The
//! request's secrets (cookie, CSRF token, bearer token, body) go to the api and nowhere else.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{FromRequestParts, Path, Request};
use axum::http::header::{CONTENT_TYPE, SET_COOKIE};
use axum::http::{HeaderMap, HeaderValue, Method};
use axum::response::{IntoResponse, Response};
use einsora_proto::metadata as keys;
use prost::Message;
use prost_reflect::DynamicMessage;
use tonic::metadata::{AsciiMetadataValue, MetadataMap};

use crate::app::Gateway;
use crate::edge::{Caller, REQUEST_ID, RequestId};
use crate::errors::ApiError;
use crate::json::{encode_field, encode_message};
use crate::routes::{LOGIN, LOGOUT, Route};
use crate::{bind, idempotency, known_client, session, stream, upstream};

const MAX_BODY_BYTES: usize = 1 << 20;

pub(crate) async fn handle(gateway: Arc<Gateway>, route: Arc<Route>, request: Request) -> Response {
    let id = request.extensions().get::<RequestId>().cloned();
    let id = id.unwrap_or_else(RequestId::generate);
    match answer(&gateway, &route, request, &id).await {
        Ok(response) => response,
        Err(error) => error.into_response(&id),
    }
}

async fn answer(
    gateway: &Arc<Gateway>,
    route: &Arc<Route>,
    request: Request,
    id: &RequestId,
) -> Result<Response, ApiError> {
    let Some(caller) = request.extensions().get::<Caller>().copied() else {
        tracing::error!("a route was reached without the edge layer");
        return Err(ApiError::internal());
    };
    if route.carries_password() {
        session::login_allowed(&caller, gateway.insecure_http)?;
    }
    let (mut parts, body) = request.into_parts();
    let Path(path) = Path::<Vec<(String, String)>>::from_request_parts(&mut parts, &())
        .await
        .map_err(|_| ApiError::invalid("the path is not percent-encoded UTF-8"))?;
    let body = axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|_| ApiError::invalid("the body could not be read, or is over 1 MiB"))?;
    check_content_type(&parts.method, &parts.headers, &body)?;
    let idempotency_key = idempotency::key(route, &parts.headers)?;
    let message = bind::request(route, &gateway.words, &path, parts.uri.query(), &body)
        .map_err(|invalid| ApiError::invalid(invalid.to_string()))?;

    let mut metadata = metadata(&parts.headers, id, &caller);
    if route.is(LOGIN) {
        add_known_client(&mut metadata, &parts.headers);
    }
    let encoded = message.encode_to_vec().into();
    if route.streaming {
        return stream::answer(gateway, route, &message, encoded, metadata, id).await;
    }
    if let Some(key) = idempotency_key {
        let hash = idempotency::request_hash(&parts.method, &parts.uri, &body);
        return idempotency::answer(gateway, route, key, hash, encoded, metadata).await;
    }
    let call = upstream::call(
        gateway.channel.clone(),
        route.grpc_path.clone(),
        encoded,
        metadata,
    );
    let (answer, proof_cookie) = match call.await {
        Ok(answer) => {
            record_principal(answer.metadata());
            let proof_cookie = known_client::set(answer.metadata(), caller.https);
            (answer.into_inner(), proof_cookie)
        }
        Err(status) => {
            record_principal(status.metadata());
            return Err(ApiError::from_status(&status));
        }
    };
    let output = decode(route, answer)?;

    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if route.is(LOGIN) {
        let session_id = output.get_field_by_name("session_id");
        let cookie = session_id.and_then(|id| session::set(id.as_str()?, caller.https));
        let Some(cookie) = cookie else {
            tracing::error!("the api's login answer has no usable session_id");
            return Err(ApiError::internal());
        };
        headers.insert(SET_COOKIE, cookie);
        if let Some(proof) = proof_cookie {
            headers.append(SET_COOKIE, proof);
        }
    } else if route.is(LOGOUT) {
        headers.insert(SET_COOKIE, session::clear(caller.https));
    }
    let json = to_json(gateway, route, &output)?;
    Ok((route.success, headers, Body::from(json.to_string())).into_response())
}

/// An answer of the route's RPC, decoded.
pub(crate) fn decode(route: &Route, answer: bytes::Bytes) -> Result<DynamicMessage, ApiError> {
    DynamicMessage::decode(route.output.clone(), answer).map_err(|err| {
        tracing::error!(%err, rpc = route.rpc, "the api's answer does not decode");
        ApiError::internal()
    })
}

/// An answer's JSON form: the route's response field, or the whole message.
pub(crate) fn to_json(
    gateway: &Gateway,
    route: &Route,
    output: &DynamicMessage,
) -> Result<serde_json::Value, ApiError> {
    let json = match &route.response_field {
        Some(field) => encode_field(field, &output.get_field(field), &gateway.words),
        None => encode_message(output, &gateway.words),
    };
    json.map_err(|err| {
        tracing::error!(%err, rpc = route.rpc, "the api's answer has no JSON form");
        ApiError::internal()
    })
}

/// A body must be JSON and say so; a form or text/plain post (what a cross-site page can send
/// without a preflight) is refused even when empty.
fn check_content_type(method: &Method, headers: &HeaderMap, body: &[u8]) -> Result<(), ApiError> {
    let content_type = headers
        .get(CONTENT_TYPE)
        .map(|v| v.to_str().unwrap_or_default());
    match content_type {
        None if body.is_empty() => Ok(()),
        Some(value) if is_json(value) => Ok(()),
        Some(_) if body.is_empty() && (method == Method::GET || method == Method::HEAD) => Ok(()),
        _ => Err(ApiError::invalid(
            "send the body as JSON, with Content-Type: application/json",
        )),
    }
}

fn is_json(value: &str) -> bool {
    let mut parts = value.split(';').map(str::trim);
    let essence = parts.next().unwrap_or_default();
    essence.eq_ignore_ascii_case("application/json")
        && parts.all(|p| p.is_empty() || p.replace('"', "").eq_ignore_ascii_case("charset=utf-8"))
}

fn metadata(headers: &HeaderMap, id: &RequestId, caller: &Caller) -> MetadataMap {
    let mut metadata = MetadataMap::new();
    // Every value is passed on, so the api can refuse a request carrying two credentials of a
    // kind rather than one of them being picked here. A value no metadata can carry is dropped:
    // the api then sees no such credential.
    let mut append = |key: &'static str, value: &str| {
        if let Ok(value) = AsciiMetadataValue::try_from(value) {
            metadata.append(key, value);
        }
    };
    append(REQUEST_ID, id.as_str());
    append(keys::CLIENT_ADDR, &caller.addr.to_string());
    for session in session::from_request(headers) {
        append(keys::SESSION, session);
    }
    for (header, key) in [
        ("x-csrf-token", keys::CSRF),
        ("authorization", "authorization"),
    ] {
        for value in headers.get_all(header) {
            append(key, value.to_str().unwrap_or_default());
        }
    }
    // This request's trace goes on in the api.
    einsora_runtime::telemetry::traces::inject_metadata(&mut metadata);
    metadata
}

/// Login also carries the proofs of earlier sign-ins the browser kept (crate::known_client).
fn add_known_client(metadata: &mut MetadataMap, headers: &HeaderMap) {
    for proof in known_client::from_request(headers) {
        if let Ok(value) = AsciiMetadataValue::try_from(proof) {
            metadata.append(known_client::METADATA, value);
        }
    }
}

/// The api names the authenticated tenant and subject in `x-einsora-tenant` and
/// `x-einsora-subject`, so every later line of this request carries them.
pub(crate) fn record_principal(metadata: &MetadataMap) {
    let span = tracing::Span::current();
    for key in ["tenant", "subject"] {
        let value = metadata.get(format!("x-einsora-{key}").as_str());
        if let Some(value) = value.and_then(|v| v.to_str().ok()) {
            span.record(key, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_type(value: &'static str) -> HeaderMap {
        HeaderMap::from_iter([(CONTENT_TYPE, HeaderValue::from_static(value))])
    }

    #[test]
    fn bodies_must_be_declared_json() {
        let post = Method::POST;
        assert!(check_content_type(&post, &HeaderMap::new(), b"").is_ok());
        assert!(check_content_type(&post, &with_type("application/json"), b"{}").is_ok());
        let utf8 = with_type("Application/JSON; charset=UTF-8");
        assert!(check_content_type(&post, &utf8, b"{}").is_ok());
        for refused in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data",
        ] {
            let error = check_content_type(&post, &with_type(refused), b"").unwrap_err();
            assert_eq!(
                (error.status.as_u16(), error.code),
                (400, "invalid_request")
            );
        }
        assert!(check_content_type(&post, &HeaderMap::new(), b"{}").is_err());
        let latin1 = with_type("application/json; charset=latin1");
        assert!(check_content_type(&post, &latin1, b"{}").is_err());
        assert!(check_content_type(&Method::GET, &with_type("text/plain"), b"").is_ok());
    }

    #[test]
    fn metadata_carries_the_credentials_and_the_callers_address() {
        let mut headers = HeaderMap::new();
        headers.insert("cookie", "einsora_session=sid".parse().unwrap());
        headers.insert("x-csrf-token", "csrf".parse().unwrap());
        headers.insert("authorization", "Bearer tsk_x".parse().unwrap());
        let caller = Caller {
            addr: "192.0.2.9".parse().unwrap(),
            https: false,
        };
        let id = RequestId::generate();
        let metadata = metadata(&headers, &id, &caller);
        assert_eq!(metadata.get("x-request-id").unwrap(), id.as_str());
        assert_eq!(metadata.get("x-einsora-client-addr").unwrap(), "192.0.2.9");
        assert_eq!(metadata.get("x-einsora-session").unwrap(), "sid");
        assert_eq!(metadata.get("x-einsora-csrf").unwrap(), "csrf");
        assert_eq!(metadata.get("authorization").unwrap(), "Bearer tsk_x");
        let bare = super::metadata(&HeaderMap::new(), &id, &caller);
        assert!(bare.get("x-einsora-session").is_none() && bare.get("authorization").is_none());
    }

    #[test]
    fn only_login_carries_the_known_client_proofs() {
        let mut headers = HeaderMap::new();
        headers.append(
            "cookie",
            "einsora_client=v1.a; einsora_session=sid".parse().unwrap(),
        );
        headers.append("cookie", "einsora_client=v1.b".parse().unwrap());
        let caller = Caller {
            addr: "127.0.0.1".parse().unwrap(),
            https: false,
        };
        let mut login = metadata(&headers, &RequestId::generate(), &caller);
        assert!(
            login.get(known_client::METADATA).is_none(),
            "not on other routes"
        );
        add_known_client(&mut login, &headers);
        let proofs: Vec<_> = login
            .get_all(known_client::METADATA)
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .collect();
        assert_eq!(proofs, ["v1.a", "v1.b"]);
    }
}
