//! What one request to an endpoint may ask of its worker: a body of bounded size, a bounded
//! number of tokens (set to the bound when the request names none, so nothing generates
//! unbounded), a bounded number of requests through to it at once per endpoint with a bounded
//! queue behind them (`queue.rs`), and time limits for the first byte and for the whole
//! answer. Each refusal names the limit.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use einsora_runtime::settings::{ConfigError, Settings};
use serde_json::Value;

use crate::errors::Failure;
use crate::queue::Bounds;
use crate::usage;

pub const MAX_BODY: &str = "EINSORA_ENDPOINT_MAX_BODY_BYTES";
pub const MAX_TOKENS: &str = "EINSORA_ENDPOINT_MAX_TOKENS";
pub const CONCURRENCY: &str = "EINSORA_ENDPOINT_CONCURRENCY";
pub const QUEUE: &str = "EINSORA_ENDPOINT_QUEUE";
pub const QUEUE_WAIT: &str = "EINSORA_ENDPOINT_QUEUE_WAIT";
pub const TIMEOUT: &str = "EINSORA_ENDPOINT_TIMEOUT";
pub const WAKE_WAIT: &str = "EINSORA_ENDPOINT_WAKE_WAIT";
/// The longest queue an endpoint may have.
const MOST_QUEUED: u64 = 100_000;

/// The token fields of OpenAI-style requests (and llama.cpp's own).
const TOKEN_FIELDS: [&str; 3] = ["max_tokens", "max_completion_tokens", "n_predict"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    pub max_body_bytes: usize,
    pub max_tokens: u64,
    /// Requests through to one endpoint's engine at once, whatever its slots.
    pub concurrency: usize,
    /// Requests waiting per endpoint, behind those through (0: none wait).
    pub queue: usize,
    /// How long one may wait.
    pub queue_wait: Duration,
    /// For the worker's first byte, and again for the whole answer to stream.
    pub timeout: Duration,
    /// How long a request to a parked endpoint is held while it wakes (`wake.rs`).
    pub wake_wait: Duration,
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
        let queue = settings.parse_with(QUEUE, "64", |v| match v.parse::<u64>() {
            Ok(n) if n <= MOST_QUEUED => Ok(n),
            _ => Err(format!("is not a whole number from 0 to {MOST_QUEUED}")),
        })?;
        Ok(Limits {
            max_body_bytes: usize::try_from(positive(MAX_BODY, "1048576")?).unwrap_or(usize::MAX),
            max_tokens: positive(MAX_TOKENS, "4096")?,
            concurrency: usize::try_from(positive(CONCURRENCY, "8")?).unwrap_or(usize::MAX),
            queue: usize::try_from(queue).unwrap_or(usize::MAX),
            queue_wait: settings.positive_duration(QUEUE_WAIT, "30s")?,
            timeout,
            wake_wait: settings.positive_duration(WAKE_WAIT, "2m")?,
        })
    }

    /// What the queue of an endpoint with `slots` (0: the controller didn't say) is held to:
    /// through to its engine at once no more than its slots and the setting allow.
    pub(crate) fn queue_bounds(&self, slots: u32) -> Bounds {
        let slots = usize::try_from(slots).unwrap_or(usize::MAX);
        let cap = match slots {
            0 => self.concurrency,
            n => n.min(self.concurrency),
        };
        Bounds {
            cap,
            length: self.queue,
            wait: self.queue_wait,
        }
    }
}

impl Default for Limits {
    /// The settings' defaults.
    fn default() -> Self {
        let none = Settings::from_map(std::iter::empty::<(String, String)>());
        Limits::from_settings(&none).expect("the defaults are valid")
    }
}

/// The request's body within the size limit, its token count bounded (and set when absent).
/// Only JSON objects are generation requests; `models` takes no body.
pub(crate) async fn bounded_body(
    body: Body,
    limits: &Limits,
    generates: bool,
) -> Result<Bytes, Failure> {
    Ok(bounded(body, limits, generates, false).await?.0)
}

/// As [`bounded_body`], in the same one parse a stream asking its engine for usage
/// (`usage::ask_engine`): what was added, to be taken out of the answer the client sees.
pub(crate) async fn bounded_counted_body(
    body: Body,
    limits: &Limits,
    generates: bool,
) -> Result<(Bytes, usage::Added), Failure> {
    bounded(body, limits, generates, true).await
}

async fn bounded(
    body: Body,
    limits: &Limits,
    generates: bool,
    ask_usage: bool,
) -> Result<(Bytes, usage::Added), Failure> {
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
        return Ok((bytes, usage::Added::default()));
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
    let added = match request.as_object_mut() {
        Some(request) if ask_usage => usage::ask_engine(request),
        _ => usage::Added::default(),
    };
    Ok((Bytes::from(request.to_string()), added))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            max_body_bytes: 64,
            max_tokens: 16,
            concurrency: 2,
            queue: 3,
            queue_wait: Duration::from_secs(5),
            timeout: Duration::from_secs(1),
            wake_wait: Duration::from_secs(1),
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

    /// Through at once: the endpoint's slots, no more than the setting; all of the setting
    /// where the controller didn't say.
    #[test]
    fn the_cap_is_the_slots_within_the_setting() {
        let limits = limits();
        let cap = |slots| limits.queue_bounds(slots).cap;
        assert_eq!((cap(1), cap(2), cap(64), cap(0)), (1, 2, 2, 2));
        assert_eq!(limits.queue_bounds(1).length, 3);
    }

    #[test]
    fn queue_settings_are_read_and_bounded() {
        let read = |pairs: &[(&str, &str)]| {
            let settings = Settings::from_map(pairs.iter().map(|(k, v)| (*k, *v)));
            Limits::from_settings(&settings)
        };
        let defaults = read(&[]).unwrap();
        assert_eq!(
            (defaults.queue, defaults.queue_wait),
            (64, Duration::from_secs(30))
        );
        let none = read(&[(QUEUE, "0"), (QUEUE_WAIT, "2s")]).unwrap();
        assert_eq!((none.queue, none.queue_wait), (0, Duration::from_secs(2)));
        for bad in [(QUEUE, "-1"), (QUEUE, "100001"), (QUEUE_WAIT, "0s")] {
            assert!(read(&[bad]).is_err(), "{bad:?}");
        }
    }
}
