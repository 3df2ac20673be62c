//! The agents' port (EINSORA_AGENT_ADDR): where machines enrol (server-authenticated TLS that
//! presents the installation CA for them to pin) and keep their Sync stream (their machine
//! certificate from the agents CA). Bound by every controller of the region; Sync serves
//! machines only while this controller leads (`agents::sync`).
//! Every machine may be an attacker, and anyone may reach the port: connections are capped in
//! all and per address, handshakes time out (`tls::incoming_limited`), HTTP/2 is held to what
//! an agent needs (a few streams, small headers, keepalive pings), Enroll is limited per
//! address (`enrol`), and what a stream sends is bounded (`agents`).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use einsora_runtime::grpc;
use einsora_runtime::pki::Role;
use einsora_runtime::shutdown::Shutdown;
use einsora_runtime::tls::{self, ConnectionLimits};
use einsora_store::Store;
use tonic::service::Routes;
use tonic::transport::Server;

use crate::agents::relay::{RelayApi, TUNNELS_PER_MACHINE};
use crate::agents::{Hub, Relays, Renewals, SyncApi, Trust};
use crate::config::{AGENT_ADDR, Config};
use crate::enrol::{EnrolLimit, EnrolmentApi};

/// `EINSORA_AGENT_ENROL_PER_MINUTE` counts attempts over this window.
const ENROL_WINDOW: Duration = Duration::from_secs(60);
/// Connections from one address (an IPv6 /64) at once: an agent holds one; a few agents may
/// share a NAT.
const CONNECTIONS_PER_ADDRESS: usize = 32;
/// HTTP/2 streams a connection may have open at once: an agent's Sync, its relay's listening
/// stream and tunnels, an Enroll, a health check.
const STREAMS_PER_CONNECTION: u32 = 8 + TUNNELS_PER_MACHINE as u32;
/// The most header bytes a request may send (an agent's are a few hundred).
const MAX_HEADER_LIST: u32 = 16 << 10;
/// Keepalive pings end a connection whose peer vanished without closing it (a partition).
const KEEPALIVE: Duration = Duration::from_secs(10);

/// The agents' port, bound (so a port in use is reported before anything else starts).
pub struct AgentPort {
    listener: tokio::net::TcpListener,
    tls: Arc<rustls::ServerConfig>,
    routes: Routes,
    connections: ConnectionLimits,
}

impl AgentPort {
    pub async fn bind(
        cfg: &Config,
        store: Arc<dyn Store>,
        hub: Arc<Hub>,
        relays: Arc<Relays>,
        shutdown: &Shutdown,
    ) -> anyhow::Result<AgentPort> {
        let agents_ca = Arc::new(cfg.tls.agents_ca()?);
        let (tls, ca_pem) = cfg.tls.agents_server(Role::Controller)?;
        let listener = grpc::bind(AGENT_ADDR, cfg.agent_addr).await?;
        // One revocation sweep for every stream of the port, every recheck.
        let trust = Arc::new(Trust::default());
        Arc::clone(&trust).spawn(
            Arc::clone(&store),
            cfg.timers.stream.recheck,
            shutdown.clone(),
        );
        let sync = SyncApi::new(
            Arc::clone(&store),
            Arc::clone(&cfg.catalog),
            Arc::clone(&hub),
            Renewals {
                agents_ca: Arc::clone(&agents_ca),
                lifetime: cfg.timers.cert_lifetime,
            },
            Arc::clone(&trust),
            cfg.timers.stream,
            shutdown.clone(),
        )
        .with_output_caps(cfg.output_caps);
        let relay = RelayApi {
            store: Arc::clone(&store),
            hub,
            relays,
            trust,
            shutdown: shutdown.clone(),
        };
        let enrolment = EnrolmentApi {
            store,
            agents_ca: Arc::clone(&agents_ca),
            cert_lifetime: cfg.timers.cert_lifetime,
            ca_pem,
            limit: EnrolLimit::new(cfg.limits.enrol_per_minute, ENROL_WINDOW),
        };
        tracing::info!(addr = %cfg.agent_addr, "agents' port serving");
        Ok(AgentPort {
            listener,
            tls,
            routes: Routes::new(enrolment.into_server())
                .add_service(sync.into_server())
                .add_service(relay.into_server()),
            connections: ConnectionLimits::new(cfg.limits.max_connections, CONNECTIONS_PER_ADDRESS),
        })
    }

    /// Where it listens (a test binds port 0).
    #[cfg(test)]
    pub fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves with gRPC health, within the port's limits, until `shutdown`, then drains.
    pub async fn serve(self, shutdown: Shutdown) -> anyhow::Result<()> {
        let (_health, health_service) = tonic_health::server::health_reporter();
        let incoming = tls::incoming_limited(self.listener, self.tls, self.connections);
        Server::builder()
            .http2_keepalive_interval(Some(KEEPALIVE))
            .http2_keepalive_timeout(Some(KEEPALIVE))
            .max_concurrent_streams(Some(STREAMS_PER_CONNECTION))
            .concurrency_limit_per_connection(STREAMS_PER_CONNECTION as usize)
            .http2_max_header_list_size(Some(MAX_HEADER_LIST))
            .layer(einsora_runtime::metrics::GrpcMetricsLayer)
            .add_routes(self.routes.add_service(health_service))
            .serve_with_incoming_shutdown(incoming, shutdown.cancelled())
            .await
            .context("agents' port")
    }
}

#[cfg(test)]
mod tests;
