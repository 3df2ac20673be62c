//! The api role: authentication and authorization, validation, quota checks and recording
//! intent in the store. It never touches the runtime. It serves internal gRPC over mutual TLS to
//! the gateway and the access proxy.

pub mod accounts;
pub mod caller;
pub mod context;
pub mod internal;
pub mod setup;

pub mod access;
pub mod activity;
pub mod catalog;
pub mod enrolment;
mod grants;
pub mod health;
pub mod idempotency;
mod inference;
pub mod machines;
pub mod quotas;
mod scoped;
pub mod status;
pub mod token_usage;
pub mod usage;
mod wake;
mod wire;
pub mod workloads;

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use einsora_core::catalog::Catalog;
use einsora_proto::access::v1::access_service_server::AccessServiceServer;
use einsora_proto::accounts::v1::account_service_server::AccountServiceServer;
use einsora_proto::accounts::v1::inference_key_service_server::InferenceKeyServiceServer;
use einsora_proto::accounts::v1::quota_service_server::QuotaServiceServer;
use einsora_proto::accounts::v1::team_service_server::TeamServiceServer;
use einsora_proto::accounts::v1::token_service_server::TokenServiceServer;
use einsora_proto::accounts::v1::user_service_server::UserServiceServer;
use einsora_proto::activity::v1::activity_service_server::ActivityServiceServer;
use einsora_proto::catalog::v1::catalog_service_server::CatalogServiceServer;
use einsora_proto::enrolment::v1::enrolment_token_service_server::EnrolmentTokenServiceServer;
use einsora_proto::internal::v1::api_internal_service_server::ApiInternalServiceServer;
use einsora_proto::internal::v1::idempotency_service_server::IdempotencyServiceServer;
use einsora_proto::machines::v1::machine_service_server::MachineServiceServer;
use einsora_proto::status::v1::status_service_server::StatusServiceServer;
use einsora_proto::usage::v1::usage_service_server::UsageServiceServer;
use einsora_proto::workloads::v1::workload_service_server::WorkloadServiceServer;
use einsora_runtime::grpc::{self, InternalTls};
use einsora_runtime::pki::{Role, RoleKind};
use einsora_runtime::settings::{ConfigError, Settings};
use einsora_runtime::shutdown::Shutdown;
use einsora_store::DatabaseUrl;
use tonic::service::Routes;

pub const ADDR: &str = "EINSORA_API_ADDR";
const DEFAULT_ADDR: &str = "127.0.0.1:8081";

#[derive(Debug, Clone)]
pub struct Config {
    pub addr: SocketAddr,
    pub database: DatabaseUrl,
    pub catalog: Arc<Catalog>,
    pub tls: InternalTls,
    pub auth_mode: setup::AuthMode,
    /// What notebook links and endpoint URLs are built from (EINSORA_ACCESS_URL).
    pub access_url: einsora_runtime::access_url::AccessUrl,
    /// Where the other roles listen, for `GET /v1/status`.
    pub peers: health::Peers,
    /// How long an Idempotency-Key is kept (`EINSORA_IDEMPOTENCY_TTL`).
    pub idempotency_ttl: std::time::Duration,
}

impl Config {
    pub fn from_settings(settings: &Settings) -> Result<Self, ConfigError> {
        Ok(Config {
            addr: settings.socket_addr(ADDR, DEFAULT_ADDR)?,
            database: DatabaseUrl::from_settings(settings)?,
            catalog: Arc::new(einsora_runtime::catalog::from_settings(settings)?),
            tls: InternalTls::from_settings(settings)?,
            auth_mode: setup::AuthMode::from_settings(settings)?,
            access_url: einsora_runtime::access_url::AccessUrl::from_settings(settings)?,
            peers: health::Peers::from_settings(settings)?,
            idempotency_ttl: settings
                .positive_duration(idempotency::TTL, idempotency::DEFAULT_TTL)?,
        })
    }
}

/// The gate of the services the gateway calls for browsers and the CLI.
fn gateway() -> impl tonic::service::Interceptor + Clone {
    grpc::only(&[RoleKind::Gateway])
}

