//! Serving internal gRPC: bound before anything else starts (a port in use is a clear error
//! naming its setting), mutual TLS from the installation's CA with the callers' roles checked,
//! and a stop that drains when the shutdown signal fires.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use rustls::ServerConfig;
use tokio::net::TcpListener;
use tonic::service::Routes;
use tonic::transport::Server;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

use crate::pki::{Ca, Pki, PkiError, Role, RoleIdentity, RoleKind};
use crate::settings::{ConfigError, Settings};
use crate::shutdown::Shutdown;
use crate::tls::{self, ClientTls, TlsError};

/// Where the installation's CA and role certificates live.
pub const PKI_DIR: &str = "EINSORA_PKI_DIR";

const SERVICE_ROLES: [Role; 5] = [
    Role::Gateway,
    Role::Api,
    Role::Controller,
    Role::Metering,
    Role::Access,
];

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("{setting}: can't listen on {addr}: {source}")]
    Bind {
        setting: &'static str,
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("{PKI_DIR}: {0}")]
    Pki(#[from] PkiError),
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error("serving gRPC failed: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// The installation's PKI directory, from which servers and clients take their certificates.
#[derive(Debug, Clone)]
pub struct InternalTls {
    dir: PathBuf,
}

impl InternalTls {
    pub fn from_settings(settings: &Settings) -> Result<Self, ConfigError> {
        let default = settings.data_dir()?.join("pki");
        Ok(InternalTls {
            dir: settings.path(PKI_DIR, &default)?,
        })
    }

    /// Mutual TLS for a server of `role` that admits callers of the `allowed` roles only.
    pub fn server(
        &self,
        role: Role,
        allowed: &[RoleKind],
    ) -> Result<Arc<ServerConfig>, ServeError> {
        let id = RoleIdentity::load(&self.dir, role)?;
        Ok(tls::server_config(&id.ca_pem, &id.cert, allowed)?)
    }

    /// TLS for the agents' port (`tls::server_config_for_agents`), and the installation CA's
    /// PEM, which enrolled agents are given.
    pub fn agents_server(&self, role: Role) -> Result<(Arc<ServerConfig>, String), ServeError> {
        let id = RoleIdentity::load(&self.dir, role)?;
        let agents_ca = Pki::load_agents_ca(&self.dir)?;
        let config = tls::server_config_for_agents(&id.ca_pem, &id.cert, agents_ca.cert_pem())?;
        Ok((config, id.ca_pem))
    }

    /// The SHA-256 of the installation CA's certificate, which enrolment tokens carry.
    pub fn ca_fingerprint(&self) -> Result<[u8; 32], ServeError> {
        let ca_pem =
            std::fs::read_to_string(self.dir.join("ca.pem")).map_err(|source| PkiError::Io {
                path: self.dir.join("ca.pem"),
                source,
            })?;
        Ok(crate::pki::fingerprint(&ca_pem)?)
    }

    /// The agents CA, which signs machine certificates (ADR 0006); never the installation CA.
    pub fn agents_ca(&self) -> Result<Ca, ServeError> {
        Ok(Pki::load_agents_ca(&self.dir)?)
    }

    /// A client of `own` role that dials servers of `server` role.
    pub fn client(&self, own: Role, server: Role) -> Result<ClientTls, ServeError> {
        let id = RoleIdentity::load(&self.dir, own)?;
        Ok(ClientTls::new(&id.ca_pem, Some(&id.cert), server)?)
    }

    /// The directory itself (`einsora backup` keeps what is in it).
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// Creates the installation's CA if there is none, and a certificate for every service
    /// role (`einsora pki init`; `einsora up` does it too). Only this holds the CA's key.
    pub fn init(&self) -> Result<&std::path::Path, ServeError> {
        let pki = Pki::load_or_create(&self.dir)?;
        for role in SERVICE_ROLES {
            pki.role_cert(role)?;
        }
        pki.agents_ca()?;
        Ok(&self.dir)
    }
}

const KEEPALIVE: std::time::Duration = std::time::Duration::from_secs(10);

/// Binds the address a setting named.
pub async fn bind(setting: &'static str, addr: SocketAddr) -> Result<TcpListener, ServeError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind {
            setting,
            addr,
            source,
        })
}

/// Serves `routes` with gRPC health over mutual TLS until `shutdown` fires, then drains.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<ServerConfig>,
    routes: Routes,
    shutdown: Shutdown,
) -> Result<(), ServeError> {
    let (_health, health_service) = tonic_health::server::health_reporter();
    // Keepalive pings end a connection whose peer vanished without closing it (a partition),
    // so a long-lived stream (an agent's Sync) doesn't outlive its peer.
    Server::builder()
        .http2_keepalive_interval(Some(KEEPALIVE))
        .http2_keepalive_timeout(Some(KEEPALIVE))
        .layer(crate::metrics::GrpcMetricsLayer)
        .add_routes(routes.add_service(health_service))
        .serve_with_incoming_shutdown(tls::incoming(listener, tls), shutdown.cancelled())
        .await?;
    Ok(())
}

/// Whether the server at `addr` (`host:port`) answers gRPC health SERVING to a client with
/// `tls`: how a supervisor knows a role is ready.
pub async fn is_serving(tls: &ClientTls, addr: &str) -> bool {
    let Ok(channel) = tls.connect(addr).await else {
        return false;
    };
    let request = HealthCheckRequest {
        service: String::new(),
    };
    match HealthClient::new(channel).check(request).await {
        Ok(answer) => answer.get_ref().status() == ServingStatus::Serving,
        Err(_) => false,
    }
}

/// A service's own gate, beside the server's: the server admits every role that calls any of
/// its services (at the handshake); each service then admits only the roles that need it, so
/// a role's certificate can't call what it has no use for. Wrap a service with
/// `FooServer::with_interceptor(service, grpc::only(&[RoleKind::Access]))`.
pub fn only(
    roles: &'static [RoleKind],
) -> impl FnMut(tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> + Clone {
    move |request| match tls::peer_role(&request) {
        Some(role) if roles.contains(&role.kind()) => Ok(request),
        Some(role) => Err(tonic::Status::permission_denied(format!(
            "a {role} certificate may not call this service"
        ))),
        None => Err(tonic::Status::permission_denied(
            "no verified certificate: this service admits only the installation's roles",
        )),
    }
}
