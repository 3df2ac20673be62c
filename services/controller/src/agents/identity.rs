//! Who is on the other end of a Sync stream: the machine its verified certificate names (never
//! what it reports), and that certificate's fingerprint, which retires the machine's older
//! certificates once it is in use.

use einsora_core::ids::MachineId;
use einsora_runtime::pki::{Role, role_of};
use einsora_store::Store;
use sha2::{Digest, Sha256};
use tonic::Request;

use super::refusal::Refusal;

/// The machine a verified peer certificate names, and the certificate's fingerprint.
pub fn identity<T>(request: &Request<T>) -> Result<(MachineId, [u8; 32]), Refusal> {
    let certs = request.peer_certs().ok_or(Refusal::NoCertificate)?;
    let leaf = certs.first().ok_or(Refusal::NoCertificate)?;
    match role_of(leaf) {
        Ok(Role::Agent { machine_id }) => Ok((
            MachineId::from_uuid(machine_id),
            Sha256::digest(leaf.as_ref()).into(),
        )),
        _ => Err(Refusal::NotAMachine),
    }
}

/// The certificate this stream presents is in use: the machine's older ones stop being
/// accepted. A failure is logged and tried again on the next connect.
pub async fn retire_older_certificates(
    store: &dyn Store,
    machine: MachineId,
    fingerprint: &[u8; 32],
) {
    match store.retire_older_certificates(machine, fingerprint).await {
        Ok(0) => {}
        Ok(retired) => tracing::info!(
            %machine, retired, "its renewed certificate is in use; its previous ones are retired"
        ),
        Err(e) => tracing::warn!(%machine, error = %e, "couldn't retire its previous certificates"),
    }
}
