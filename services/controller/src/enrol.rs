//! Enrolment: a machine trades a one-time token and a CSR for its certificate. The CSR is
//! checked and signed before the token is redeemed, so a bad CSR never uses a token up; the
//! token's redemption, the machine's registration and its certificate's record are one
//! transaction, so of concurrent redemptions exactly one machine comes out.

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

#[derive(Debug, thiserror::Error)]
pub enum EnrolError {
    /// Unknown, used, revoked and expired tokens all read alike.
    #[error("the enrolment token is not valid (unknown, used, revoked or expired)")]
    Token,
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
    let machine_id = MachineId::new();
    let validity = Validity::from_now(lifetime);
    let certificate = agents_ca.sign_agent_csr(csr_pem, *machine_id.as_uuid(), validity)?;
    let redemption = Redemption {
        token_hash: secret_hash(token),
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

#[cfg(test)]
mod tests;
