//! What `ApiInternalService.Authenticate` tells the access proxy about a caller of endpoints:
//! an inference key's owner, scope and limits, and the tenant's inference limits (for API
//! tokens too). Recorded usage of today is read only where a `tokens_per_day` limit holds, so
//! a call without one costs no more than before.

use einsora_core::ids::TenantId;
use einsora_proto::internal::v1 as pb;
use einsora_store::TokensOf;
use tonic::Status;

use crate::accounts::inference_keys::{by_key, limits_pb, scope_pb, used_today};
use crate::caller::Auth;
use crate::status;

/// The answer for an inference key: its owner, its grant and the tenant's limits.
pub(crate) async fn authenticate(
    auth: &Auth,
    key: &str,
) -> Result<pb::AuthenticateResponse, Status> {
    let (user, record) = by_key(auth, key).await?;
    let tokens_today = if record.limits.tokens_per_day.is_some() {
        used_today(auth, user.tenant_id, TokensOf::Key(record.id)).await?
    } else {
        0
    };
    let (all_endpoints, endpoint_ids) = scope_pb(&record.scope);
    let mut answer = pb::AuthenticateResponse {
        tenant_id: user.tenant_id.to_string(),
        user_id: user.id.to_string(),
        subject: user.email.clone(),
        inference_key: Some(pb::InferenceGrant {
            key_id: record.id.to_string(),
            all_endpoints,
            endpoint_ids,
            limits: Some(limits_pb(&record.limits)),
            tokens_today,
        }),
        ..pb::AuthenticateResponse::default()
    };
    add_tenant_limits(auth, user.tenant_id, &mut answer).await?;
    Ok(answer)
}

/// Puts the tenant's inference limits (and today's recorded tokens, under a daily limit) on
/// the answer.
pub(crate) async fn add_tenant_limits(
    auth: &Auth,
    tenant: TenantId,
    answer: &mut pb::AuthenticateResponse,
) -> Result<(), Status> {
    let limits = auth
        .store()
        .inference_limits(tenant)
        .await
        .map_err(status::store)?;
    if limits.tokens_per_day.is_some() {
        answer.tenant_tokens_today = used_today(auth, tenant, TokensOf::Tenant).await?;
    }
    answer.tenant_limits = Some(limits_pb(&limits));
    Ok(())
}
