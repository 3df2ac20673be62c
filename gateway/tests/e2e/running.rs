//! The real gateway (`einsora_gateway::serve`) in front of a tonic server of the test's
//! choosing, joined by mutual TLS from a fresh installation CA.

use std::net::SocketAddr;

use einsora_gateway::Config;
use einsora_runtime::grpc::{self, InternalTls};
use einsora_runtime::pki::{Role, RoleKind};
use einsora_runtime::shutdown::Shutdown;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tonic::service::Routes;

use crate::settings;

pub struct Running {
    /// Where the gateway listens.
    pub http: SocketAddr,
    shutdown: Shutdown,
    api: JoinHandle<Result<(), grpc::ServeError>>,
    gateway: JoinHandle<anyhow::Result<()>>,
    _dir: tempfile::TempDir,
}

/// `routes` as the api, and the gateway with `extra` settings in front of it.
pub async fn start(routes: Routes, extra: &[(&str, &str)]) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let tls = InternalTls::from_settings(&settings(dir.path(), &[])).unwrap();
    tls.init().unwrap();
    let shutdown = Shutdown::new();
    let api_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let api_addr = api_listener.local_addr().unwrap().to_string();
    let server_tls = tls.server(Role::Api, &[RoleKind::Gateway]).unwrap();
    let api = tokio::spawn(grpc::serve(
        api_listener,
        server_tls,
        routes,
        shutdown.clone(),
    ));
    let mut all = vec![("EINSORA_API_ADDR", api_addr.as_str())];
    all.extend_from_slice(extra);
    let cfg = Config::from_settings(&settings(dir.path(), &all)).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let http = listener.local_addr().unwrap();
    let gateway = tokio::spawn(einsora_gateway::serve(listener, cfg, shutdown.clone()));
    Running {
        http,
        shutdown,
        api,
        gateway,
        _dir: dir,
    }
}

impl Running {
    /// Stops both, and says whether they stopped cleanly.
    pub async fn stop(self) {
        self.shutdown.trigger();
        self.gateway.await.unwrap().unwrap();
        self.api.await.unwrap().unwrap();
    }
}
