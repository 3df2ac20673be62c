//! `ApiInternalService`, for the other services over mutual TLS: who a credential belongs to
//! (the access proxy serves endpoints to API tokens), and taking a notebook's one-time ticket.

use std::sync::Arc;

use einsora_core::ids::WorkloadId;
use einsora_proto::convert::timestamp;
use einsora_proto::internal::v1 as pb;
use einsora_proto::internal::v1::api_internal_service_server::ApiInternalService;
use einsora_proto::internal::v1::authenticate_request::Credential;
use tonic::{Request, Response, Status};

use einsora_store::Grant;

use crate::accounts::{me, secrets};
use crate::caller::{Access, Auth, unauthenticated};
use crate::grants;
use crate::inference;
use crate::status;

#[derive(Debug)]
pub struct Internal {
    auth: Arc<Auth>,
    /// Classes' shapes, for a woken endpoint's quota check (`wake.rs`).
    catalog: Arc<einsora_core::catalog::Catalog>,
}

impl Internal {
    pub fn new(auth: Arc<Auth>, catalog: Arc<einsora_core::catalog::Catalog>) -> Self {
        Internal { auth, catalog }
    }
}

#[tonic::async_trait]
impl ApiInternalService for Internal {
    async fn authenticate(
        &self,
        request: Request<pb::AuthenticateRequest>,
    ) -> Result<Response<pb::AuthenticateResponse>, Status> {
        let req = request.into_inner();
        let access = if req.state_changing {
            Access::Write
        } else {
            Access::Read
        };
        let csrf = Some(req.csrf_token.as_str()).filter(|c| !c.is_empty());
        let auth = match &req.credential {
            Some(Credential::ApiToken(token)) => self.auth.by_token(token).await?,
            Some(Credential::SessionId(id)) => self.auth.by_session(id, access, csrf).await?,
            Some(Credential::InferenceKey(key)) => {
                return Ok(Response::new(
                    inference::authenticate(&self.auth, key).await?,
                ));
            }
            None => return Err(unauthenticated()),
        };
        let via_token = auth.caller.via_token;
        let mut answer = pb::AuthenticateResponse {
            tenant_id: auth.user.tenant_id.to_string(),
            user_id: auth.user.id.to_string(),
            subject: auth.user.email.clone(),
            credential: Some(me::credential(&auth)),
            expires_at: auth.expires_at().map(timestamp),
            ..pb::AuthenticateResponse::default()
        };
        // An API token calls endpoints under the tenant's inference limits.
        if via_token {
            inference::add_tenant_limits(&self.auth, auth.user.tenant_id, &mut answer).await?;
        }
        Ok(Response::new(answer))
    }

    async fn wake_endpoint(
        &self,
        request: Request<pb::WakeEndpointRequest>,
    ) -> Result<Response<pb::WakeEndpointResponse>, Status> {
        let answer = crate::wake::wake(self.auth.store(), &self.catalog, request.into_inner());
        Ok(Response::new(answer.await?))
    }

    async fn redeem_ticket(
        &self,
        request: Request<pb::RedeemTicketRequest>,
    ) -> Result<Response<pb::RedeemTicketResponse>, Status> {
        let req = request.into_inner();
        let workload: WorkloadId = req.workload_id.parse().map_err(|_| unauthenticated())?;
        if req.ticket.is_empty() {
            return Err(unauthenticated());
        }
        let redeemed = self
            .auth
            .store()
            .redeem_ticket(&secrets::sha256(&req.ticket), workload)
            .await
            .map_err(status::store)?
            .ok_or_else(unauthenticated)?;
        Ok(Response::new(pb::RedeemTicketResponse {
            workload_id: redeemed.workload_id.to_string(),
            tenant_id: redeemed.user.tenant_id.to_string(),
            user_id: redeemed.user.id.to_string(),
            subject: redeemed.user.email,
            grant: grants::encode(&redeemed.granted_by),
        }))
    }

    async fn record_token_usage(
        &self,
        request: Request<pb::RecordTokenUsageRequest>,
    ) -> Result<Response<pb::RecordTokenUsageResponse>, Status> {
        let store = self.auth.store();
        let added = crate::token_usage::record(store, request.into_inner()).await?;
        Ok(Response::new(pb::RecordTokenUsageResponse { added }))
    }

    async fn live_grants(
        &self,
        request: Request<pb::LiveGrantsRequest>,
    ) -> Result<Response<pb::LiveGrantsResponse>, Status> {
        let asked = request.into_inner().grants;
        if asked.len() > grants::MOST_PER_CALL {
            return Err(Status::invalid_argument(format!(
                "at most {} grants in one call",
                grants::MOST_PER_CALL
            )));
        }
        let decoded: Vec<(String, Grant)> = asked
            .into_iter()
            .filter_map(|text| grants::decode(&text).map(|g| (text, g)))
            .collect();
        let only: Vec<Grant> = decoded.iter().map(|(_, g)| *g).collect();
        let live = self
            .auth
            .store()
            .grants_live(&only)
            .await
            .map_err(status::store)?;
        let live = decoded
            .into_iter()
            .zip(live)
            .filter_map(|((text, _), live)| live.then_some(text))
            .collect();
        Ok(Response::new(pb::LiveGrantsResponse { live }))
    }
}
