//! Enrolment: a machine trades a one-time token and a CSR for its certificate. The token is
//! checked first (by its hash: known, unused, unrevoked, unexpired), so nothing else an
//! unauthenticated caller sent is parsed, let alone signed, for a bad one; the CSR is then
//! checked and signed before the token is redeemed, so a bad CSR never uses a token up; the
//! token's redemption, the machine's registration and its certificate's record are one
//! transaction, so of concurrent redemptions exactly one machine comes out. Attempts are limited
//! per address (`limit`) before any of this; `service` is the RPC.

use std::time::Duration;

use einsora_core::ids::{MachineId, TenantId};
use einsora_core::region::Region;
use einsora_runtime::pki::{AgentCertificate, Ca, PkiError, Validity};
use einsora_store::{MachineCertificate, Redemption, Store, StoreError, secret_hash};

#[derive(Debug)]
pub struct Enrolled {
    pub machine_id: MachineId,
    pub owner: TenantId,
    pub region: Region,
    pub certificate: AgentCertificate,
}

/// Longer than any token the API makes (`enr_…` and its CA pin): not looked up.
const MAX_TOKEN: usize = 256;
/// Far more than a CSR for any key the agent makes.
pub const MAX_CSR: usize = 16 << 10;

#[derive(Debug, thiserror::Error)]
pub enum EnrolError {
    /// Too many attempts from the caller's address lately.
    #[error("too many enrolment attempts from this address; try again in {}s", .0.as_secs().max(1))]
    RateLimited(Duration),
    /// Unknown, used, revoked and expired tokens all read alike.
    #[error("the enrolment token is not valid (unknown, used, revoked or expired)")]
    Token,
    #[error("the CSR is larger than {MAX_CSR} bytes")]
    CsrTooLarge,
    #[error(transparent)]
    Csr(#[from] PkiError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

pub async fn enrol(
    store: &dyn Store,
    agents_ca: &Ca,
    token: &str,
    csr_pem: &str,
    hostname: &str,
    lifetime: Duration,
) -> Result<Enrolled, EnrolError> {
    let token_hash = secret_hash(token);
    if token.len() > MAX_TOKEN || !store.enrolment_token_redeemable(&token_hash).await? {
        return Err(EnrolError::Token);
    }
    if csr_pem.len() > MAX_CSR {
        return Err(EnrolError::CsrTooLarge);
    }
    let machine_id = MachineId::new();
    let validity = Validity::from_now(lifetime);
    let certificate = agents_ca.sign_agent_csr(csr_pem, *machine_id.as_uuid(), validity)?;
    let redemption = Redemption {
        token_hash,
        machine_id,
        label: hostname.to_owned(),
        certificate: MachineCertificate {
            serial: certificate.serial.clone(),
            fingerprint: certificate.fingerprint,
            not_before: validity.not_before,
            not_after: validity.not_after,
        },
    };
    let enrolled = store
        .redeem_enrolment_token(&redemption)
        .await?
        .ok_or(EnrolError::Token)?;
    tracing::info!(machine = %machine_id, region = %enrolled.region, "machine enrolled");
    Ok(Enrolled {
        machine_id,
        owner: enrolled.owner,
        region: enrolled.region,
        certificate,
    })
}

mod limit;
mod service;

pub use limit::EnrolLimit;
pub use service::EnrolmentApi;

#[cfg(test)]
mod tests;
