//! The proxy's own answers: the JSON error envelope `{"error": {"code", "message",
//! "request_id"}}`, as the gateway's. Messages are fixed phrases: no ticket, token, cookie or
//! URL ever reaches one.

use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue, RETRY_AFTER, SET_COOKIE};
use axum::http::{HeaderName, StatusCode};
use axum::response::{IntoResponse, Response};
use einsora_runtime::error_code::ErrorCode;
use std::borrow::Cow;
use uuid::Uuid;

pub(crate) const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// A request's ID: generated here, never taken from the caller.
#[derive(Debug, Clone)]
pub(crate) struct RequestId(String);

impl RequestId {
    pub(crate) fn new() -> Self {
        RequestId(Uuid::now_v7().to_string())
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    pub(crate) fn header(&self) -> HeaderValue {
        HeaderValue::from_str(&self.0).expect("a UUID is a header value")
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    status: StatusCode,
    code: &'static str,
    message: Cow<'static, str>,
    /// Set-Cookie that ends the browser's session with the answer.
    clear_cookie: Option<HeaderValue>,
}

impl Failure {
    fn new(code: ErrorCode, message: impl Into<Cow<'static, str>>) -> Self {
        Failure {
            status: code.status(),
            code: code.as_str(),
            message: message.into(),
            clear_cookie: None,
        }
    }

    /// A request over one of an endpoint's limits, naming it.
    pub(crate) fn over_limit(status: StatusCode, message: String) -> Self {
        let code = match status {
            StatusCode::PAYLOAD_TOO_LARGE => ErrorCode::TooLarge,
            StatusCode::TOO_MANY_REQUESTS => ErrorCode::RateLimited,
            StatusCode::GATEWAY_TIMEOUT => ErrorCode::Timeout,
            _ => ErrorCode::InvalidRequest,
        };
        Self::new(code, message)
    }

    pub(crate) fn invalid(message: &'static str) -> Self {
        Self::new(ErrorCode::InvalidRequest, message)
    }

    pub(crate) fn unauthenticated(message: &'static str) -> Self {
        Self::new(ErrorCode::Unauthenticated, message)
    }

    pub(crate) fn forbidden(message: &'static str) -> Self {
        Self::new(ErrorCode::Forbidden, message)
    }

    pub(crate) fn not_found(message: &'static str) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }

    pub(crate) fn method_not_allowed() -> Self {
        Self::new(
            ErrorCode::MethodNotAllowed,
            "this path does not take this method",
        )
    }

    /// The cause goes to the operator's log, logged by whoever answers this.
    /// The controller won't hand out this workload's socket, and says why (its own words).
    pub(crate) fn unreachable(message: String) -> Self {
        Self::new(ErrorCode::Conflict, message)
    }

    /// What the proxy would dial isn't the workload's own socket: nothing was connected to.
    pub(crate) fn tampered() -> Self {
        Self::new(
            ErrorCode::BadGateway,
            "the workload's socket was replaced by something else; nothing was connected to it",
        )
    }

    pub(crate) fn unavailable(message: &'static str) -> Self {
        Self::new(ErrorCode::Unavailable, message)
    }

    pub(crate) fn with_cleared_cookie(mut self, set_cookie: HeaderValue) -> Self {
        self.clear_cookie = Some(set_cookie);
        self
    }

    #[cfg(test)]
    pub(crate) fn code(&self) -> &'static str {
        self.code
    }

    pub(crate) fn response(self, id: &RequestId) -> Response {
        let body = serde_json::json!({
            "error": {
                "code": self.code,
                "message": self.message.as_ref(),
                "request_id": id.as_str(),
            }
        });
        let mut response = (self.status, body.to_string()).into_response();
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
        if matches!(
            self.status,
            StatusCode::SERVICE_UNAVAILABLE | StatusCode::TOO_MANY_REQUESTS
        ) {
            headers.insert(RETRY_AFTER, HeaderValue::from_static("1"));
        }
        if let Some(cookie) = self.clear_cookie {
            headers.insert(SET_COOKIE, cookie);
        }
        response
    }
}
