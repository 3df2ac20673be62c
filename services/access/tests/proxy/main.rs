//! The real proxy (`einsora_access::serve`) between a raw HTTP client and a workload's server on
//! a Unix socket, with the api and the controller as tonic servers over mutual TLS from a fresh
//! installation CA.

// A test harness: a failed unwrap is a failed test, and it reads its own environment.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod accounting;
mod endpoints;
mod engine;
mod fakes;
mod http;
mod https;
mod inference_keys;
mod kept;
mod lifecycle;
mod one_base;
mod opening;
mod queue;
mod relayed;
mod routes;
mod scale_to_zero;
mod sessions;
mod workload;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use einsora_access::Config;
use einsora_proto::common::v1::WorkloadKind;
use einsora_runtime::access_url::AccessUrl;
use einsora_runtime::grpc::{self, InternalTls};
use einsora_runtime::pki::{Role, RoleKind};
use einsora_runtime::shutdown::Shutdown;
use einsora_runtime::tls::web::AccessTls;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use uuid::Uuid;

use fakes::{Api, Controller, Who};
use workload::Workload;

/// Who a bearer credential belongs to is reused this long: the product's second, scaled down.
pub const CREDENTIAL_TTL: Duration = Duration::from_millis(300);
pub const NOTEBOOK_TOKEN: &str = "nbtoken-SECRET-7f3a";
pub const WORKER_KEY: &str = "workerkey-SECRET-91c2";

#[derive(Debug)]
pub struct Harness {
    pub proxy: SocketAddr,
    pub api: Arc<Api>,
    pub controller: Arc<Controller>,
    /// A second controller, asked first, standing by: the proxy must find the one leading.
    pub standby: Arc<Controller>,
    pub workload: Workload,
    /// The proxy's own; the fakes and the workload stop with `others`.
    pub shutdown: Shutdown,
    others: Shutdown,
    server: Option<JoinHandle<anyhow::Result<()>>>,
    _dir: tempfile::TempDir,
}

pub use einsora_testkit::settings_in as settings;

impl Harness {
    pub async fn start() -> Harness {
        Harness::with_url("http://localhost:8090").await
    }

    pub async fn with_url(public_url: &str) -> Harness {
        // Each test changes the fake controller's answers and expects them at once.
        Harness::with(public_url, std::time::Duration::ZERO).await
    }

    /// A proxy that reuses a workload's target for `target_ttl`.
    pub async fn with(public_url: &str, target_ttl: std::time::Duration) -> Harness {
        let url = AccessUrl::parse(public_url).unwrap();
        Harness::serving(url, |_| AccessTls::Off, target_ttl).await
    }

    /// A proxy whose endpoints are held to `limits`.
    pub async fn with_limits(limits: einsora_access::limits::Limits) -> Harness {
        let url = AccessUrl::parse("http://localhost:8090").unwrap();
        Harness::configured(url, |_| AccessTls::Off, Duration::ZERO, limits).await
    }

    /// A proxy at `public_url` whose port speaks what `web_tls` makes of the PKI directory.
    pub async fn serving(
        public_url: AccessUrl,
        web_tls: impl FnOnce(&std::path::Path) -> AccessTls,
        target_ttl: std::time::Duration,
    ) -> Harness {
        Harness::configured(public_url, web_tls, target_ttl, Default::default()).await
    }

    async fn configured(
        public_url: AccessUrl,
        web_tls: impl FnOnce(&std::path::Path) -> AccessTls,
        target_ttl: std::time::Duration,
        limits: einsora_access::limits::Limits,
    ) -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let tls = InternalTls::from_settings(&settings(dir.path(), &[])).unwrap();
        tls.init().unwrap();
        let others = Shutdown::new();
        let api = Arc::new(Api::default());
        let controller = Arc::new(Controller::default());
        api.controller.set(Arc::clone(&controller)).unwrap();
        let api_addr = serve_grpc(&tls, Role::Api, fakes::api_routes(&api), &others).await;
        let controller_routes = fakes::controller_routes(&controller);
        let controller_addr = serve_grpc(&tls, Role::Controller, controller_routes, &others).await;
        let standby = Arc::new(Controller::default());
        standby
            .standby
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let standby_routes = fakes::controller_routes(&standby);
        let standby_addr = serve_grpc(&tls, Role::Controller, standby_routes, &others).await;
        let workload = Workload::start(&dir.path().join("jl.sock"), &others).await;

