//! The APIs clients speak that the engine doesn't: Anthropic's Messages API
//! (`/v1/messages`, [`messages`]) and OpenAI's Responses API (`/v1/responses`,
//! [`responses`]), each a rewrite of the request onto the engine's chat completions before it
//! is forwarded, and of the chat answer (whole or streamed) after. The request goes the chat
//! request's way through `endpoint.rs` (the same caller check, limits, queue and usage: usage
//! is read from the engine's chat answer, before it is translated). Whatever the engine
//! answers is attacker input: bounded, never panicking, a clear error when it can't be
//! translated.

pub(crate) mod messages;
mod responses;
mod sse;

use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::http::header::{
    AUTHORIZATION, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE, HeaderMap, HeaderValue,
};
use axum::http::{HeaderName, Method, StatusCode};
use axum::response::Response;
use serde_json::{Map, Value, json};

use crate::errors::Failure;
use crate::limits::{self, Limits};

/// The engine's route translated requests go to.
pub(crate) const ENGINE_ROUTE: &str = "chat/completions";
/// The most of a whole answer kept to translate it.
const MAX_ANSWER: usize = 8 << 20;
/// The most of an engine's error answer read for its message.
const MAX_ERROR: usize = 64 << 10;
/// A count above this is not believed (as `usage.rs`).
const MAX_TOKENS: u64 = 10_000_000;

const X_API_KEY: HeaderName = HeaderName::from_static("x-api-key");

/// A route's credentials as the caller check reads them ([`Dialect::credentials`]). An
/// `x-api-key` sent to any other route never reaches the engine either.
pub(crate) fn credentials(route: &str, headers: &mut HeaderMap) -> Result<(), Failure> {
    match Dialect::of(route) {
        Some(dialect) => dialect.credentials(headers),
        None => {
            headers.remove(X_API_KEY);
            Ok(())
        }
    }
}

/// A translated route's request as a chat request, and how its answer is translated back;
/// any other route's as it came.
pub(crate) async fn request(
    route: &str,
    method: &Method,
    body: Body,
    limits: &Limits,
) -> Result<(Body, Option<Translation>), Failure> {
    match Dialect::of(route) {
        None => Ok((body, None)),
        Some(_) if method != Method::POST => Err(Failure::method_not_allowed()),
        Some(dialect) => {
            let (body, translation) = dialect.request(body, limits).await?;
            Ok((body, Some(translation)))
        }
    }
}

/// The engine's route a request goes to.
pub(crate) fn engine_route<'a>(route: &'a str, translation: Option<&Translation>) -> &'a str {
    if translation.is_some() {
        ENGINE_ROUTE
    } else {
        route
    }
}

/// The engine's answer in the client's API ([`Translation::answer`]), or as it came.
pub(crate) async fn answer(
    translation: Option<Translation>,
    response: Response,
) -> Result<Response, Failure> {
    match translation {
        Some(translation) => translation.answer(response).await,
        None => Ok(response),
    }
}

/// An API translated onto chat completions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    Messages,
    Responses,
}

impl Dialect {
    /// The API a route speaks; `None` for the engine's own routes.
    pub(crate) fn of(route: &str) -> Option<Dialect> {
        match route {
            "messages" => Some(Dialect::Messages),
            "responses" => Some(Dialect::Responses),
            _ => None,
        }
    }

    /// The Messages API's clients send their key as `x-api-key`: it becomes the bearer token
    /// the caller is checked by (one credential only), and never reaches the engine, nor do
    /// Anthropic's own headers.
    pub(crate) fn credentials(self, headers: &mut HeaderMap) -> Result<(), Failure> {
        let keys: Vec<HeaderValue> = headers.get_all(X_API_KEY).iter().cloned().collect();
        headers.remove(X_API_KEY);
        if self != Dialect::Messages {
            return Ok(());
        }
        for name in ["anthropic-version", "anthropic-beta"] {
            headers.remove(name);
        }
        let refused = || Failure::unauthenticated("send one key: x-api-key or Authorization");
        match keys.as_slice() {
            [] => Ok(()),
            [key] if !headers.contains_key(AUTHORIZATION) => {
                let text = key.to_str().map_err(|_| refused())?.trim();
                let mut bearer =
                    HeaderValue::from_str(&format!("Bearer {text}")).map_err(|_| refused())?;
                bearer.set_sensitive(true);
                headers.insert(AUTHORIZATION, bearer);
                Ok(())
            }
            _ => Err(refused()),
        }
    }

