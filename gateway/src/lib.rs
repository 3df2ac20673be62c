//! The gateway role: the public HTTP edge. The JSON `/v1` API, derived from the protos'
//! `google.api.http` bindings with no hand-written DTOs, each route transcoded into its RPC and
//! called on the api over mutual TLS; the OpenAPI document generated from the same descriptors;
//! request IDs, the error envelope, and the browser protections (docs/api.md); and the dashboard
//! (`web/`, built into the binary) for every other page a browser asks for.
//!
//! Choices the contract leaves open: a body that isn't declared `application/json` is a 400
//! `invalid_request` (text/plain and form posts included, even empty ones); a wrong method on a
//! known path is a 405 `method_not_allowed`; `null` is refused like an unknown field.

mod app;
mod bind;
mod dashboard;
mod edge;
mod errors;
mod handler;
mod json;
mod openapi;
mod proxies;
mod routes;
mod session;
mod upstream;

use std::net::SocketAddr;

use anyhow::Context;
use einsora_runtime::grpc::{self, InternalTls};
use einsora_runtime::pki::Role;
use einsora_runtime::settings::{ConfigError, Settings};
use einsora_runtime::shutdown::Shutdown;
use tokio::net::TcpListener;

pub use app::BuildError;
pub use proxies::TrustedProxies;

pub const HTTP_ADDR: &str = "EINSORA_HTTP_ADDR";
pub const API_ADDR: &str = "EINSORA_API_ADDR";
pub const TRUSTED_PROXIES: &str = "EINSORA_TRUSTED_PROXIES";
pub const INSECURE_HTTP: &str = "EINSORA_INSECURE_HTTP";

#[derive(Debug, Clone)]
pub struct Config {
    pub http_addr: SocketAddr,
    pub api_addr: SocketAddr,
    /// Proxies whose `X-Forwarded-For` and `X-Forwarded-Proto` are believed.
    pub trusted_proxies: TrustedProxies,
    /// Allow logging in over plain HTTP from other machines.
    pub insecure_http: bool,
    pub tls: InternalTls,
}

impl Config {
    pub fn from_settings(settings: &Settings) -> Result<Self, ConfigError> {
        Ok(Config {
            http_addr: settings.socket_addr(HTTP_ADDR, "127.0.0.1:8080")?,
            api_addr: settings.socket_addr(API_ADDR, "127.0.0.1:8081")?,
            trusted_proxies: settings.parse_with(TRUSTED_PROXIES, "", TrustedProxies::parse)?,
            insecure_http: settings.choice(
                INSECURE_HTTP,
                &[("true", true), ("false", false)],
                "false",
            )?,
            tls: InternalTls::from_settings(settings)?,
        })
    }
}

/// Checks everything (descriptors, certificates), binds `EINSORA_HTTP_ADDR`, and serves until
/// shutdown.
pub async fn run(cfg: Config, shutdown: Shutdown) -> anyhow::Result<()> {
    let app = prepare(&cfg)?;
    let listener = grpc::bind(HTTP_ADDR, cfg.http_addr).await?;
    serve_app(listener, app, &cfg, shutdown).await
}

/// [`run`] on a listener the caller bound (tests, or a supervisor that holds the port).
pub async fn serve(listener: TcpListener, cfg: Config, shutdown: Shutdown) -> anyhow::Result<()> {
    let app = prepare(&cfg)?;
    serve_app(listener, app, &cfg, shutdown).await
}

/// The api is dialled on first use, so the gateway starts (and answers 503) while it is down.
fn prepare(cfg: &Config) -> anyhow::Result<axum::Router> {
    let api = app::Api::load()?;
    let channel = cfg
        .tls
        .client(Role::Gateway, Role::Api)?
        .connect_lazy(&cfg.api_addr.to_string())
        .context(API_ADDR)?;
    let proxies = cfg.trusted_proxies.clone();
    Ok(app::router(api, channel, proxies, cfg.insecure_http)?)
}

/// Serves until shutdown, then lets the requests in flight finish.
async fn serve_app(
    listener: TcpListener,
    app: axum::Router,
    cfg: &Config,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    let addr = listener.local_addr()?;
    tracing::info!(http = %addr, api = %cfg.api_addr, "gateway serving");
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown.cancelled())
    .await
    .context("gateway")
}
