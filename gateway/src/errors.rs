//! The one mapping from gRPC statuses (and the gateway's own refusals) to the HTTP error
//! envelope `{"error": {"code", "message", "request_id"}}`, as docs/api.md tabulates it.

use axum::http::StatusCode;
use axum::http::header::{CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use axum::response::{IntoResponse, Response};
use tonic::Status;

use einsora_proto::metadata::ERROR as ERROR_KEY;
use einsora_runtime::error_code::ErrorCode;

use crate::edge::RequestId;

/// Every `code` the gateway's envelope can carry, for the OpenAPI document: the one
/// vocabulary's, less the proxy's own.
pub(crate) fn codes() -> impl Iterator<Item = ErrorCode> {
    ErrorCode::ALL.into_iter().filter(|c| !c.proxy_only())
}

/// Seconds a caller waits when the api names none.
const DEFAULT_RETRY_AFTER: u64 = 1;
const INTERNAL_MESSAGE: &str = "something went wrong on our side; the request ID identifies it \
     in the operator's log";
const UNAVAILABLE_MESSAGE: &str = "the service is unavailable right now; try again shortly";

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) code: &'static str,
    pub(crate) message: String,
    pub(crate) retry_after: Option<u64>,
}

impl ApiError {
    fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            status: code.status(),
            code: code.as_str(),
            message: message.into(),
            retry_after: None,
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidRequest, message)
    }

    pub(crate) fn forbidden(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Forbidden, message)
    }

    pub(crate) fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Conflict, message)
    }

    /// The same error, telling the caller to try again after `seconds`.
    pub(crate) fn retry_after(self, seconds: u64) -> Self {
        ApiError {
            retry_after: Some(seconds),
            ..self
        }
    }

    pub(crate) fn not_found() -> Self {
        Self::new(ErrorCode::NotFound, "no such route")
    }

    pub(crate) fn method_not_allowed() -> Self {
        let message = "this route does not take this method (the Allow header lists those it does)";
        Self::new(ErrorCode::MethodNotAllowed, message)
    }

    /// The caller learns nothing; the operator's log has the cause, logged by whoever calls this.
    pub(crate) fn internal() -> Self {
        Self::new(ErrorCode::Internal, INTERNAL_MESSAGE)
    }

    /// The api's answer, per docs/api.md. Unexpected statuses are logged here, in full.
    pub(crate) fn from_status(status: &Status) -> Self {
        let message = status.message();
        let metadata = |key| status.metadata().get(key).and_then(|v| v.to_str().ok());
        match ErrorCode::from_grpc(status.code(), metadata(ERROR_KEY)) {
            None => unexpected(status),
            Some(ErrorCode::RateLimited) => ApiError {
                retry_after: Some(retry_after(metadata("retry-after"))),
                ..Self::new(ErrorCode::RateLimited, message)
            },
            // A deadline here is the gateway's own wait for the api running out.
            Some(ErrorCode::Unavailable) => {
                tracing::warn!(code = ?status.code(), message, "the api is unavailable");
                ApiError {
                    retry_after: Some(retry_after(metadata("retry-after"))),
                    ..Self::new(ErrorCode::Unavailable, UNAVAILABLE_MESSAGE)
                }
            }
            Some(code) => Self::new(code, message),
        }
    }

    /// The envelope: `{"error": {"code", "message", "request_id"}}`.
    pub(crate) fn envelope(&self, request_id: &RequestId) -> serde_json::Value {
        serde_json::json!({
            "error": {
                "code": self.code,
                "message": self.message,
                "request_id": request_id.as_str(),
            }
        })
    }

    pub(crate) fn into_response(self, request_id: &RequestId) -> Response {
        let body = self.envelope(request_id);
        let mut response = (self.status, body.to_string()).into_response();
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        // Every 503 and 429 says when to try again, whatever made it.
        let waits = matches!(
            self.status,
            StatusCode::SERVICE_UNAVAILABLE | StatusCode::TOO_MANY_REQUESTS
        );
        let retry_after = self.retry_after.or(waits.then_some(DEFAULT_RETRY_AFTER));
        if let Some(seconds) = retry_after {
            headers.insert(RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

fn unexpected(status: &Status) -> ApiError {
    tracing::error!(code = ?status.code(), message = status.message(), "the api answered an unexpected status");
    ApiError::internal()
}

fn retry_after(value: Option<&str>) -> u64 {
    value
        .and_then(|v| v.trim().parse().ok())
        .filter(|s| *s > 0)
        .unwrap_or(DEFAULT_RETRY_AFTER)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    fn with(code: Code, key: &'static str, value: &'static str) -> Status {
        let mut status = Status::new(code, "why");
        status.metadata_mut().insert(key, value.parse().unwrap());
        status
    }

    #[test]
    fn the_table_of_docs_api_md() {
        let cases = [
            (Status::invalid_argument("why"), 400, "invalid_request"),
            (Status::unauthenticated("why"), 401, "unauthenticated"),
            (Status::permission_denied("why"), 403, "forbidden"),
            (Status::not_found("why"), 404, "not_found"),
            (Status::already_exists("why"), 409, "conflict"),
            (
                with(Code::FailedPrecondition, "x-einsora-error", "conflict"),
                409,
                "conflict",
            ),
            (
                with(
                    Code::FailedPrecondition,
                    "x-einsora-error",
                    "quota_exceeded",
                ),
                409,
                "quota_exceeded",
            ),
            (
                with(
                    Code::FailedPrecondition,
                    "x-einsora-error",
                    "invalid_transition",
                ),
                409,
                "invalid_transition",
            ),
            (
                with(Code::FailedPrecondition, "x-einsora-error", "other"),
                500,
                "internal",
            ),
            (Status::failed_precondition("why"), 500, "internal"),
            (Status::resource_exhausted("why"), 429, "rate_limited"),
            (Status::unavailable("why"), 503, "unavailable"),
            (Status::deadline_exceeded("why"), 503, "unavailable"),
            (Status::internal("secret detail"), 500, "internal"),
            (Status::unknown("secret detail"), 500, "internal"),
            (Status::out_of_range("secret detail"), 500, "internal"),
        ];
        for (status, http, code) in cases {
            let error = ApiError::from_status(&status);
            assert_eq!(
                (error.status.as_u16(), error.code),
                (http, code),
                "{status:?}"
            );
            assert!(codes().any(|c| c.as_str() == error.code));
            if http == 500 || http == 503 {
                assert!(!error.message.contains("detail"), "details stay in the log");
            } else {
                assert_eq!(error.message, "why");
            }
        }
    }

    #[test]
    fn retry_after_comes_from_metadata_with_a_default() {
        let limited = with(Code::ResourceExhausted, "retry-after", "30");
        assert_eq!(ApiError::from_status(&limited).retry_after, Some(30));
        let garbled = with(Code::ResourceExhausted, "retry-after", "soon");
        assert_eq!(ApiError::from_status(&garbled).retry_after, Some(1));
        let down = ApiError::from_status(&Status::unavailable("connection refused"));
        assert_eq!(down.retry_after, Some(1));
        assert_eq!(ApiError::invalid("x").retry_after, None);
    }

    #[test]
    fn every_503_and_429_carries_retry_after() {
        let id = RequestId::generate();
        for code in [ErrorCode::Unavailable, ErrorCode::RateLimited] {
            let response = ApiError::new(code, "x").into_response(&id);
            assert_eq!(response.headers()[RETRY_AFTER], "1", "{code:?}");
        }
        let in_progress = ApiError::conflict("x").retry_after(3).into_response(&id);
        assert_eq!(in_progress.headers()[RETRY_AFTER], "3");
        let plain = ApiError::conflict("x").into_response(&id);
        assert!(plain.headers().get(RETRY_AFTER).is_none());
    }

    #[tokio::test]
    async fn the_envelope_carries_code_message_and_request_id() {
        let id = RequestId::generate();
        let response = ApiError::from_status(&Status::unavailable("x")).into_response(&id);
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()[RETRY_AFTER], "1");
        assert_eq!(response.headers()[CONTENT_TYPE], "application/json");
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        let expected = serde_json::json!({ "error": {
            "code": "unavailable",
            "message": UNAVAILABLE_MESSAGE,
            "request_id": id.as_str(),
        } });
        assert_eq!(body, expected);
    }
}
