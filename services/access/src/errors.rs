//! The proxy's own answers. At notebooks, the JSON error envelope `{"error": {"code",
//! "message", "request_id"}}`, as the gateway's; at endpoints, OpenAI's shape, which their
//! clients parse: `{"error": {"message", "type", "code", "param"}}`, the request ID in the
//! `X-Request-ID` header only. Messages are fixed phrases or name a limit: no ticket, token,
//! cookie or URL ever reaches one. A 429 or 503 says when to retry: `Retry-After` in whole
//! seconds (rounded up) and `retry-after-ms`, which the OpenAI SDKs read first.

use std::borrow::Cow;
use std::time::Duration;

use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue, RETRY_AFTER, SET_COOKIE};
use axum::http::{HeaderName, StatusCode};
use axum::response::{IntoResponse, Response};
use einsora_runtime::error_code::ErrorCode;
use uuid::Uuid;

pub(crate) const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
pub(crate) const RETRY_AFTER_MS: HeaderName = HeaderName::from_static("retry-after-ms");
/// OpenAI's code for a model no endpoint serves (the one base URL's, `gateway.rs`).
const MODEL_NOT_FOUND: &str = "model_not_found";
/// When to retry a 429 or 503 that names no better time.
const RETRY: Duration = Duration::from_secs(1);

/// Which envelope an answer is in: the site's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Envelope {
    /// Notebooks, and whatever fails before the site is known.
    Einsora,
    /// Endpoints' OpenAI-compatible routes.
    OpenAi,
    /// The Messages API's route (`translate/messages.rs`): `{"type":"error","error":{"type",
    /// "message"}}`, which Anthropic's clients parse.
    Anthropic,
}

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
    /// When to retry, if not [`RETRY`] (429 and 503 only).
    retry_after: Option<Duration>,
    /// Headers of its own (a limit's `x-ratelimit-*`, `ratelimit.rs`); boxed, as it is rare.
    headers: Option<Box<axum::http::HeaderMap>>,
}

impl Failure {
    fn new(code: ErrorCode, message: impl Into<Cow<'static, str>>) -> Self {
        Failure {
            status: code.status(),
            code: code.as_str(),
            message: message.into(),
            clear_cookie: None,
            retry_after: None,
            headers: None,
        }
    }

    /// Answers with these headers too.
    pub(crate) fn with_headers(mut self, headers: axum::http::HeaderMap) -> Self {
        self.headers = Some(Box::new(headers));
        self
    }

    /// An endpoint's queue is full, or the request waited its longest in it: 429, retry after
    /// `hint`.
    pub(crate) fn busy(message: String, hint: Duration) -> Self {
        Self::new(ErrorCode::RateLimited, message).retry_after(hint)
    }

