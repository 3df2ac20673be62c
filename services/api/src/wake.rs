//! `ApiInternalService.WakeEndpoint`: scale-to-zero's start. A request to a parked endpoint
//! (stopped, `EndpointParams.park_after_idle_s` set) starts it as `POST
//! /v1/workloads/{id}/start` would for the request's caller: the same scope (a member wakes only
//! their own), the same quota checks (`Store::start`), then admission in its turn by the
//! controller. Its timeline names the user, and the inference key the request came with.

use einsora_core::catalog::Catalog;
use einsora_core::ids::{InferenceKeyId, TenantId, UserId, WorkloadId};
use einsora_core::kind::WorkloadKind;
use einsora_core::lifecycle::State;
use einsora_core::reasons::{KeyName, Reason, Waker};
use einsora_proto::convert::WorkloadParams;
use einsora_proto::internal::v1 as pb;
use einsora_store::{Store, UnitShape};
use tonic::Status;

use crate::{scoped, status};

/// One answer for anything the caller may not wake, as for an endpoint that isn't there.
fn not_found() -> Status {
    Status::not_found("no such endpoint parks when idle")
}

pub(crate) async fn wake(
    store: &dyn Store,
    catalog: &Catalog,
    req: pb::WakeEndpointRequest,
) -> Result<pb::WakeEndpointResponse, Status> {
    let tenant: TenantId = req.tenant_id.parse().map_err(|_| not_found())?;
    let user: UserId = req.user_id.parse().map_err(|_| not_found())?;
    let id: WorkloadId = req.endpoint_id.parse().map_err(|_| not_found())?;
    let user = store
        .user_of(tenant, user)
        .await
        .map_err(status::store)?
        .filter(|u| u.disabled_at.is_none())
        .ok_or_else(not_found)?;
    let key = match req.key_id.as_str() {
        "" => None,
        key => Some(key_name(store, tenant, user.id, key).await?),
    };
    let reason = Reason::WokenByRequest {
        by: Waker {
            subject: user.email.clone(),
            key,
        },
    };
    let scope = scoped::Scope {
        tenant,
        owner: (!user.role.sees_every_workload()).then_some(user.id),
    };
    let reason = &reason;
    let started = scoped::write_workload(store, &scope, id, |w| async move {
        if w.kind != WorkloadKind::Endpoint || !parks_when_idle(&w) {
            return Err(not_found());
        }
        match w.state {
            State::Stopped => {
                let shape = catalog
                    .class(&w.gpu_class)
                    .map(UnitShape::of)
                    .unwrap_or_default();
                store
                    .start(&w, shape, reason)
                    .await
                    .map_err(status::store)?;
                Ok(true)
            }
            // Another request woke it, or someone started it: on its way already.
            State::Pending | State::Queued | State::Provisioning | State::Running => Ok(false),
            _ => Err(Status::failed_precondition(format!(
                "it is {} and doesn't start for a request",
                w.state
            ))),
        }
    })
    .await?;
    Ok(pb::WakeEndpointResponse { started })
}

fn parks_when_idle(w: &einsora_core::workload::Workload) -> bool {
    matches!(
        WorkloadParams::from_json(w.kind, &w.params),
        Ok(WorkloadParams::Endpoint {
            park_after_idle_s: Some(_),
            ..
        })
    )
}

/// The user's key as a timeline names it; one that isn't theirs wakes nothing.
async fn key_name(
    store: &dyn Store,
    tenant: TenantId,
    user: UserId,
    key: &str,
) -> Result<KeyName, Status> {
    let key: InferenceKeyId = key.parse().map_err(|_| not_found())?;
    let keys = store
        .inference_keys(tenant, Some(user))
        .await
        .map_err(status::store)?;
    let record = keys
        .into_iter()
        .find(|k| k.id == key && k.revoked_at.is_none())
        .ok_or_else(not_found)?;
    Ok(KeyName {
        name: record.name,
        prefix: record.prefix,
    })
}
