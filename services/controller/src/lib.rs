//! The controller role: admission, placement, reconciling the store with the runtime through a
//! backend, for one region under its lease; hosts the agents' Sync (with node agents).

mod agent_port;
mod agents;
mod config;
pub mod enrol;
pub mod fake;
mod internal;
mod lead;
mod lease;
mod metrics;
mod placement;
mod reconcile;
mod retention;
mod status;
#[cfg(test)]
mod testing;
mod writer;

use std::sync::Arc;

use anyhow::Context;
use einsora_core::backend::Backend;
use einsora_proto::internal::v1::controller_internal_service_server::ControllerInternalServiceServer;
use einsora_runtime::grpc;
use einsora_runtime::pki::{Role, RoleKind};
use einsora_runtime::shutdown::Shutdown;
use tonic::service::Routes;

pub use config::{
    ADDR, AGENT_ADDR, BACKEND, BackendKind, Config, INTERVAL, LEASE, PROVISIONING_TIMEOUT, REGION,
    Timers,
};

pub async fn run(cfg: Config, shutdown: Shutdown) -> anyhow::Result<()> {
    let store = einsora_store::open(&cfg.database).await?;
    let tls = cfg
        .tls
        .server(Role::Controller, &[RoleKind::Api, RoleKind::Access])?;
    let listener = grpc::bind(ADDR, cfg.addr).await?;
    tracing::info!(
        addr = %cfg.addr, region = %cfg.region, backend = ?cfg.backend, database = %cfg.database,
        "controller serving"
    );
    let hub = Arc::new(agents::Hub::new(cfg.timers.offline_after));
    let relays = Arc::new(agents::Relays::default());
    let agent_port = agent_port::AgentPort::bind(
        &cfg,
        Arc::clone(&store),
        Arc::clone(&hub),
        Arc::clone(&relays),
        &shutdown,
    )
    .await?;
    let server_stop = Shutdown::new();
    let internal = internal::Internal::new(
        Arc::clone(&store),
        Arc::clone(&hub),
        relays,
        cfg.region.clone(),
        cfg.reachable_agent.clone(),
        Arc::clone(&cfg.catalog),
    );
    // The api is admitted for health only; targets are the access proxy's alone.
    let routes = Routes::default().add_service(ControllerInternalServiceServer::with_interceptor(
        internal,
        grpc::only(&[RoleKind::Access]),
    ));
    let server = tokio::spawn(grpc::serve(listener, tls, routes, server_stop.clone()));
    let agents_port = tokio::spawn(agent_port.serve(server_stop.clone()));
    // The runtime is read once this controller leads, so a standby never acts on a stale view.
    let fake = cfg.fake.clone();
    let (kind, agent_hub, offline_fail) = (cfg.backend, Arc::clone(&hub), cfg.timers.offline_fail);
    let backend = move || -> Arc<dyn Backend> {
        match kind {
            BackendKind::Agent => Arc::new(agents::AgentBackend::new(agent_hub, offline_fail)),
            BackendKind::Fake | BackendKind::Kubernetes => fake::FakeBackend::start(fake),
        }
    };
    let led = lead::lead(&cfg, store, backend, hub, &shutdown).await;
    server_stop.trigger();
    // The servers drain what is in flight, but a long-lived stream (a relay's, an agent's whose
    // peer is slow to close) could hold them past the supervisor's grace (EINSORA_STOP_GRACE,
    // 10 s by default, for the whole stop): after DRAIN what is still open is cut.
    let drained = tokio::time::timeout(DRAIN, async {
        server.await.context("controller server")??;
        agents_port.await.context("agents' port")??;
        anyhow::Ok(())
    })
    .await;
    match drained {
        Ok(served) => served?,
        Err(_) => {
            tracing::info!(drain = ?DRAIN, "streams still open at shutdown; cutting them");
        }
    }
    led
}

/// How long the controller's servers may drain at shutdown.
const DRAIN: std::time::Duration = std::time::Duration::from_secs(5);
