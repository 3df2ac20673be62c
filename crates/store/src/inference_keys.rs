//! Inference keys (`isk_…`): credentials that call a tenant's endpoints at the access proxy and
//! manage nothing, owned by a user, scoped to chosen endpoints or all of the tenant's, each
//! with optional limits; and a tenant's own inference limits over all its keys and API tokens.
//! As with API tokens, the caller hashes the secret (SHA-256): only the hash reaches the store.

use async_trait::async_trait;
use einsora_core::ids::{InferenceKeyId, TenantId, UserId, WorkloadId};
use time::OffsetDateTime;

use crate::{SecretHash, StoreError, User};

/// Limits on inference, each `None` when there is none of that kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InferenceLimits {
    pub requests_per_minute: Option<u32>,
    pub tokens_per_minute: Option<u32>,
    /// Per UTC day.
    pub tokens_per_day: Option<u32>,
}

impl InferenceLimits {
    /// Whether it states no limit at all.
    pub fn is_empty(&self) -> bool {
        *self == InferenceLimits::default()
    }
}

/// Which of its tenant's endpoints a key may call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyScope {
    /// Every endpoint of the tenant, those made later included.
    AllEndpoints,
    /// Only these (their workload IDs); one deleted later is simply never found.
    Endpoints(Vec<WorkloadId>),
}

impl KeyScope {
    pub fn allows(&self, endpoint: WorkloadId) -> bool {
        match self {
            KeyScope::AllEndpoints => true,
            KeyScope::Endpoints(ids) => ids.contains(&endpoint),
        }
    }
}

#[derive(Debug, Clone)]
pub struct NewInferenceKey {
    pub id: InferenceKeyId,
    pub tenant_id: TenantId,
    pub user_id: UserId,
    pub name: String,
    /// The key's first characters (`isk_Ab3x`): not a secret.
    pub prefix: String,
    pub key_hash: SecretHash,
    pub scope: KeyScope,
    pub limits: InferenceLimits,
}

/// An inference key without its secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InferenceKeyRecord {
    pub id: InferenceKeyId,
    pub tenant_id: TenantId,
    pub user_id: UserId,
    /// The owner's email.
    pub owner: String,
    pub name: String,
    pub prefix: String,
    pub scope: KeyScope,
    pub limits: InferenceLimits,
    pub created_at: OffsetDateTime,
    pub revoked_at: Option<OffsetDateTime>,
    pub last_used_at: Option<OffsetDateTime>,
}

#[async_trait]
pub trait InferenceKeyStore: Send + Sync {
    /// `Taken(InferenceKeyName)` if the user already has an unrevoked key of that name;
    /// `NotFound` if the user isn't the tenant's.
    async fn create_inference_key(
        &self,
        key: &NewInferenceKey,
    ) -> Result<InferenceKeyRecord, StoreError>;

    /// The unrevoked key whose secret hashes to `key_hash`, with its (enabled) owner; notes
    /// its use (at most once a minute, to spare the writer).
    async fn inference_key(
        &self,
        key_hash: &SecretHash,
    ) -> Result<Option<(User, InferenceKeyRecord)>, StoreError>;

    /// The tenant's keys (only `owner`'s when given), revoked ones included, oldest first.
    async fn inference_keys(
        &self,
        tenant: TenantId,
        owner: Option<UserId>,
    ) -> Result<Vec<InferenceKeyRecord>, StoreError>;

    /// Revokes a key of the tenant (only if `owner`'s, when given); again: no change. `None`
    /// if there is no such key.
    async fn revoke_inference_key(
        &self,
        tenant: TenantId,
        owner: Option<UserId>,
        id: InferenceKeyId,
    ) -> Result<Option<InferenceKeyRecord>, StoreError>;

    /// The tenant's inference limits (none set: all `None`).
    async fn inference_limits(&self, tenant: TenantId) -> Result<InferenceLimits, StoreError>;

    /// Sets the tenant's inference limits, all of them: a limit left `None` is none.
    async fn set_inference_limits(
        &self,
        tenant: TenantId,
        limits: &InferenceLimits,
    ) -> Result<(), StoreError>;
}
