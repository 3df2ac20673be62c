//! The `Enroll` RPC, served unauthenticated on the agents' port: the caller's address is
//! counted first (`EnrolLimit`), then `enrol` checks the token before it looks at the CSR; its
//! errors become statuses here, once.

use std::sync::Arc;
use std::time::Duration;

use einsora_proto::agent::v1::enrolment_service_server::{
    EnrolmentService, EnrolmentServiceServer,
};
use einsora_proto::agent::v1::{EnrollRequest, EnrollResponse};
use einsora_proto::convert::timestamp;
use einsora_runtime::pki::Ca;
use einsora_store::Store;
use tonic::{Request, Response, Status};

use super::{EnrolError, EnrolLimit, MAX_CSR, enrol};

/// The largest `EnrollRequest` decoded: a CSR and a few short strings.
const MAX_REQUEST: usize = MAX_CSR + (4 << 10);

#[derive(Debug)]
pub struct EnrolmentApi {
    pub store: Arc<dyn Store>,
    pub agents_ca: Arc<Ca>,
    pub cert_lifetime: Duration,
    /// The installation CA, which the agent trusts on Sync.
    pub ca_pem: String,
    pub limit: EnrolLimit,
}

impl EnrolmentApi {
    /// The service, refusing requests larger than an enrolment needs before decoding them.
    pub fn into_server(self) -> EnrolmentServiceServer<EnrolmentApi> {
        EnrolmentServiceServer::new(self).max_decoding_message_size(MAX_REQUEST)
    }
}

#[tonic::async_trait]
impl EnrolmentService for EnrolmentApi {
    async fn enroll(
        &self,
        request: Request<EnrollRequest>,
    ) -> Result<Response<EnrollResponse>, Status> {
        let addr = request.remote_addr().map(|a| a.ip());
        if let Err(wait) = self.limit.admit(addr) {
            return Err(status(EnrolError::RateLimited(wait)));
        }
        let req = request.into_inner();
        let enrolled = enrol(
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
pub fn status(err: EnrolError) -> Status {
    match err {
        EnrolError::RateLimited(_) => Status::resource_exhausted(err.to_string()),
        EnrolError::Token => Status::permission_denied(err.to_string()),
        EnrolError::Csr(_) | EnrolError::CsrTooLarge => Status::invalid_argument(err.to_string()),
        EnrolError::Store(e) => crate::status::store(&e, "enrolment"),
    }
}