    /// Says when to retry (of a 429 or 503).
    pub(crate) fn retry_after(mut self, hint: Duration) -> Self {
        self.retry_after = Some(hint);
        self
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

    /// A request in another API's shape with something the gateway doesn't translate, named.
    pub(crate) fn untranslatable(message: String) -> Self {
        Self::new(ErrorCode::InvalidRequest, message)
    }

    /// The engine's answer can't be translated into the client's API.
    pub(crate) fn bad_answer(message: &'static str) -> Self {
        Self::new(ErrorCode::BadGateway, message)
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

    /// No endpoint of the caller's serves the model its request names: a 404 whose code is
    /// OpenAI's own for it, `model_not_found`, in every envelope.
    pub(crate) fn no_such_model(message: &'static str) -> Self {
        Failure {
            code: MODEL_NOT_FOUND,
            ..Self::not_found(message)
        }
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

    #[cfg(test)]
    pub(crate) fn hinted(&self) -> Option<Duration> {
        self.retry_after
    }

    pub(crate) fn response(self, id: &RequestId, envelope: Envelope) -> Response {
        let body = match envelope {
            Envelope::Einsora => serde_json::json!({
                "error": {
                    "code": self.code,
                    "message": self.message.as_ref(),
                    "request_id": id.as_str(),
                }
            }),
            Envelope::OpenAi => serde_json::json!({
                "error": {
                    "message": self.message.as_ref(),
                    "type": openai_type(self.status),
                    "code": openai_code(self.code),
                    "param": null,
                }
            }),
            Envelope::Anthropic => crate::translate::messages::error(self.status, &self.message),
        };
        let mut response = (self.status, body.to_string()).into_response();
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
        if matches!(
            self.status,
            StatusCode::SERVICE_UNAVAILABLE | StatusCode::TOO_MANY_REQUESTS
        ) {
            let after = self.retry_after.unwrap_or(RETRY);
            let ms = u64::try_from(after.as_millis()).unwrap_or(u64::MAX).max(1);
            headers.insert(RETRY_AFTER, HeaderValue::from(ms.div_ceil(1000)));
            headers.insert(RETRY_AFTER_MS, HeaderValue::from(ms));
        }
        if let Some(cookie) = self.clear_cookie {
            headers.insert(SET_COOKIE, cookie);
        }
        headers.extend(self.headers.map(|h| *h).unwrap_or_default());
        response
    }
}

/// OpenAI's class of an error, by its status (the SDKs map the status to their exceptions).
fn openai_type(status: StatusCode) -> &'static str {
    match status {
        StatusCode::UNAUTHORIZED => "authentication_error",
        StatusCode::FORBIDDEN => "permission_error",
        StatusCode::NOT_FOUND => "not_found_error",
        StatusCode::TOO_MANY_REQUESTS => "rate_limit_error",
        StatusCode::SERVICE_UNAVAILABLE => "overloaded_error",
        s if s.is_server_error() => "server_error",
        _ => "invalid_request_error",
    }
}

/// OpenAI's own code where it has one for the case, else Einsora's (docs/api.md, "Errors").
fn openai_code(code: &'static str) -> &'static str {
    match ErrorCode::from_word(code) {
        Some(ErrorCode::RateLimited) => "rate_limit_exceeded",
        Some(ErrorCode::Unauthenticated) => "invalid_api_key",
        _ => code,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn answered(failure: Failure, envelope: Envelope) -> (Response, serde_json::Value) {
        let id = RequestId::new();
        let response = failure.response(&id, envelope);
        let (parts, body) = response.into_parts();
        let body = axum::body::to_bytes(body, 1 << 16).await.unwrap();
        let json = serde_json::from_slice(&body).unwrap();
        (Response::from_parts(parts, axum::body::Body::empty()), json)
    }

    #[tokio::test]
    async fn endpoints_answer_in_openais_shape_and_notebooks_in_einsoras() {
        let refused = || Failure::unauthenticated("no key");
        let (_, body) = answered(refused(), Envelope::OpenAi).await;
        assert_eq!(
            body,
            serde_json::json!({"error": {"message": "no key", "type": "authentication_error",
                                          "code": "invalid_api_key", "param": null}})
        );
        let (response, body) = answered(Failure::no_such_model("x"), Envelope::OpenAi).await;
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        assert_eq!(body["error"]["code"], "model_not_found");
        let (_, body) = answered(refused(), Envelope::Einsora).await;
        assert_eq!(body["error"]["code"], "unauthenticated");
        assert!(body["error"]["request_id"].is_string());
        for (failure, kind) in [
            (Failure::invalid("x"), "invalid_request_error"),
            (Failure::forbidden("x"), "permission_error"),
            (Failure::not_found("x"), "not_found_error"),
            (Failure::no_such_model("x"), "not_found_error"),
            (Failure::unavailable("x"), "overloaded_error"),
            (Failure::tampered(), "server_error"),
        ] {
            let (_, body) = answered(failure, Envelope::OpenAi).await;
            assert_eq!(body["error"]["type"], kind, "{body}");
        }
    }

    /// Whole seconds rounded up, and the milliseconds the OpenAI SDKs read first.
    #[tokio::test]
    async fn a_retry_is_hinted_in_seconds_and_milliseconds() {
        let hinted = Failure::busy("full".into(), Duration::from_millis(1500));
        let (response, body) = answered(hinted, Envelope::OpenAi).await;
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()[RETRY_AFTER], "2");
        assert_eq!(response.headers()[RETRY_AFTER_MS], "1500");
        assert_eq!(body["error"]["type"], "rate_limit_error");
        assert_eq!(body["error"]["code"], "rate_limit_exceeded");
        let (response, _) = answered(Failure::unavailable("down"), Envelope::Einsora).await;
        assert_eq!(response.headers()[RETRY_AFTER], "1");
        assert_eq!(response.headers()[RETRY_AFTER_MS], "1000");
        let (response, _) = answered(Failure::invalid("x"), Envelope::OpenAi).await;
        assert!(response.headers().get(RETRY_AFTER).is_none());
    }
}
