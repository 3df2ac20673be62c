//! `InferenceKeyService`: inference keys (`isk_…`) and the tenant's inference limits. A key is
//! made like an API token (`secrets`: 32 base62 characters, shown once, stored as its SHA-256)
//! but authenticates only at the access proxy's endpoints (`ApiInternalService.Authenticate`):
//! `Auth::by_token` refuses it, so every management route answers it `unauthenticated`. Only a
//! session may create one; a member lists and revokes their own, an owner or admin the
//! tenant's; everyone reads the tenant's limits, owners and admins set them.

use std::sync::Arc;

use einsora_core::ids::{InferenceKeyId, TenantId, WorkloadId};
use einsora_core::kind::WorkloadKind;
use einsora_proto::accounts::v1 as pb;
use einsora_proto::accounts::v1::inference_key_service_server::InferenceKeyService;
use einsora_proto::convert::{parse_id, timestamp};
use einsora_store::{
    InferenceKeyRecord, InferenceLimits, KeyScope, NewInferenceKey, TokensOf, User,
};
use time::OffsetDateTime;
use tonic::{Request, Response, Status};

use super::{check_name, secrets};
use crate::caller::{Access, Auth, Caller, unauthenticated};
use crate::{scoped, status};

/// The most endpoints one key names.
const MAX_ENDPOINTS: usize = 100;

#[derive(Debug)]
pub struct InferenceKeys {
    auth: Arc<Auth>,
}

impl InferenceKeys {
    pub fn new(auth: Arc<Auth>) -> Self {
        InferenceKeys { auth }
    }
}

/// The owner of a live inference key, and the key.
pub(crate) async fn by_key(auth: &Auth, key: &str) -> Result<(User, InferenceKeyRecord), Status> {
    if !secrets::looks_like_inference_key(key) {
        return Err(unauthenticated());
    }
    auth.store()
        .inference_key(&secrets::sha256(key))
        .await
        .map_err(status::store)?
        .ok_or_else(unauthenticated)
}

/// The start of today, UTC: what a daily limit counts from.
pub(crate) fn start_of_day(now: OffsetDateTime) -> OffsetDateTime {
    now.replace_time(time::Time::MIDNIGHT)
}

/// Tokens `of` used today, as recorded.
pub(crate) async fn used_today(auth: &Auth, tenant: TenantId, of: TokensOf) -> Result<u64, Status> {
    let since = start_of_day(OffsetDateTime::now_utc());
    let used = auth
        .store()
        .tokens_used(tenant, of, since)
        .await
        .map_err(status::store)?;
    Ok(used.total())
}

pub(crate) fn limits_pb(l: &InferenceLimits) -> pb::InferenceLimits {
    pb::InferenceLimits {
        requests_per_minute: l.requests_per_minute,
        tokens_per_minute: l.tokens_per_minute,
        tokens_per_day: l.tokens_per_day,
    }
}

fn limits_from(l: Option<&pb::InferenceLimits>) -> InferenceLimits {
    l.map(|l| InferenceLimits {
        requests_per_minute: l.requests_per_minute,
        tokens_per_minute: l.tokens_per_minute,
        tokens_per_day: l.tokens_per_day,
    })
    .unwrap_or_default()
}

/// What is left of a daily limit.
fn left(limits: &InferenceLimits, used: u64) -> Option<u64> {
    limits
        .tokens_per_day
        .map(|day| u64::from(day).saturating_sub(used))
}

/// The endpoint IDs of a scope, as the API writes them (`all_endpoints`, `endpoint_ids`).
pub(crate) fn scope_pb(scope: &KeyScope) -> (bool, Vec<String>) {
    match scope {
        KeyScope::AllEndpoints => (true, Vec::new()),
        KeyScope::Endpoints(ids) => (false, ids.iter().map(ToString::to_string).collect()),
    }
}

fn key_pb(k: &InferenceKeyRecord, used: u64) -> pb::InferenceKey {
    let (all_endpoints, endpoint_ids) = scope_pb(&k.scope);
    pb::InferenceKey {
        id: k.id.to_string(),
        name: k.name.clone(),
        prefix: k.prefix.clone(),
        user_id: k.user_id.to_string(),
        owner_email: k.owner.clone(),
        all_endpoints,
        endpoint_ids,
        limits: Some(limits_pb(&k.limits)),
        created_at: Some(timestamp(k.created_at)),
        last_used_at: k.last_used_at.map(timestamp),
        revoked_at: k.revoked_at.map(timestamp),
        tokens_used_today: used,
        tokens_left_today: left(&k.limits, used),
    }
}

impl InferenceKeys {
    /// The scope a create asks for: all endpoints, or 1-100 the caller sees.
    async fn scope(&self, caller: &Caller, all: bool, ids: &[String]) -> Result<KeyScope, Status> {
        match (all, ids.is_empty()) {
            (true, true) => return Ok(KeyScope::AllEndpoints),
            (true, false) => {
                return Err(Status::invalid_argument(
                    "say either all_endpoints or endpoint_ids, not both",
                ));
            }
            (false, true) => {
                return Err(Status::invalid_argument(
                    "endpoint_ids: name the endpoints the key may call, or set all_endpoints",
                ));
            }
            (false, false) => {}
        }
        if ids.len() > MAX_ENDPOINTS {
            return Err(Status::invalid_argument(format!(
                "endpoint_ids: at most {MAX_ENDPOINTS}"
            )));
        }
        let mut endpoints: Vec<WorkloadId> = Vec::with_capacity(ids.len());
        for raw in ids {
            let id: WorkloadId = parse_id("endpoint_ids", raw).map_err(status::invalid)?;
            // Another member's endpoint is as unknown as one that doesn't exist.
            let endpoint = scoped::workload(self.auth.store(), &caller.scope(), id, false)
                .await
                .ok()
                .filter(|w| w.kind == WorkloadKind::Endpoint);
            if endpoint.is_none() {
                return Err(Status::invalid_argument(format!(
                    "endpoint_ids: you have no endpoint {id}"
                )));
            }
            if !endpoints.contains(&id) {
                endpoints.push(id);
            }
        }
        Ok(KeyScope::Endpoints(endpoints))
    }

