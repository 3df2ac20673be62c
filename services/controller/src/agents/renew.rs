//! Certificate renewal over Sync: a machine asks with a CSR for a new key; the agents CA signs
//! it for the stream's own machine (whatever the CSR says) and the certificate is recorded, so
//! the machine keeps its identity without ever enrolling again.

use std::sync::Arc;
use std::time::Duration;

use einsora_core::ids::MachineId;
use einsora_proto::agent::v1 as pb;
use einsora_proto::convert::timestamp;
use einsora_runtime::pki::{Ca, Validity};
use einsora_store::{MachineCertificate, Store};

/// What renewing needs: the agents CA and how long a certificate lasts.
#[derive(Debug, Clone)]
pub struct Renewals {
    pub agents_ca: Arc<Ca>,
    pub lifetime: Duration,
}

impl Renewals {
    /// A new certificate for `machine`, recorded, and its fingerprint; `None` (logged) if the
    /// CSR is refused or the machine was revoked meanwhile.
    pub async fn renew(
        &self,
        store: &dyn Store,
        machine: MachineId,
        csr_pem: &str,
    ) -> Option<(pb::RenewedCertificate, [u8; 32])> {
        let validity = Validity::from_now(self.lifetime);
        let issued = match self
            .agents_ca
            .sign_agent_csr(csr_pem, *machine.as_uuid(), validity)
        {
            Ok(issued) => issued,
            Err(e) => {
                tracing::warn!(%machine, error = %e, "refused a certificate renewal");
                return None;
            }
        };
        let record = MachineCertificate {
            serial: issued.serial.clone(),
            fingerprint: issued.fingerprint,
            not_before: validity.not_before,
            not_after: validity.not_after,
        };
        match store.add_machine_certificate(machine, &record).await {
            Ok(true) => {
                tracing::info!(%machine, "machine certificate renewed");
                let renewed = pb::RenewedCertificate {
                    certificate_chain_pem: issued.cert_pem,
                    not_after: Some(timestamp(validity.not_after)),
                };
                Some((renewed, issued.fingerprint))
            }
            Ok(false) => None,
            Err(e) => {
                tracing::warn!(%machine, error = %e, "couldn't record a renewed certificate");
                None
            }
        }
    }
}
