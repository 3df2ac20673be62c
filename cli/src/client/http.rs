//! One JSON request to the API, with the caller's credentials; errors carry the request ID.

use std::fmt;

use anyhow::Context;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Request};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

use super::credentials::Credentials;

/// An error the API answered with.
#[derive(Debug)]
pub struct ApiError {
    pub code: String,
    pub message: String,
    pub request_id: String,
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} (request {})",
            self.code, self.message, self.request_id
        )
    }
}

impl std::error::Error for ApiError {}

/// What a request answered: its JSON body and the headers the CLI needs.
pub struct Answer {
    pub body: Value,
    pub set_cookie: Vec<String>,
}

pub struct Api {
    server: String,
    credentials: Credentials,
    http: HyperClient<HttpConnector, Full<Bytes>>,
}

impl Api {
    pub fn new(server: String, credentials: Credentials) -> anyhow::Result<Self> {
        if !server.starts_with("http://") {
            anyhow::bail!(
                "EINSORA_SERVER: {server:?} is not supported: use http://host:port (a local Solo or \
                 a gateway behind a TLS-terminating proxy on this machine)"
            );
        }
        let http = HyperClient::builder(TokioExecutor::new()).build_http();
        Ok(Api {
            server,
            credentials,
            http,
        })
    }

    pub fn server(&self) -> &str {
        &self.server
    }

    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<Value> {
        Ok(self.send(method, path, body).await?.body)
    }

    pub async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<Answer> {
        self.send_with_cookie(method, path, body, None).await
    }

    /// [`Api::send`] with one more `Cookie` header.
    pub async fn send_with_cookie(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        cookie: Option<&str>,
    ) -> anyhow::Result<Answer> {
        let response = self.request(method, path, body, cookie).await?;
        let status = response.status();
        let request_id = header(response.headers(), "x-request-id");
        let set_cookie = response
            .headers()
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok().map(str::to_owned))
            .collect();
        let body = json_body(response).await?;
        if !status.is_success() {
            return Err(api_error(&body, request_id).into());
        }
        Ok(Answer { body, set_cookie })
    }

    /// A GET answered with NDJSON (a followed stream): each line's object goes to `each` as it
    /// arrives, until the server ends the stream; a line holding the error envelope ends it
    /// with that error.
    pub async fn each_line(
        &self,
        path: &str,
        mut each: impl FnMut(Value) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        let response = self.request(Method::GET, path, None, None).await?;
        let request_id = header(response.headers(), "x-request-id");
        if !response.status().is_success() {
            let body = json_body(response).await?;
            return Err(api_error(&body, request_id).into());
        }
        let mut body = response.into_body();
        let mut pending = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.context("reading the stream")?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            pending.extend_from_slice(&data);
            while let Some(end) = pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = pending.drain(..=end).collect();
                let value: Value = serde_json::from_slice(&line).with_context(|| {
                    format!("the stream has a line that isn't JSON (request {request_id})")
                })?;
                if value.get("error").is_some() {
                    return Err(api_error(&value, request_id).into());
                }
                each(value)?;
            }
            if pending.len() > MAX_LINE_BYTES {
                anyhow::bail!(
                    "the stream has a line over {MAX_LINE_BYTES} bytes (request {request_id})"
                );
            }
        }
        if !pending.is_empty() {
            anyhow::bail!("the stream ended in the middle of a line (request {request_id})");
        }
        Ok(())
    }

    /// Sends one request with the caller's credentials; the answer's body is left unread.
    async fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        cookie: Option<&str>,
    ) -> anyhow::Result<hyper::Response<hyper::body::Incoming>> {
        let uri = format!("{}{path}", self.server.trim_end_matches('/'));
        let mut request = Request::builder().method(method.clone()).uri(&uri);
        request = self.credentials.apply(request, &method);
        if let Some(cookie) = cookie {
            request = request.header("cookie", cookie);
        }
        let payload = match body {
            Some(body) => {
                request = request.header("content-type", "application/json");
                Bytes::from(serde_json::to_vec(&body)?)
            }
            None => Bytes::new(),
        };
        let request = request
            .body(Full::new(payload))
            .context("building the request")?;
        self.http
            .request(request)
            .await
            .with_context(|| format!("can't reach Einsora at {}", self.server))
    }
}

/// The longest line of a stream the CLI holds: a page of the longest lines, escaped.
const MAX_LINE_BYTES: usize = 128 << 20;

/// A whole answer's JSON body (`null` when empty).
async fn json_body(response: hyper::Response<hyper::body::Incoming>) -> anyhow::Result<Value> {
    let status = response.status();
    let request_id = header(response.headers(), "x-request-id");
    let bytes = response
        .into_body()
        .collect()
        .await
        .context("reading the answer")?
        .to_bytes();
    if bytes.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_slice(&bytes).with_context(|| {
        format!("the server answered {status} with a body that isn't JSON (request {request_id})")
    })
}

/// The error an envelope holds (`request_id`: the answer's header, where the body has none).
fn api_error(body: &Value, request_id: String) -> ApiError {
    let error = &body["error"];
    ApiError {
        code: error["code"].as_str().unwrap_or("error").to_owned(),
        message: error["message"].as_str().unwrap_or("no message").to_owned(),
        request_id: error["request_id"]
            .as_str()
            .map_or(request_id, str::to_owned),
    }
}

fn header(headers: &hyper::HeaderMap, name: &str) -> String {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("none")
        .to_owned()
}
