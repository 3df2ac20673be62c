//! A server-streaming route's answer (docs/api.md, "Streams"): without `follow`, its one
//! message as JSON, like any route; with it, NDJSON, one message per line as the api sends
//! it, until the api ends the stream. An error after the first line comes as a last line in
//! the error envelope.

use std::sync::Arc;

use axum::body::Body;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use prost_reflect::DynamicMessage;
use tonic::metadata::MetadataMap;

use crate::app::Gateway;
use crate::edge::RequestId;
use crate::errors::ApiError;
use crate::handler::{decode, record_principal, to_json};
use crate::routes::{FOLLOW, Route};
use crate::upstream;

pub(crate) async fn answer(
    gateway: &Arc<Gateway>,
    route: &Arc<Route>,
    request: &DynamicMessage,
    encoded: Bytes,
    metadata: MetadataMap,
    id: &RequestId,
) -> Result<Response, ApiError> {
    let call = upstream::stream(
        gateway.channel.clone(),
        route.grpc_path.clone(),
        encoded,
        metadata,
    );
    let mut messages = match call.await {
        Ok(answer) => {
            record_principal(answer.metadata());
            answer.into_inner()
        }
        Err(status) => {
            record_principal(status.metadata());
            return Err(ApiError::from_status(&status));
        }
    };
    let follow = request.get_field_by_name(FOLLOW).and_then(|v| v.as_bool());
    if follow != Some(true) {
        let first = messages
            .message()
            .await
            .map_err(|s| ApiError::from_status(&s))?;
        let Some(first) = first else {
            tracing::error!(
                rpc = route.rpc,
                "the api's stream ended before its first message"
            );
            return Err(ApiError::internal());
        };
        let json = to_json(gateway, route, &decode(route, first)?)?;
        let json_type = HeaderValue::from_static("application/json");
        return Ok((route.success, [(CONTENT_TYPE, json_type)], json.to_string()).into_response());
    }
    let (gateway, route, id) = (gateway.clone(), route.clone(), id.clone());
    let lines = futures::stream::unfold(Some(messages), move |messages| {
        let (gateway, route, id) = (gateway.clone(), route.clone(), id.clone());
        async move {
            let mut messages = messages?;
            // The gateway stopping ends the stream (its client follows again), so an open
            // follow never holds its shutdown up.
            let next = tokio::select! {
                next = messages.message() => next,
                () = gateway.shutdown.cancelled() => {
                    Err(tonic::Status::unavailable("the gateway is stopping: follow again"))
                }
            };
            let line = match next {
                Ok(None) => return None,
                Ok(Some(message)) => decode(&route, message)
                    .and_then(|m| to_json(&gateway, &route, &m))
                    .map_err(|error| error.envelope(&id)),
                Err(status) => Err(ApiError::from_status(&status).envelope(&id)),
            };
            let (json, next) = match line {
                Ok(json) => (json, Some(messages)),
                Err(envelope) => (envelope, None),
            };
            let mut line = json.to_string().into_bytes();
            line.push(b'\n');
            Some((Ok::<_, std::convert::Infallible>(Bytes::from(line)), next))
        }
    });
    let headers = [
        (
            CONTENT_TYPE,
            HeaderValue::from_static("application/x-ndjson"),
        ),
        (CACHE_CONTROL, HeaderValue::from_static("no-store")),
    ];
    Ok((StatusCode::OK, headers, Body::from_stream(lines)).into_response())
}