    /// The request's body (within the body limit) as a chat completion request, and what its
    /// answer is translated with.
    pub(crate) async fn request(
        self,
        body: Body,
        limits: &Limits,
    ) -> Result<(Body, Translation), Failure> {
        let bytes = limits::bounded_body(body, limits, false).await?;
        let not_object = || Failure::invalid("the request body is not a JSON object");
        let Value::Object(body) = serde_json::from_slice(&bytes).map_err(|_| not_object())? else {
            return Err(not_object());
        };
        let model = body.get("model").and_then(Value::as_str).map(str::to_owned);
        let (chat, echo) = match self {
            Dialect::Messages => (messages::request(body), Value::Null),
            Dialect::Responses => {
                let echo = responses::echo(&body);
                (responses::request(body), echo)
            }
        };
        let chat = chat.map_err(Failure::untranslatable)?;
        let translation = Translation {
            dialect: self,
            model,
            echo,
        };
        Ok((Body::from(Value::Object(chat).to_string()), translation))
    }
}

/// How an answer is translated back: the request's dialect, and what of the request its
/// answer repeats.
#[derive(Debug)]
pub(crate) struct Translation {
    dialect: Dialect,
    /// The model the client named.
    model: Option<String>,
    /// The Responses API's answer repeats the request's settings.
    echo: Value,
}

impl Translation {
    /// The engine's chat answer in the client's API: a JSON answer read whole (bounded) and
    /// rewritten, a streamed one rewritten as it passes. An engine's error stays an error
    /// (in Anthropic's shape for the Messages API).
    pub(crate) async fn answer(self, response: Response) -> Result<Response, Failure> {
        let (mut parts, body) = response.into_parts();
        parts.headers.remove(CONTENT_LENGTH);
        let essence = parts
            .headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .map(|v| v.trim().to_ascii_lowercase());
        if !parts.status.is_success() {
            return Ok(Response::from_parts(
                parts.clone(),
                self.error(parts.status, body).await,
            ));
        }
        let body = match essence.as_deref() {
            Some("application/json") => {
                let bytes = axum::body::to_bytes(body, MAX_ANSWER).await.map_err(|_| {
                    Failure::bad_answer("the engine's answer is over 8 MiB or broke off")
                })?;
                let chat: Value = serde_json::from_slice(&bytes)
                    .map_err(|_| Failure::bad_answer("the engine's answer is not JSON"))?;
                let answer = match self.dialect {
                    Dialect::Messages => messages::answer(&chat, self.model.as_deref()),
                    Dialect::Responses => responses::answer(&chat, self.echo),
                };
                Body::from(answer.map_err(Failure::bad_answer)?.to_string())
            }
            Some("text/event-stream") => {
                parts
                    .headers
                    .insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
                match self.dialect {
                    Dialect::Messages => Body::new(sse::Translated::new(
                        body,
                        messages::Stream::new(self.model),
                    )),
                    Dialect::Responses => Body::new(sse::Translated::new(
                        body,
                        responses::Stream::new(self.echo),
                    )),
                }
            }
            _ => {
                return Err(Failure::bad_answer(
                    "the engine's answer is neither JSON nor server-sent events",
                ));
            }
        };
        Ok(Response::from_parts(parts, body))
    }

    /// An engine's error answer: the Responses API's is OpenAI's shape already; the Messages
    /// API's becomes Anthropic's, with the engine's message (bounded).
    async fn error(&self, status: StatusCode, body: Body) -> Body {
        if self.dialect == Dialect::Responses {
            return body;
        }
        let bytes = axum::body::to_bytes(body, MAX_ERROR)
            .await
            .unwrap_or_default();
        let said: Option<Value> = serde_json::from_slice(&bytes).ok();
        let message = said
            .as_ref()
            .and_then(|v| v["error"]["message"].as_str().or(v["error"].as_str()))
            .map_or("the engine refused the request", |m| sse::bounded(m, 1000));
        Body::from(Bytes::from(messages::error(status, message).to_string()))
    }
}

/// Moves each field `body` gives (not as null) into `chat`, under the chat API's name for it:
/// `(from, to)`.
fn renamed(body: &mut Map<String, Value>, chat: &mut Map<String, Value>, fields: &[(&str, &str)]) {
    for (from, to) in fields {
        if let Some(value) = body.remove(*from).filter(|v| !v.is_null()) {
            chat.insert((*to).into(), value);
        }
    }
}

/// A block's or an item's `type`; empty if it has none.
fn kind(value: &Value) -> &str {
    value.get("type").and_then(Value::as_str).unwrap_or("")
}

/// `stream` as asked, and the usage asked for in a stream (the answer's closing events carry
/// it).
fn streaming(chat: &mut Map<String, Value>, stream: Option<&Value>) -> Result<(), String> {
    match stream {
        None | Some(Value::Null | Value::Bool(false)) => Ok(()),
        Some(Value::Bool(true)) => {
            chat.insert("stream".into(), Value::Bool(true));
            chat.insert("stream_options".into(), json!({"include_usage": true}));
            Ok(())
        }
        Some(_) => Err("stream: true or false".to_owned()),
    }
}

/// The first choice of a chat answer or chunk (one is asked for).
fn choice(chat: &Value) -> Option<&Value> {
    chat.get("choices")?.as_array()?.first()
}

