//! What one request to an endpoint may ask of its worker: a body of bounded size, a bounded
//! number of tokens (set to the bound when the request names none, so nothing generates
//! unbounded), a bounded number of requests in flight per endpoint, and time limits for the
//! first byte and for the whole answer. Each refusal names the limit.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use einsora_runtime::settings::{ConfigError, Settings};
use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use uuid::Uuid;

use crate::errors::Failure;

pub const MAX_BODY: &str = "EINSORA_ENDPOINT_MAX_BODY_BYTES";
pub const MAX_TOKENS: &str = "EINSORA_ENDPOINT_MAX_TOKENS";
pub const CONCURRENCY: &str = "EINSORA_ENDPOINT_CONCURRENCY";
pub const TIMEOUT: &str = "EINSORA_ENDPOINT_TIMEOUT";

/// The token fields of OpenAI-style requests (and llama.cpp's own).
const TOKEN_FIELDS: [&str; 3] = ["max_tokens", "max_completion_tokens", "n_predict"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    pub max_body_bytes: usize,
    pub max_tokens: u64,
    /// Requests in flight per endpoint.
    pub concurrency: usize,
    /// For the worker's first byte, and again for the whole answer to stream.
    pub timeout: Duration,
}

impl Limits {
    pub fn from_settings(settings: &Settings) -> Result<Self, ConfigError> {
        let positive = |name: &str, default: &str| {
            settings.parse_with(name, default, |v| match v.parse::<u64>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err("is not a positive whole number".to_owned()),
            })
        };
        let timeout = settings.positive_duration(TIMEOUT, "10m")?;
        Ok(Limits {
            max_body_bytes: usize::try_from(positive(MAX_BODY, "1048576")?).unwrap_or(usize::MAX),
            max_tokens: positive(MAX_TOKENS, "4096")?,
            concurrency: usize::try_from(positive(CONCURRENCY, "8")?).unwrap_or(usize::MAX),
            timeout,
        })
    }
}

impl Default for Limits {
    /// The settings' defaults.
    fn default() -> Self {
        let none = Settings::from_map(std::iter::empty::<(String, String)>());
        Limits::from_settings(&none).expect("the defaults are valid")
    }
}

/// Each endpoint's requests in flight.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    endpoints: Mutex<HashMap<Uuid, Arc<Semaphore>>>,
}

impl InFlight {
    /// A place among the endpoint's requests in flight, held until the answer ends.
    pub(crate) fn enter(
        &self,
        endpoint: Uuid,
        limits: &Limits,
    ) -> Result<OwnedSemaphorePermit, Failure> {
        let semaphore = {
            let mut endpoints = self
                .endpoints
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            // An endpoint with nothing in flight needs no entry (a permit holds its semaphore).
            endpoints.retain(|_, s| Arc::strong_count(s) > 1);
            Arc::clone(
                endpoints
                    .entry(endpoint)
                    .or_insert_with(|| Arc::new(Semaphore::new(limits.concurrency))),
            )
        };
        semaphore.try_acquire_owned().map_err(|_| {
            Failure::over_limit(
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "this endpoint already has {} requests in flight ({CONCURRENCY}); retry shortly",
                    limits.concurrency
                ),
            )
        })
    }
}

/// The request's body within the size limit, its token count bounded (and set when absent).
/// Only JSON objects are generation requests; `models` takes no body.
pub(crate) async fn bounded_body(
    body: Body,
    limits: &Limits,
    generates: bool,
) -> Result<Bytes, Failure> {
    let too_large = || {
        Failure::over_limit(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the request body is over {} bytes ({MAX_BODY})",
                limits.max_body_bytes
            ),
        )
    };
    let bytes = axum::body::to_bytes(body, limits.max_body_bytes)
        .await
        .map_err(|_| too_large())?;
    if !generates {
        return Ok(bytes);
    }
    let mut request: Value = serde_json::from_slice(&bytes)
        .ok()
        .filter(Value::is_object)
        .ok_or_else(|| Failure::invalid("the request body is not a JSON object"))?;
    let mut named = false;
    for field in TOKEN_FIELDS {
        match request.get(field) {
            None | Some(Value::Null) => {}
            Some(value) => {
                named = true;
                let n = value.as_i64().filter(|n| *n >= 0 || *n == -1);
                let over = n.is_none_or(|n| n == -1 || n.unsigned_abs() > limits.max_tokens);
                if over {
                    return Err(Failure::over_limit(
                        StatusCode::BAD_REQUEST,
                        format!("{field}: at most {} ({MAX_TOKENS})", limits.max_tokens),
                    ));
                }
            }
        }
    }
    if !named {
        request["max_tokens"] = Value::from(limits.max_tokens);
    }
    Ok(Bytes::from(request.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            max_body_bytes: 64,
            max_tokens: 16,
            concurrency: 2,
            timeout: Duration::from_secs(1),
        }
    }

    async fn bounded(text: &str) -> Result<Value, Failure> {
        let bytes = bounded_body(Body::from(text.to_owned()), &limits(), true).await?;
        Ok(serde_json::from_slice(&bytes).unwrap())
    }

    #[tokio::test]
    async fn tokens_are_bounded_and_set_when_absent() {
        assert_eq!(
            bounded(r#"{"max_tokens":16}"#).await.unwrap()["max_tokens"],
            16
        );
        assert_eq!(bounded("{}").await.unwrap()["max_tokens"], 16);
        for over in [
            r#"{"max_tokens":17}"#,
            r#"{"max_completion_tokens":1000}"#,
            r#"{"n_predict":-1}"#,
            r#"{"max_tokens":"9"}"#,
        ] {
            let refused = bounded(over).await.unwrap_err();
            assert_eq!(refused.code(), "invalid_request", "{over}");
        }
        assert_eq!(bounded("[1]").await.unwrap_err().code(), "invalid_request");
        let big = format!(r#"{{"prompt":"{}"}}"#, "x".repeat(100));
        assert_eq!(bounded(&big).await.unwrap_err().code(), "too_large");
    }

    #[test]
    fn requests_in_flight_are_bounded_per_endpoint() {
        let (in_flight, limits) = (InFlight::default(), limits());
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        let first = in_flight.enter(a, &limits).unwrap();
        let _second = in_flight.enter(a, &limits).unwrap();
        assert_eq!(
            in_flight.enter(a, &limits).unwrap_err().code(),
            "rate_limited"
        );
        assert!(
            in_flight.enter(b, &limits).is_ok(),
            "another endpoint has its own"
        );
        drop(first);
        assert!(
            in_flight.enter(a, &limits).is_ok(),
            "a finished request frees its place"
        );
    }
}
