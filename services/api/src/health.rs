//! StatusService: the installation's health at a glance (`GET /v1/status`, `einsora status`,
//! the dashboard's banner). The api asks each role the way `einsora up` does, as itself: gRPC
//! health over mutual TLS for the controller and metering, a connection for the access proxy,
//! a round trip for the store, and the store's leases for who leads each region. The answers
//! are kept [`FRESH`] so that many dashboards polling cost one round of asking.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use einsora_core::catalog::Catalog;
use einsora_proto::machines::v1::MachineStatus;
use einsora_proto::status::v1::status_service_server::StatusService;
use einsora_proto::status::v1::{self as pb};
use einsora_runtime::grpc::{self, InternalTls};
use einsora_runtime::pki::Role;
use einsora_runtime::settings::{ConfigError, Settings};
use einsora_store::{Store, WorkloadFilter};
use time::OffsetDateTime;
use tokio::sync::Mutex;
use tonic::{Request, Response, Status};

use crate::caller::{Access, Auth};
use crate::{status, wire};

/// The roles' own address settings (`einsora_controller::ADDR`, …), named again here rather
/// than depending on those crates.
const CONTROLLER_ADDR: &str = "EINSORA_CONTROLLER_ADDR";
const METERING_ADDR: &str = "EINSORA_METERING_ADDR";
const ACCESS_ADDR: &str = "EINSORA_ACCESS_ADDR";

/// How long one round of asking answers every caller.
const FRESH: Duration = Duration::from_secs(2);
/// How long a role has to answer.
const PATIENCE: Duration = Duration::from_secs(2);

/// Where the other roles listen.
#[derive(Debug, Clone)]
pub struct Peers {
    pub controller: SocketAddr,
    pub metering: SocketAddr,
    pub access: SocketAddr,
}

impl Peers {
    pub fn from_settings(settings: &Settings) -> Result<Peers, ConfigError> {
        Ok(Peers {
            controller: settings.socket_addr(CONTROLLER_ADDR, "127.0.0.1:8082")?,
            metering: settings.socket_addr(METERING_ADDR, "127.0.0.1:8083")?,
            access: settings.socket_addr(ACCESS_ADDR, "127.0.0.1:8090")?,
        })
    }
}

#[derive(Debug)]
pub struct StatusApi {
    store: Arc<dyn Store>,
    auth: Arc<Auth>,
    catalog: Arc<Catalog>,
    peers: Peers,
    tls: InternalTls,
    asked: Mutex<Option<(Instant, Vec<pb::RoleStatus>)>>,
}

impl StatusApi {
    pub fn new(
        store: Arc<dyn Store>,
        auth: Arc<Auth>,
        catalog: Arc<Catalog>,
        peers: Peers,
        tls: InternalTls,
    ) -> Self {
        StatusApi {
            store,
            auth,
            catalog,
            peers,
            tls,
            asked: Mutex::new(None),
        }
    }

    /// Every role's health, asked now unless it was asked within [`FRESH`].
    async fn roles(&self) -> Vec<pb::RoleStatus> {
        let mut asked = self.asked.lock().await;
        if let Some((at, roles)) = asked.as_ref()
            && at.elapsed() < FRESH
        {
            return roles.clone();
        }
        let store = self.store_health();
        let controller = self.grpc_health(Role::Controller, self.peers.controller);
        let metering = self.grpc_health(Role::Metering, self.peers.metering);
        let access = connects(self.peers.access);
        let (store, controller, metering, access, regions) =
            tokio::join!(store, controller, metering, access, self.regions());
        let mut roles = vec![
            role("gateway", Ok("answered this request".to_owned())),
            role("api", Ok("answered this request".to_owned())),
            role("store", store),
            role("controller", controller),
            role("metering", metering),
            role("access", access),
        ];
        roles.extend(regions);
        *asked = Some((Instant::now(), roles.clone()));
        roles
    }

