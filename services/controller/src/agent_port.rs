//! The agents' port (EINSORA_AGENT_ADDR): where machines enrol (server-authenticated TLS that
//! presents the installation CA for them to pin) and keep their Sync stream (their machine
//! certificate from the agents CA). Served by every controller of the region, leader or not.

use std::sync::Arc;

use anyhow::Context;
use einsora_proto::agent::v1::enrolment_service_server::{
    EnrolmentService, EnrolmentServiceServer,
};
use einsora_proto::agent::v1::sync_service_server::SyncServiceServer;
use einsora_proto::agent::v1::{EnrollRequest, EnrollResponse};
use einsora_proto::convert::timestamp;
use einsora_runtime::grpc;
use einsora_runtime::pki::{Ca, Role};
use einsora_runtime::shutdown::Shutdown;
use einsora_store::{Store, StoreError};
use tonic::service::Routes;
use tonic::{Request, Response, Status};

use crate::agents::{Hub, Renewals, SyncApi};
use crate::config::{AGENT_ADDR, Config};
use crate::enrol::{self, EnrolError};

/// The agents' port, bound (so a port in use is reported before anything else starts).
pub struct AgentPort {
    listener: tokio::net::TcpListener,
    tls: Arc<rustls::ServerConfig>,
    routes: Routes,
}

impl AgentPort {
    pub async fn bind(
        cfg: &Config,
        store: Arc<dyn Store>,
        hub: Arc<Hub>,
        shutdown: &Shutdown,
    ) -> anyhow::Result<AgentPort> {
        let agents_ca = Arc::new(cfg.tls.agents_ca()?);
        let (tls, ca_pem) = cfg.tls.agents_server(Role::Controller)?;
        let listener = grpc::bind(AGENT_ADDR, cfg.agent_addr).await?;
        let sync = SyncApi::new(
            Arc::clone(&store),
            Arc::clone(&cfg.catalog),
            hub,
            Renewals {
                agents_ca: Arc::clone(&agents_ca),
                lifetime: cfg.timers.cert_lifetime,
            },
            shutdown.clone(),
        );
        let enrolment = Enrolment {
            store,
            agents_ca: Arc::clone(&agents_ca),
            cert_lifetime: cfg.timers.cert_lifetime,
            ca_pem,
        };
        tracing::info!(addr = %cfg.agent_addr, "agents' port serving");
        Ok(AgentPort {
            listener,
            tls,
            routes: Routes::new(EnrolmentServiceServer::new(enrolment))
                .add_service(SyncServiceServer::new(sync)),
        })
    }

    pub async fn serve(self, shutdown: Shutdown) -> anyhow::Result<()> {
        grpc::serve(self.listener, self.tls, self.routes, shutdown)
            .await
            .context("agents' port")
    }
}

#[derive(Debug)]
struct Enrolment {
    store: Arc<dyn Store>,
    agents_ca: Arc<Ca>,
    cert_lifetime: std::time::Duration,
    /// The installation CA, which the agent trusts on Sync.
    ca_pem: String,
}

#[tonic::async_trait]
impl EnrolmentService for Enrolment {
    async fn enroll(
        &self,
        request: Request<EnrollRequest>,
    ) -> Result<Response<EnrollResponse>, Status> {
        let req = request.into_inner();
        let enrolled = enrol::enrol(
            &*self.store,
            &self.agents_ca,
            &req.enrolment_token,
            &req.csr_pem,
            &req.hostname,
            self.cert_lifetime,
        )
        .await
        .map_err(status)?;
        Ok(Response::new(EnrollResponse {
            machine_id: enrolled.machine_id.to_string(),
            certificate_chain_pem: enrolled.certificate.cert_pem,
            ca_certificate_pem: self.ca_pem.clone(),
            not_after: Some(timestamp(enrolled.certificate.validity.not_after)),
            region: enrolled.region.to_string(),
        }))
    }
}

/// The one mapping from enrolment's errors to statuses.
fn status(err: EnrolError) -> Status {
    match err {
        EnrolError::Token => Status::permission_denied(err.to_string()),
        EnrolError::Csr(_) => Status::invalid_argument(err.to_string()),
        EnrolError::Store(StoreError::Unavailable(_)) => {
            tracing::warn!(error = %err, "the store is unavailable");
            Status::unavailable("the database is unavailable; try again shortly")
        }
        EnrolError::Store(e) => {
            tracing::error!(error = %e, "enrolment failed");
            Status::internal("internal error: the operator's log has the details")
        }
    }
}