        let web_tls = web_tls(&dir.path().join("pki"));
        web_tls.issue(&public_url).unwrap();
        let cfg = Config {
            addr: "127.0.0.1:0".parse().unwrap(),
            public_url,
            web_tls,
            api_addr,
            controller_addrs: vec![standby_addr, controller_addr],
            tls,
            limits,
            target_ttl,
            // Scaled down: a revoked credential is refused within this.
            credential_ttl: CREDENTIAL_TTL,
            http: einsora_runtime::http::HttpLimits {
                max_connections: 1024,
                header_read: std::time::Duration::from_secs(10),
            },
            touch_every: Duration::from_millis(100),
        };
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let proxy = listener.local_addr().unwrap();
        let shutdown = Shutdown::new();
        let server = tokio::spawn(einsora_access::serve(listener, cfg, shutdown.clone()));
        Harness {
            proxy,
            api,
            controller,
            standby,
            workload,
            shutdown,
            others,
            server: Some(server),
            _dir: dir,
        }
    }

    /// A running notebook of `who`'s, served by the test workload.
    pub fn notebook(&self, who: &Who) -> Uuid {
        self.run(who, WorkloadKind::Notebook, NOTEBOOK_TOKEN)
    }

    /// A running endpoint of `who`'s, served by the test workload.
    pub fn endpoint(&self, who: &Who) -> Uuid {
        self.run(who, WorkloadKind::Endpoint, WORKER_KEY)
    }

    fn run(&self, who: &Who, kind: WorkloadKind, token: &str) -> Uuid {
        let id = Uuid::now_v7();
        let socket = self.workload.socket();
        self.controller
            .run(&id.to_string(), who, kind, socket, token);
        id
    }

    /// A fresh ticket for `who` at `workload`.
    pub fn ticket(&self, workload: Uuid, who: &Who) -> String {
        let ticket = format!("tkt-SECRET-{}", Uuid::now_v7().simple());
        self.api
            .add_ticket(&ticket, &workload.to_string(), who.clone());
        ticket
    }

    /// Opens `workload` as `who` with a ticket; the session cookie's value.
    pub async fn open(&self, workload: Uuid, who: &Who) -> String {
        self.open_with_ticket(workload, who).await.0
    }

    /// [`Harness::open`], and the ticket it was opened with.
    pub async fn open_with_ticket(&self, workload: Uuid, who: &Who) -> (String, String) {
        let ticket = self.ticket(workload, who);
        let answer = http::get(self.proxy, &host(workload), &open_path(&ticket), &[]).await;
        assert_eq!(answer.status, 200, "{answer:?}");
        let cookie = answer.header("set-cookie").unwrap();
        let value = cookie.split(';').next().unwrap();
        let session = value.strip_prefix("einsora_access=").unwrap().to_owned();
        (session, ticket)
    }

    /// Stops the proxy and waits for `serve` to return.
    pub async fn stop_proxy(&mut self) {
        self.shutdown.trigger();
        let server = self.server.take().unwrap();
        tokio::time::timeout(Duration::from_secs(10), server)
            .await
            .expect("the proxy stops on shutdown")
            .unwrap()
            .unwrap();
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.shutdown.trigger();
        self.others.trigger();
    }
}

async fn serve_grpc(
    tls: &InternalTls,
    role: Role,
    routes: tonic::service::Routes,
    shutdown: &Shutdown,
) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server_tls = tls.server(role, &[RoleKind::Access]).unwrap();
    tokio::spawn(grpc::serve(listener, server_tls, routes, shutdown.clone()));
    addr
}

/// The Host a browser sends for a notebook opened from the default public URL.
pub fn host(workload: Uuid) -> String {
    format!("w-{workload}.localhost:8090")
}

pub fn origin(workload: Uuid) -> String {
    format!("http://w-{workload}.localhost:8090")
}

pub fn open_path(ticket: &str) -> String {
    format!("/_einsora/open?ticket={ticket}")
}

pub fn cookie(session: &str) -> String {
    format!("einsora_access={session}")
}