    async fn store_health(&self) -> Result<String, String> {
        let started = Instant::now();
        match tokio::time::timeout(PATIENCE, self.store.ping()).await {
            Ok(Ok(())) => Ok(answered_in(started)),
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "the store didn't answer the status's ping");
                Err("the database isn't answering".to_owned())
            }
            Err(_) => Err("the database didn't answer in time".to_owned()),
        }
    }

    async fn grpc_health(&self, role: Role, addr: SocketAddr) -> Result<String, String> {
        let started = Instant::now();
        let tls = self.tls.client(Role::Api, role).map_err(|e| {
            tracing::warn!(error = %e, %role, "no certificate to ask a role's health with");
            "its health can't be asked (certificates)".to_owned()
        })?;
        let addr = addr.to_string();
        let asked = grpc::is_serving(&tls, &addr);
        match tokio::time::timeout(PATIENCE, asked).await {
            Ok(true) => Ok(answered_in(started)),
            Ok(false) | Err(_) => Err("not answering".to_owned()),
        }
    }

    /// Who leads each region of the catalog: a live lease is a controller reconciling it.
    async fn regions(&self) -> Vec<pb::RoleStatus> {
        let leases = match tokio::time::timeout(PATIENCE, self.store.leases()).await {
            Ok(Ok(leases)) => leases,
            // The store's own entry says it isn't answering.
            _ => return Vec::new(),
        };
        let now = OffsetDateTime::now_utc();
        self.catalog
            .regions()
            .iter()
            .map(|region| {
                let name = region.controller_lease();
                let led = leases.iter().any(|l| l.name == name && l.expires_at > now);
                let health = match led {
                    true => Ok("led by a controller".to_owned()),
                    false => Err(
                        "no controller leads it: workloads there won't start or stop".to_owned(),
                    ),
                };
                role(&format!("region {region}"), health)
            })
            .collect()
    }
}

async fn connects(addr: SocketAddr) -> Result<String, String> {
    let started = Instant::now();
    match tokio::time::timeout(PATIENCE, tokio::net::TcpStream::connect(addr)).await {
        Ok(Ok(_)) => Ok(answered_in(started)),
        _ => Err("not answering".to_owned()),
    }
}

fn answered_in(started: Instant) -> String {
    format!("answered in {} ms", started.elapsed().as_millis())
}

fn role(name: &str, health: Result<String, String>) -> pb::RoleStatus {
    let (healthy, detail) = match health {
        Ok(detail) => (true, detail),
        Err(detail) => (false, detail),
    };
    pb::RoleStatus {
        name: name.to_owned(),
        healthy,
        detail,
    }
}

#[tonic::async_trait]
impl StatusService for StatusApi {
    async fn get_status(
        &self,
        request: Request<pb::GetStatusRequest>,
    ) -> Result<Response<pb::Status>, Status> {
        let caller = self.auth.caller(request.metadata(), Access::Read).await?;
        let roles = self.roles().await;
        let theirs = WorkloadFilter {
            tenant: Some(caller.tenant),
            ..WorkloadFilter::default()
        };
        let counted = async {
            tokio::join!(
                self.store.machines_of(caller.tenant),
                self.store.workloads(&theirs)
            )
        };
        // A store that hangs is said so (the roles above say which), not waited out.
        let (machines, workloads) = tokio::time::timeout(PATIENCE, counted)
            .await
            .map_err(|_| Status::unavailable("the database isn't answering"))?;
        let now = OffsetDateTime::now_utc();
        let (mut online, mut offline) = (0, 0);
        for machine in machines.map_err(status::store)? {
            match wire::machine_status(&machine, now) {
                MachineStatus::Online => online += 1,
                MachineStatus::Offline => offline += 1,
                _ => {}
            }
        }
        let mut by_state: HashMap<String, u32> = HashMap::new();
        // The filter leaves deleted workloads out.
        for w in workloads.map_err(status::store)? {
            *by_state.entry(w.state.as_str().to_owned()).or_default() += 1;
        }
        Ok(Response::new(pb::Status {
            roles,
            machines_online: online,
            machines_offline: offline,
            workloads: by_state,
        }))
    }
}