    async fn tenant_limits(&self, tenant: TenantId) -> Result<pb::TenantInferenceLimits, Status> {
        let limits = self
            .auth
            .store()
            .inference_limits(tenant)
            .await
            .map_err(status::store)?;
        let used = used_today(&self.auth, tenant, TokensOf::Tenant).await?;
        Ok(pb::TenantInferenceLimits {
            limits: Some(limits_pb(&limits)),
            tokens_used_today: used,
            tokens_left_today: left(&limits, used),
        })
    }
}

#[tonic::async_trait]
impl InferenceKeyService for InferenceKeys {
    async fn create_inference_key(
        &self,
        request: Request<pb::CreateInferenceKeyRequest>,
    ) -> Result<Response<pb::CreateInferenceKeyResponse>, Status> {
        let auth = self
            .auth
            .authenticate(request.metadata(), Access::Write)
            .await?;
        if auth.caller.via_token {
            return Err(Status::permission_denied(
                "an API token can't create inference keys: sign in",
            ));
        }
        let req = request.into_inner();
        check_name(&req.name)?;
        let scope = self
            .scope(&auth.caller, req.all_endpoints, &req.endpoint_ids)
            .await?;
        let key = secrets::new_inference_key().map_err(status::internal)?;
        let new = NewInferenceKey {
            id: InferenceKeyId::new(),
            tenant_id: auth.user.tenant_id,
            user_id: auth.user.id,
            name: req.name,
            prefix: secrets::display_prefix(&key),
            key_hash: secrets::sha256(&key),
            scope,
            limits: limits_from(req.limits.as_ref()),
        };
        let record = self
            .auth
            .store()
            .create_inference_key(&new)
            .await
            .map_err(status::store)?;
        Ok(Response::new(pb::CreateInferenceKeyResponse {
            key,
            inference_key: Some(key_pb(&record, 0)),
        }))
    }

    async fn list_inference_keys(
        &self,
        request: Request<pb::ListInferenceKeysRequest>,
    ) -> Result<Response<pb::ListInferenceKeysResponse>, Status> {
        let caller = self.auth.caller(request.metadata(), Access::Read).await?;
        let owner = (!caller.role.administers()).then_some(caller.user);
        let records = self
            .auth
            .store()
            .inference_keys(caller.tenant, owner)
            .await
            .map_err(status::store)?;
        let mut keys = Vec::with_capacity(records.len());
        for k in &records {
            let used = if k.revoked_at.is_none() {
                used_today(&self.auth, caller.tenant, TokensOf::Key(k.id)).await?
            } else {
                0
            };
            keys.push(key_pb(k, used));
        }
        Ok(Response::new(pb::ListInferenceKeysResponse { keys }))
    }

    async fn revoke_inference_key(
        &self,
        request: Request<pb::RevokeInferenceKeyRequest>,
    ) -> Result<Response<pb::InferenceKey>, Status> {
        let caller = self.auth.caller(request.metadata(), Access::Write).await?;
        let id: InferenceKeyId = scoped::id(&request.get_ref().id)?;
        let owner = (!caller.role.administers()).then_some(caller.user);
        let revoked = self
            .auth
            .store()
            .revoke_inference_key(caller.tenant, owner, id)
            .await
            .map_err(status::store)?
            .ok_or_else(status::not_found)?;
        Ok(Response::new(key_pb(&revoked, 0)))
    }

    async fn get_inference_limits(
        &self,
        request: Request<pb::GetInferenceLimitsRequest>,
    ) -> Result<Response<pb::TenantInferenceLimits>, Status> {
        let caller = self.auth.caller(request.metadata(), Access::Read).await?;
        Ok(Response::new(self.tenant_limits(caller.tenant).await?))
    }

    async fn set_inference_limits(
        &self,
        request: Request<pb::SetInferenceLimitsRequest>,
    ) -> Result<Response<pb::TenantInferenceLimits>, Status> {
        let caller = self.auth.caller(request.metadata(), Access::Write).await?;
        caller.must_administer("set the tenant's inference limits")?;
        let limits = limits_from(request.into_inner().limits.as_ref());
        self.auth
            .store()
            .set_inference_limits(caller.tenant, &limits)
            .await
            .map_err(status::store)?;
        Ok(Response::new(self.tenant_limits(caller.tenant).await?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_day_starts_at_midnight_utc() {
        let now = time::macros::datetime!(2026-12-06 01:30:12.5 UTC);
        assert_eq!(
            start_of_day(now),
            time::macros::datetime!(2026-12-06 00:00 UTC)
        );
    }

    #[test]
    fn what_is_left_of_a_day_never_goes_below_zero() {
        let limits = InferenceLimits {
            tokens_per_day: Some(100),
            ..InferenceLimits::default()
        };
        assert_eq!(left(&limits, 30), Some(70));
        assert_eq!(left(&limits, 300), Some(0));
        assert_eq!(left(&InferenceLimits::default(), 30), None);
    }
}
