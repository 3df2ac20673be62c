//! Enrolment tokens: how a tenant lets another machine join. A token is single-use and
//! short-lived; the machine it enrols belongs to the token's tenant and region. Its secret is
//! stored only as a SHA-256 hash (the caller hashes it), and every read takes the tenant, so
//! another tenant's token is simply absent.

use async_trait::async_trait;
use einsora_core::ids::{EnrolmentTokenId, MachineId, TenantId, UserId};
use einsora_core::region::Region;
use time::OffsetDateTime;

use crate::{SecretHash, StoreError};

#[derive(Debug, Clone)]
pub struct NewEnrolmentToken {
    pub id: EnrolmentTokenId,
    pub tenant_id: TenantId,
    pub name: String,
    pub region: Region,
    /// The token's first characters (`enr_Ab3x`): not a secret.
    pub prefix: String,
    pub token_hash: SecretHash,
    pub created_by: UserId,
    pub expires_at: OffsetDateTime,
}

/// An enrolment token without its secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnrolmentTokenRecord {
    pub id: EnrolmentTokenId,
    pub tenant_id: TenantId,
    pub name: String,
    pub region: Region,
    pub prefix: String,
    pub created_by: UserId,
    pub created_at: OffsetDateTime,
    pub expires_at: OffsetDateTime,
    pub used_at: Option<OffsetDateTime>,
    /// The machine it enrolled, once used.
    pub machine_id: Option<MachineId>,
    pub revoked_at: Option<OffsetDateTime>,
}

#[async_trait]
pub trait EnrolmentStore: Send + Sync {
    /// Records a new, unused token. `NotFound` if its creator is not a user of its tenant.
    async fn create_enrolment_token(
        &self,
        token: &NewEnrolmentToken,
    ) -> Result<EnrolmentTokenRecord, StoreError>;

    /// The tenant's tokens, used, revoked and expired ones included, oldest first.
    async fn enrolment_tokens(
        &self,
        tenant: TenantId,
    ) -> Result<Vec<EnrolmentTokenRecord>, StoreError>;

    /// Whether a token with this hash could be redeemed now (it exists and is unused,
    /// unrevoked and unexpired): what enrolment checks before it looks at anything else it was
    /// sent. Advisory only: `redeem_enrolment_token` alone decides, once.
    async fn enrolment_token_redeemable(&self, token_hash: &SecretHash)
    -> Result<bool, StoreError>;

    /// Redeems a token that is unused, unrevoked and unexpired, once: of concurrent redemptions
    /// exactly one wins. In the same transaction it registers the machine the token enrols —
    /// its tenant's, in its region, known by the given ID and labelled by its host name — and
    /// records its first certificate. `None` if the token can't be redeemed (unknown, used,
    /// revoked or expired alike).
    async fn redeem_enrolment_token(
        &self,
        redemption: &Redemption,
    ) -> Result<Option<EnrolledMachine>, StoreError>;

    /// Revokes the tenant's token if it is unused (again, or once used: no change, so a used
    /// token comes back with `revoked_at` unset); `None` if the tenant has no such token.
    async fn revoke_enrolment_token(
        &self,
        tenant: TenantId,
        id: EnrolmentTokenId,
    ) -> Result<Option<EnrolmentTokenRecord>, StoreError>;
}

/// A token presented to enrol a machine, with what the machine becomes.
#[derive(Debug, Clone)]
pub struct Redemption {
    pub token_hash: SecretHash,
    pub machine_id: MachineId,
    /// The host name its agent reported: a label only.
    pub label: String,
    pub certificate: MachineCertificate,
}

/// A certificate issued to a machine, as the store records it (never the key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineCertificate {
    /// Hex, as in the certificate.
    pub serial: String,
    /// SHA-256 of the certificate's DER.
    pub fingerprint: [u8; 32],
    pub not_before: OffsetDateTime,
    pub not_after: OffsetDateTime,
}

/// The machine a redeemed token enrolled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnrolledMachine {
    pub machine_id: MachineId,
    pub owner: TenantId,
    pub region: Region,
}
