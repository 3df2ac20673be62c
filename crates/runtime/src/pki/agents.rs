//! Machine certificates. They come from a CA of their own, the agents CA, whose key the
//! controller holds to enrol machines and renew their certificates: services trust only the
//! installation CA, and the agents' Sync port only the agents CA, so a machine certificate is
//! never accepted as a service's, nor a service's as a machine's, and the controller never
//! holds the installation CA's key (ADR 0006).

use sha2::{Digest, Sha256};
use uuid::Uuid;
use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::extensions::ParsedExtension;
use x509_parser::prelude::FromDer;

use super::{Ca, PkiError, Role, Validity, cert_der_from_pem};

pub const AGENTS_CA_NAME: &str = "Einsora agents CA";

/// A machine certificate as issued: what the store records of it beside the PEM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentCertificate {
    pub cert_pem: String,
    /// Hex, as in the certificate.
    pub serial: String,
    /// SHA-256 of the certificate's DER.
    pub fingerprint: [u8; 32],
    pub validity: Validity,
}

impl Ca {
    /// Signs the key of a machine's CSR as that machine. The identity comes from
    /// `machine_id` alone; a CSR that asks for names or to be a CA is refused rather than
    /// trimmed, since no honest agent sends one.
    pub fn sign_agent_csr(
        &self,
        csr_pem: &str,
        machine_id: Uuid,
        validity: Validity,
    ) -> Result<AgentCertificate, PkiError> {
        check_csr(csr_pem)?;
        let cert_pem = self.sign_csr(csr_pem, Role::Agent { machine_id }, validity)?;
        let der = cert_der_from_pem(&cert_pem)?;
        let (_, cert) = x509_parser::parse_x509_certificate(&der)
            .map_err(|_| PkiError::Csr("produced a certificate that can't be read"))?;
        Ok(AgentCertificate {
            serial: cert.raw_serial_as_string().replace(':', ""),
            fingerprint: Sha256::digest(&der).into(),
            cert_pem,
            validity,
        })
    }
}

fn check_csr(csr_pem: &str) -> Result<(), PkiError> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(csr_pem.as_bytes())
        .map_err(|_| PkiError::Csr("is not a PEM CSR"))?;
    let (_, csr) = X509CertificationRequest::from_der(&pem.contents)
        .map_err(|_| PkiError::Csr("can't be parsed"))?;
    for extension in csr.requested_extensions().into_iter().flatten() {
        match extension {
            ParsedExtension::SubjectAlternativeName(_) => {
                return Err(PkiError::Csr(
                    "asks for names: a machine's identity is set by the controller",
                ));
            }
            ParsedExtension::BasicConstraints(bc) if bc.ca => {
                return Err(PkiError::Csr("asks to be a certificate authority"));
            }
            _ => {}
        }
    }
    Ok(())
}
