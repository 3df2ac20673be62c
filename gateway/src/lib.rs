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
mod hosts;
mod idempotency;
mod json;
mod known_client;
mod openapi;
mod proxies;
mod routes;
mod session;
mod stream;
mod upstream;

use std::net::SocketAddr;

use anyhow::Context;
use axum::extract::ConnectInfo;
use einsora_runtime::grpc::{self, InternalTls};
use einsora_runtime::http::{self, HttpLimits};
use einsora_runtime::pki::Role;
use einsora_runtime::settings::{ConfigError, Settings};
use einsora_runtime::shutdown::Shutdown;
use tokio::net::TcpListener;
use tonic::transport::Channel;
use tower::ServiceExt;

pub use app::BuildError;
pub use einsora_runtime::origin::Origin;
pub use proxies::TrustedProxies;

pub const HTTP_ADDR: &str = "EINSORA_HTTP_ADDR";
pub const API_ADDR: &str = "EINSORA_API_ADDR";
pub const TRUSTED_PROXIES: &str = "EINSORA_TRUSTED_PROXIES";
pub const INSECURE_HTTP: &str = "EINSORA_INSECURE_HTTP";
pub const PUBLIC_URL: &str = "EINSORA_PUBLIC_URL";

#[derive(Debug, Clone)]
pub struct Config {
    pub http_addr: SocketAddr,
    pub api_addr: SocketAddr,
    /// Proxies whose `X-Forwarded-For` and `X-Forwarded-Proto` are believed.
    pub trusted_proxies: TrustedProxies,
    /// Allow logging in over plain HTTP from other machines.
    pub insecure_http: bool,
    /// The origin browsers use when it isn't the listener's own; its host is answered too.
    pub public_url: Option<Origin>,
    pub tls: InternalTls,
    /// Connections at once, and how long a request's head may take.
    pub http: HttpLimits,
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
            public_url: settings.parse_with(PUBLIC_URL, "", |url| {
                (!url.is_empty()).then(|| Origin::parse(url)).transpose()
            })?,
            tls: InternalTls::from_settings(settings)?,
            http: HttpLimits::from_settings(settings)?,
        })
    }
}

/// Checks everything (descriptors, certificates), binds `EINSORA_HTTP_ADDR`, and serves until
/// shutdown.
pub async fn run(cfg: Config, shutdown: Shutdown) -> anyhow::Result<()> {
    let prepared = prepare(&cfg)?;
    let listener = grpc::bind(HTTP_ADDR, cfg.http_addr).await?;
    serve_app(listener, prepared, &cfg, shutdown).await
}

/// [`run`] on a listener the caller bound (tests, or a supervisor that holds the port).
pub async fn serve(listener: TcpListener, cfg: Config, shutdown: Shutdown) -> anyhow::Result<()> {
    let prepared = prepare(&cfg)?;
    serve_app(listener, prepared, &cfg, shutdown).await
}

/// What can be checked before binding: the routes and the api's channel. The api is dialled on
/// first use, so the gateway starts (and answers 503) while it is down.
fn prepare(cfg: &Config) -> anyhow::Result<(app::Api, Channel)> {
    let api = app::Api::load()?;
    let channel = cfg
        .tls
        .client(Role::Gateway, Role::Api)?
        .connect_lazy(&cfg.api_addr.to_string())
        .context(API_ADDR)?;
    Ok((api, channel))
}

/// Serves until shutdown, then lets the requests in flight finish. The hosts answered to are
/// the listener's real address (its port may have been 0) and the public URL's.
async fn serve_app(
    listener: TcpListener,
    (api, channel): (app::Api, Channel),
    cfg: &Config,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    let addr = listener.local_addr()?;
    let options = app::Options {
        proxies: cfg.trusted_proxies.clone(),
        insecure_http: cfg.insecure_http,
        hosts: hosts::Hosts::new(addr, cfg.public_url.clone()),
        shutdown: shutdown.clone(),
    };
    let app = app::router(api, channel, options)?;
    tracing::info!(http = %addr, api = %cfg.api_addr, "gateway serving");
    // Each connection's peer, as axum's `ConnectInfo` (the login limiter's address).
    let with_peer = move |peer: SocketAddr| {
        app.clone()
            .map_request(move |mut request: axum::http::Request<_>| {
                request.extensions_mut().insert(ConnectInfo(peer));
                request
            })
    };
    http::serve(listener, cfg.http, None, shutdown, with_peer)
        .await
        .context("gateway")
}
