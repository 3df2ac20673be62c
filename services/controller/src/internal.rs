//! `ControllerInternalService`, for the other services over mutual TLS: where a ready workload
//! listens (the access proxy). (The api needn't wake a controller: the store's change signal
//! does.)

use std::sync::Arc;

use einsora_core::ids::{TenantId, WorkloadId};
use einsora_core::lifecycle::State;
use einsora_core::region::Region;
use einsora_proto::common::v1 as common_pb;
use einsora_proto::internal::v1 as pb;
use einsora_proto::internal::v1::controller_internal_service_server::ControllerInternalService;
use einsora_store::Store;
use tonic::{Request, Response, Status};

use crate::agents::Hub;

#[derive(Debug)]
pub struct Internal {
    store: Arc<dyn Store>,
    hub: Arc<Hub>,
    region: Region,
}

impl Internal {
    pub fn new(store: Arc<dyn Store>, hub: Arc<Hub>, region: Region) -> Self {
        Internal { store, hub, region }
    }
}

/// One answer for an unknown workload, another tenant's, and one not ready here: the caller
/// learns nothing it couldn't see already.
fn not_found() -> Status {
    Status::not_found("no such workload is ready here")
}

#[tonic::async_trait]
impl ControllerInternalService for Internal {
    async fn resolve_access_target(
        &self,
        request: Request<pb::ResolveAccessTargetRequest>,
    ) -> Result<Response<pb::ResolveAccessTargetResponse>, Status> {
        let req = request.into_inner();
        let id: WorkloadId = req.workload_id.parse().map_err(|_| not_found())?;
        let tenant: TenantId = req.tenant_id.parse().map_err(|_| not_found())?;
        let w = match self.store.workload(id).await {
            Ok(Some(w)) => w,
            Ok(None) => return Err(not_found()),
            Err(e) => {
                tracing::warn!(error = %e, "couldn't read a workload to resolve its access");
                return Err(Status::unavailable(
                    "the database is unavailable; try again shortly",
                ));
            }
        };
        let here = w.tenant_id == tenant && w.region == self.region && w.state == State::Running;
        let machine = w.machine_id.filter(|_| here).ok_or_else(not_found)?;
        // Running, but its machine hasn't said where it listens (yet, or again after a
        // restart of either side): worth a retry, unlike a workload that isn't running.
        let target = self
            .hub
            .target(machine, w.id, w.attempt.get())
            .ok_or_else(|| Status::unavailable("its machine hasn't reported it ready yet"))?;
        let placed_class = w
            .placed_class
            .clone()
            .unwrap_or_else(|| w.gpu_class.clone());
        Ok(Response::new(pb::ResolveAccessTargetResponse {
            workload_id: w.id.to_string(),
            kind: common_pb::WorkloadKind::from(w.kind).into(),
            attempt: w.attempt.get(),
            socket_path: target.socket_path,
            token: target.token,
            region: w.region.to_string(),
            placed_class,
            gpu_class: w.gpu_class,
        }))
    }
}