pub async fn run(cfg: Config, shutdown: Shutdown) -> anyhow::Result<()> {
    let store = einsora_store::open(&cfg.database).await?;
    let tls = cfg
        .tls
        .server(Role::Api, &[RoleKind::Gateway, RoleKind::Access])?;
    let listener = grpc::bind(ADDR, cfg.addr).await?;
    // Accounts: sessions, tokens, and the internal authentication for the other services.
    if cfg.auth_mode == setup::AuthMode::Dev {
        setup::announce(&setup::seed_dev(&*store).await?);
    }
    let auth = Arc::new(caller::Auth::new(Arc::clone(&store)));
    let passwords = Arc::new(accounts::passwords::Passwords::new().await?);
    let users = accounts::Users::new(Arc::clone(&auth), Arc::clone(&passwords));
    let accounts = accounts::Accounts::new(Arc::clone(&auth), passwords);
    let tokens = accounts::Tokens::new(Arc::clone(&auth));
    let inference_keys = accounts::InferenceKeys::new(Arc::clone(&auth));
    let internal = internal::Internal::new(Arc::clone(&auth), Arc::clone(&cfg.catalog));
    let idempotency = idempotency::Idempotency::new(Arc::clone(&auth), cfg.idempotency_ttl);
    // The public services and the Idempotency-Key claims are the gateway's to call; the
    // internal one, the access proxy's.
    let mut routes = Routes::default()
        .add_service(AccountServiceServer::with_interceptor(accounts, gateway()))
        .add_service(TokenServiceServer::with_interceptor(tokens, gateway()))
        .add_service(InferenceKeyServiceServer::with_interceptor(
            inference_keys,
            gateway(),
        ))
        .add_service(UserServiceServer::with_interceptor(users, gateway()))
        .add_service(IdempotencyServiceServer::with_interceptor(
            idempotency,
            gateway(),
        ))
        .add_service(ApiInternalServiceServer::with_interceptor(
            internal,
            grpc::only(&[RoleKind::Access]),
        ));
    // Workloads, machines, catalog, usage, access and enrolment tokens: recording intent,
    // reading the store.
    let workloads = workloads::WorkloadsApi::new(
        Arc::clone(&store),
        Arc::clone(&auth),
        Arc::clone(&cfg.catalog),
        shutdown.clone(),
    );
    let machines = machines::MachinesApi::new(Arc::clone(&store), Arc::clone(&auth));
    let quotas = quotas::QuotasApi::new(
        Arc::clone(&store),
        Arc::clone(&auth),
        Arc::clone(&cfg.catalog),
    );
    let catalog_api = catalog::CatalogApi::new(&cfg.catalog, Arc::clone(&auth));
    let usage = usage::UsageApi::new(Arc::clone(&store), Arc::clone(&auth));
    let activity = activity::ActivityApi::new(Arc::clone(&store), Arc::clone(&auth));
    let health = health::StatusApi::new(
        Arc::clone(&store),
        Arc::clone(&auth),
        Arc::clone(&cfg.catalog),
        cfg.peers.clone(),
        cfg.tls.clone(),
    );
    let access = access::AccessApi::new(Arc::clone(&store), Arc::clone(&auth), cfg.access_url);
    let enrolment = enrolment::EnrolmentApi::new(
        Arc::clone(&store),
        Arc::clone(&auth),
        Arc::clone(&cfg.catalog),
        cfg.tls.ca_fingerprint()?,
    );
    routes = routes
        .add_service(WorkloadServiceServer::with_interceptor(
            workloads,
            gateway(),
        ))
        .add_service(MachineServiceServer::with_interceptor(machines, gateway()))
        .add_service(TeamServiceServer::with_interceptor(
            quotas.clone(),
            gateway(),
        ))
        .add_service(QuotaServiceServer::with_interceptor(quotas, gateway()))
        .add_service(CatalogServiceServer::with_interceptor(
            catalog_api,
            gateway(),
        ))
        .add_service(UsageServiceServer::with_interceptor(usage, gateway()))
        .add_service(ActivityServiceServer::with_interceptor(activity, gateway()))
        .add_service(StatusServiceServer::with_interceptor(health, gateway()))
        .add_service(AccessServiceServer::with_interceptor(access, gateway()))
        .add_service(EnrolmentTokenServiceServer::with_interceptor(
            enrolment,
            gateway(),
        ));
    // Request IDs, tenants and subjects on every log line and response, for every service.
    let routes = context::layer(routes, Arc::clone(&store));
    tracing::info!(addr = %cfg.addr, database = %cfg.database, classes = cfg.catalog.classes().len(), "api serving");
    grpc::serve(listener, tls, routes, shutdown)
        .await
        .context("api")?;
    drop(store);
    Ok(())
}
