//! The access role: the access proxy. Each running notebook is served at its own origin
//! (`w-<id>.localhost`), opened with a one-time ticket that becomes a session cookie for that
//! host alone; endpoints are served at `<EINSORA_ACCESS_URL>/e/<id>/v1` to API tokens. Requests
//! go to the workload's Unix socket with the workload's own token, which never leaves here.
//!
//! The api answers who a ticket or API token belongs to, the controller where a tenant's ready
//! workload listens; both over mutual TLS, dialled on first use, so the proxy
//! starts (and answers 503) while they are down.

mod app;
mod body;
mod credentials;
mod cut;
mod endpoint;
mod errors;
mod forward;
mod gateway;
mod host;
mod json_member;
mod kept;
mod keys;
pub mod limits;
mod metrics;
mod models;
mod notebook;
mod open;
mod queue;
mod ratelimit;
mod routing;
mod served;
mod session;
mod ssh;
mod sweep;
mod tally;
mod targets;
mod touch;
mod translate;
mod upstream;
mod usage;
mod wake;

use std::net::SocketAddr;

use anyhow::Context;
use einsora_runtime::access_url::AccessUrl;
use einsora_runtime::grpc::{self, InternalTls};
use einsora_runtime::http::{self, HttpLimits};
use einsora_runtime::pki::Role;
use einsora_runtime::settings::{ConfigError, Settings};
use einsora_runtime::shutdown::Shutdown;
use einsora_runtime::tls::web::{AccessTls, TlsAcceptor};
use tokio::net::TcpListener;

pub const ADDR: &str = "EINSORA_ACCESS_ADDR";
pub use einsora_runtime::access_url::SETTING as URL;
/// How long the proxy waits for a connection to one of the region's controllers.
const CONTROLLER_CONNECT: std::time::Duration = std::time::Duration::from_secs(2);
/// A workload's target is reused this long (`targets.rs`).
pub const TARGET_TTL: std::time::Duration = std::time::Duration::from_secs(1);
/// Who a bearer credential belongs to is reused this long (`credentials.rs`): a revoked one is
/// refused within it.
pub const CREDENTIAL_TTL: std::time::Duration = std::time::Duration::from_secs(1);
// The api's and the controller's own settings (`einsora_api::ADDR`, `einsora_controller::ADDR`),
// named again here rather than depending on those crates.
pub const API_ADDR: &str = "EINSORA_API_ADDR";
pub const CONTROLLER_ADDR: &str = "EINSORA_CONTROLLER_ADDR";

#[derive(Debug, Clone)]
pub struct Config {
    pub addr: SocketAddr,
    /// What links are built from: the scheme and port browsers see, the endpoints' host, the
    /// notebooks' domain.
    pub public_url: AccessUrl,
    /// Plain HTTP, or HTTPS with which certificate.
    pub web_tls: AccessTls,
    pub api_addr: SocketAddr,
    /// The region's controllers (one, or a leader and its standbys): the proxy asks the one
    /// that answered last, then the others.
    pub controller_addrs: Vec<SocketAddr>,
    pub tls: InternalTls,
    /// What one request may ask of an endpoint.
    pub limits: limits::Limits,
    /// How long a workload's target, as the controller said, is reused (`targets.rs`).
    pub target_ttl: std::time::Duration,
    /// How long who a bearer credential belongs to, as the api said, is reused
    /// (`credentials.rs`).
    pub credential_ttl: std::time::Duration,
    /// Connections at once, and how long a request's head may take.
    pub http: HttpLimits,
    /// How often endpoints' use is reported to the controller (`touch.rs`; tests scale it
    /// down).
    pub touch_every: std::time::Duration,
}

