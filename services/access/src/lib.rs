//! The access role: the access proxy that opens a running notebook at its own origin
//! (`w-<id>.localhost`) with one-time tickets, and serves endpoints to API tokens.
//!
//! Until the proxy arrives (docs/architecture.md) it binds its address, so a port clash is
//! reported like any other role's, and answers every request 404 with the JSON error envelope.

use std::net::SocketAddr;

use anyhow::Context;
use axum::http::header::{CONTENT_TYPE, HeaderValue};
use axum::http::{HeaderName, StatusCode};
use axum::response::{IntoResponse, Response};
use einsora_runtime::grpc;
use einsora_runtime::settings::{ConfigError, Settings};
use einsora_runtime::shutdown::Shutdown;
use tokio::net::TcpListener;

pub const ADDR: &str = "EINSORA_ACCESS_ADDR";
pub const URL: &str = "EINSORA_ACCESS_URL";

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

#[derive(Debug, Clone)]
pub struct Config {
    pub addr: SocketAddr,
    /// What links are built from.
    pub public_url: String,
}

impl Config {
    pub fn from_settings(settings: &Settings) -> Result<Self, ConfigError> {
        Ok(Config {
            addr: settings.socket_addr(ADDR, "127.0.0.1:8090")?,
            public_url: settings.url(URL, &["http", "https"], "http://localhost:8090")?,
        })
    }
}

/// Binds `EINSORA_ACCESS_ADDR` and serves until shutdown.
pub async fn run(cfg: Config, shutdown: Shutdown) -> anyhow::Result<()> {
    let listener = grpc::bind(ADDR, cfg.addr).await?;
    serve(listener, cfg, shutdown).await
}

/// [`run`] on a listener the caller bound.
pub async fn serve(listener: TcpListener, cfg: Config, shutdown: Shutdown) -> anyhow::Result<()> {
    let addr = listener.local_addr()?;
    tracing::info!(addr = %addr, public_url = %cfg.public_url, "access serving");
    let app = axum::Router::new().fallback(nothing_here);
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown.cancelled())
        .await
        .context("access")
}

async fn nothing_here() -> Response {
    let id = uuid::Uuid::now_v7().to_string();
    let body = serde_json::json!({
        "error": {
            "code": "not_found",
            "message": "nothing is served here yet: workload access arrives in a later release",
            "request_id": id,
        }
    });
    let mut response = (StatusCode::NOT_FOUND, body.to_string()).into_response();
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Ok(value) = HeaderValue::from_str(&id) {
        headers.insert(REQUEST_ID, value);
    }
    response
}

#[cfg(test)]
mod tests;
