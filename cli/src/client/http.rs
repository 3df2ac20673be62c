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
        let response = self
            .http
            .request(request)
            .await
            .with_context(|| format!("can't reach Einsora at {}", self.server))?;
        let status = response.status();
        let request_id = header(response.headers(), "x-request-id");
        let set_cookie = response
            .headers()
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok().map(str::to_owned))
            .collect();
        let bytes = response
            .into_body()
            .collect()
            .await
            .context("reading the answer")?
            .to_bytes();
        let body: Value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).with_context(|| {
                format!("the server answered {status} with a body that isn't JSON (request {request_id})")
            })?
        };
        if !status.is_success() {
            let error = &body["error"];
            return Err(ApiError {
                code: error["code"].as_str().unwrap_or("error").to_owned(),
                message: error["message"].as_str().unwrap_or("no message").to_owned(),
                request_id: error["request_id"]
                    .as_str()
                    .map_or(request_id, str::to_owned),
            }
            .into());
        }
        Ok(Answer { body, set_cookie })
    }
}

fn header(headers: &hyper::HeaderMap, name: &str) -> String {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("none")
        .to_owned()
}