impl Config {
    pub fn from_settings(settings: &Settings) -> Result<Self, ConfigError> {
        let public_url = AccessUrl::from_settings(settings)?;
        Ok(Config {
            addr: settings.socket_addr(ADDR, "127.0.0.1:8090")?,
            web_tls: AccessTls::from_settings(settings, &public_url)?,
            public_url,
            api_addr: settings.socket_addr(API_ADDR, "127.0.0.1:8081")?,
            controller_addrs: settings.parse_with(CONTROLLER_ADDR, "127.0.0.1:8082", |v| {
                v.split(',')
                    .map(|a| a.trim().parse())
                    .collect::<Result<Vec<SocketAddr>, _>>()
                    .map_err(|_| {
                        "is not a socket address (ip:port), or several separated by commas".into()
                    })
            })?,
            tls: InternalTls::from_settings(settings)?,
            limits: limits::Limits::from_settings(settings)?,
            target_ttl: TARGET_TTL,
            credential_ttl: CREDENTIAL_TTL,
            http: HttpLimits::from_settings(settings)?,
            touch_every: touch::EVERY,
        })
    }
}

/// Checks the certificates, binds `EINSORA_ACCESS_ADDR`, and serves until shutdown.
pub async fn run(cfg: Config, shutdown: Shutdown) -> anyhow::Result<()> {
    let prepared = prepare(&cfg, &shutdown)?;
    let listener = grpc::bind(ADDR, cfg.addr).await?;
    serve_app(listener, prepared, &cfg, shutdown).await
}

/// [`run`] on a listener the caller bound.
pub async fn serve(listener: TcpListener, cfg: Config, shutdown: Shutdown) -> anyhow::Result<()> {
    let prepared = prepare(&cfg, &shutdown)?;
    serve_app(listener, prepared, &cfg, shutdown).await
}

/// The app, and what its port accepts TLS with: both checked before anything is bound.
fn prepare(cfg: &Config, shutdown: &Shutdown) -> anyhow::Result<(app::App, Option<TlsAcceptor>)> {
    let tls = cfg
        .web_tls
        .acceptor()
        .context("the access proxy's certificate")?;
    let api = cfg
        .tls
        .client(Role::Access, Role::Api)?
        .connect_lazy(&cfg.api_addr.to_string())
        .context(API_ADDR)?;
    let controller_tls = cfg.tls.client(Role::Access, Role::Controller)?;
    let controllers = cfg
        .controller_addrs
        .iter()
        .map(|addr| {
            // A controller that doesn't answer at all is likely gone (a killed leader): the
            // next is asked soon.
            let tune = |e: tonic::transport::Endpoint| e.connect_timeout(CONTROLLER_CONNECT);
            controller_tls.connect_lazy_tuned(&addr.to_string(), tune)
        })
        .collect::<Result<Vec<_>, _>>()
        .context(CONTROLLER_ADDR)?;
    let proxy = std::sync::Arc::new(app::Proxy {
        public: cfg.public_url.clone(),
        limits: cfg.limits.clone(),
        queues: queue::Queues::default(),
        upstream: upstream::Upstream::new(api, controllers),
        targets: targets::Targets::new(cfg.target_ttl),
        credentials: std::sync::Arc::new(credentials::Credentials::new(cfg.credential_ttl)),
        served: served::ServedModels::new(cfg.target_ttl),
        sessions: session::Sessions::default(),
        shutdown: shutdown.clone(),
        tally: std::sync::Arc::default(),
        rate_limits: std::sync::Arc::default(),
        touched: touch::Touched::default(),
        wakes: wake::Wakes::default(),
    });
    let touching = touch::run(
        std::sync::Arc::clone(&proxy),
        cfg.touch_every,
        shutdown.clone(),
    );
    tokio::spawn(touching);
    tokio::spawn(sweep::run(std::sync::Arc::clone(&proxy)));
    let tally = std::sync::Arc::clone(&proxy.tally);
    tokio::spawn(tally.run(proxy.upstream.clone(), shutdown.clone()));
    Ok((app::App(proxy), tls))
}

/// Serves until shutdown; streams and WebSockets still open end with it.
async fn serve_app(
    listener: TcpListener,
    (app, tls): (app::App, Option<TlsAcceptor>),
    cfg: &Config,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    let addr = listener.local_addr()?;
    tracing::info!(addr = %addr, public_url = %cfg.public_url, https = tls.is_some(), "access serving");
    let proxy = std::sync::Arc::clone(&app.0);
    let served = http::serve(listener, cfg.http, tls, shutdown, move |_peer| app.clone()).await;
    // The answers have ended, and their tokens are counted: the last of them go to the api.
    proxy.tally.send_last(&proxy.upstream).await;
    served.context("access")
}
