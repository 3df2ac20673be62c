//! MachineService: the caller's own machines, as the store knows them. The api never asks a
//! machine; machines register through their agent.

use std::sync::Arc;

use einsora_core::ids::{MachineId, UserId};
use einsora_core::workload::Workload;
use einsora_proto::machines::v1::machine_service_server::MachineService;
use einsora_proto::machines::v1::{self as pb};
use einsora_store::{Store, WorkloadFilter};
use time::OffsetDateTime;
use tonic::{Request, Response, Status};

use crate::caller::{Access, Auth};
use crate::scoped::Scope;
use crate::{scoped, status, wire};

#[derive(Debug, Clone)]
pub struct MachinesApi {
    store: Arc<dyn Store>,
    auth: Arc<Auth>,
}

impl MachinesApi {
    pub fn new(store: Arc<dyn Store>, auth: Arc<Auth>) -> Self {
        MachinesApi { store, auth }
    }

    /// The workloads the caller sees that hold capacity now: which of them holds each device.
    async fn holding(&self, scope: &Scope) -> Result<Vec<Workload>, Status> {
        let filter = WorkloadFilter {
            tenant: Some(scope.tenant),
            ..WorkloadFilter::holding_capacity()
        };
        let mut holding = self.store.workloads(&filter).await.map_err(status::store)?;
        holding.retain(|w| scope.sees(w));
        Ok(holding)
    }
}

#[tonic::async_trait]
impl MachineService for MachinesApi {
    async fn list_machines(
        &self,
        request: Request<pb::ListMachinesRequest>,
    ) -> Result<Response<pb::ListMachinesResponse>, Status> {
        let caller = self.auth.caller(request.metadata(), Access::Read).await?;
        let found = self
            .store
            .machines_of(caller.tenant)
            .await
            .map_err(status::store)?;
        let holding = self.holding(&caller.scope()).await?;
        let now = OffsetDateTime::now_utc();
        Ok(Response::new(pb::ListMachinesResponse {
            machines: found
                .iter()
                .map(|m| wire::machine(m, &holding, now))
                .collect(),
        }))
    }

    async fn get_machine(
        &self,
        request: Request<pb::GetMachineRequest>,
    ) -> Result<Response<pb::Machine>, Status> {
        let caller = self.auth.caller(request.metadata(), Access::Read).await?;
        let id: MachineId = scoped::id(&request.get_ref().id)?;
        let found = self
            .store
            .machine_of(caller.tenant, id)
            .await
            .map_err(status::store)?
            .ok_or_else(status::not_found)?;
        let holding = self.holding(&caller.scope()).await?;
        Ok(Response::new(wire::machine(
            &found,
            &holding,
            OffsetDateTime::now_utc(),
        )))
    }

    async fn revoke_machine(
        &self,
        request: Request<pb::RevokeMachineRequest>,
    ) -> Result<Response<pb::Machine>, Status> {
        let caller = self.auth.caller(request.metadata(), Access::Write).await?;
        caller.must_administer("revoke machines")?;
        let id: MachineId = scoped::id(&request.get_ref().id)?;
        let revoked = self
            .store
            .revoke_machine(caller.tenant, id)
            .await
            .map_err(status::store)?
            .ok_or_else(status::not_found)?;
        tracing::info!(machine = %id, "machine revoked");
        let holding = self.holding(&caller.scope()).await?;
        Ok(Response::new(wire::machine(
            &revoked,
            &holding,
            OffsetDateTime::now_utc(),
        )))
    }

    async fn set_trusted_users(
        &self,
        request: Request<pb::SetTrustedUsersRequest>,
    ) -> Result<Response<pb::Machine>, Status> {
        let caller = self.auth.caller(request.metadata(), Access::Write).await?;
        let req = request.into_inner();
        let id: MachineId = scoped::id(&req.id)?;
        let found = self
            .store
            .machine_of(caller.tenant, id)
            .await
            .map_err(status::store)?
            .ok_or_else(status::not_found)?;
        if found.machine.owner_user != Some(caller.user) {
            return Err(Status::permission_denied(
                "only the user who owns this machine (whose enrolment token brought it in) \
                 decides whom it trusts",
            ));
        }
        let mut users = Vec::with_capacity(req.user_ids.len());
        for (i, raw) in req.user_ids.iter().enumerate() {
            let field = format!("user_ids[{i}]");
            let user: UserId =
                einsora_proto::convert::parse_id(&field, raw).map_err(status::invalid)?;
            let known = self
                .store
                .user_of(caller.tenant, user)
                .await
                .map_err(status::store)?;
            if known.is_none() {
                return Err(Status::invalid_argument(format!(
                    "{field}: your tenant has no such user"
                )));
            }
            if user != caller.user && !users.contains(&user) {
                users.push(user);
            }
        }
        let set = self
            .store
            .set_trusted_users(caller.tenant, id, caller.user, &users)
            .await
            .map_err(status::store)?
            .ok_or_else(status::not_found)?;
        tracing::info!(machine = %id, trusted = users.len(), "machine trust set");
        let holding = self.holding(&caller.scope()).await?;
        Ok(Response::new(wire::machine(
            &set,
            &holding,
            OffsetDateTime::now_utc(),
        )))
    }
}