/// A new ID for something the answer names (`msg_…`, `resp_…`, `toolu_…`).
fn id(prefix: &str) -> String {
    format!("{prefix}{}", uuid::Uuid::now_v7().simple())
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Why a chat answer ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Finish {
    Stop,
    Length,
    ToolCalls,
    Filtered,
}

impl Finish {
    fn of(reason: &Value) -> Option<Finish> {
        Some(match reason.as_str()? {
            "length" => Finish::Length,
            "tool_calls" | "function_call" => Finish::ToolCalls,
            "content_filter" => Finish::Filtered,
            _ => Finish::Stop,
        })
    }
}

/// A chat answer's usage, if it has believable counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Usage {
    prompt: u64,
    completion: u64,
    cached: u64,
}

impl Usage {
    fn of(chat: &Value) -> Option<Usage> {
        let usage = chat.get("usage")?;
        let count = |v: &Value| v.as_u64().filter(|n| *n <= MAX_TOKENS);
        Some(Usage {
            prompt: count(&usage["prompt_tokens"])?,
            completion: count(&usage["completion_tokens"])?,
            cached: count(&usage["prompt_tokens_details"]["cached_tokens"]).unwrap_or(0),
        })
    }
}

/// A tool call of a whole chat answer.
struct Call {
    id: Option<String>,
    name: String,
    arguments: Value,
}

impl Call {
    fn of(call: &Value) -> Option<Call> {
        let function = call.get("function")?;
        Some(Call {
            id: call.get("id").and_then(Value::as_str).map(str::to_owned),
            name: function.get("name")?.as_str()?.to_owned(),
            arguments: function.get("arguments").cloned().unwrap_or(Value::Null),
        })
    }
}

/// A call's arguments as the JSON text chat answers carry (an engine may send an object).
fn arguments_text(arguments: &Value) -> String {
    match arguments {
        Value::String(text) => text.clone(),
        Value::Null => "{}".to_owned(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_x_api_key_becomes_the_bearer_token_and_never_reaches_the_engine() {
        let headers = |pairs: &[(&str, &str)]| {
            let mut headers = HeaderMap::new();
            for (k, v) in pairs {
                headers.append(
                    HeaderName::from_bytes(k.as_bytes()).unwrap(),
                    HeaderValue::from_str(v).unwrap(),
                );
            }
            headers
        };
        let mut sent = headers(&[("x-api-key", "isk_a"), ("anthropic-version", "2023-06-01")]);
        Dialect::Messages.credentials(&mut sent).unwrap();
        assert_eq!(sent[AUTHORIZATION], "Bearer isk_a");
        assert!(sent[AUTHORIZATION].is_sensitive());
        assert!(sent.get("x-api-key").is_none());
        assert!(sent.get("anthropic-version").is_none());

        let mut bearer = headers(&[("authorization", "Bearer isk_b")]);
        Dialect::Messages.credentials(&mut bearer).unwrap();
        assert_eq!(bearer[AUTHORIZATION], "Bearer isk_b");
        for two in [
            &[("x-api-key", "isk_a"), ("authorization", "Bearer isk_b")][..],
            &[("x-api-key", "isk_a"), ("x-api-key", "isk_c")],
        ] {
            let mut two = headers(two);
            assert!(Dialect::Messages.credentials(&mut two).is_err());
            assert!(two.get("x-api-key").is_none());
        }
        // Only the Messages API's clients send it; elsewhere it is dropped.
        let mut other = headers(&[("x-api-key", "isk_a")]);
        Dialect::Responses.credentials(&mut other).unwrap();
        assert!(other.get(AUTHORIZATION).is_none());
        for route in ["responses", "chat/completions"] {
            let mut other = headers(&[("x-api-key", "isk_a"), ("authorization", "Bearer isk_b")]);
            credentials(route, &mut other).unwrap();
            assert!(other.get("x-api-key").is_none(), "{route}");
            assert_eq!(other[AUTHORIZATION], "Bearer isk_b");
        }
    }

    #[test]
    fn usage_and_finish_are_read_warily() {
        let usage = |v: Value| Usage::of(&json!({ "usage": v }));
        assert_eq!(
            usage(json!({"prompt_tokens": 3, "completion_tokens": 4,
                         "prompt_tokens_details": {"cached_tokens": 2}})),
            Some(Usage {
                prompt: 3,
                completion: 4,
                cached: 2
            })
        );
        assert_eq!(
            usage(json!({"prompt_tokens": -1, "completion_tokens": 4})),
            None
        );
        assert_eq!(
            usage(json!({"prompt_tokens": 1, "completion_tokens": MAX_TOKENS + 1})),
            None
        );
        assert_eq!(usage(json!("lots")), None);
        assert_eq!(Finish::of(&json!("length")), Some(Finish::Length));
        assert_eq!(Finish::of(&json!("tool_calls")), Some(Finish::ToolCalls));
        assert_eq!(Finish::of(&json!("eos")), Some(Finish::Stop));
        assert_eq!(Finish::of(&json!(null)), None);
        assert_eq!(Finish::of(&json!(7)), None);
    }
}
