//! The installation's own PKI: a CA, certificates that name a [`Role`], and a directory that
//! keeps them.

mod agents;
mod ca;
mod dir;
mod role;
mod web;

use std::path::PathBuf;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

pub use agents::{AGENTS_CA_NAME, AgentCertificate};
pub use ca::{Ca, IssuedCert, Validity};
pub use dir::{Pki, RoleIdentity};
pub use role::{IdentityError, Role, RoleKind, role_of};
pub use web::{WebNames, access_web_paths};

#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("certificate operation failed: {0}")]
    Rcgen(#[from] rcgen::Error),
    #[error("the CA certificate {0}")]
    BadCa(&'static str),
    #[error("the certificate request {0}")]
    Csr(&'static str),
    #[error("no PEM certificate found")]
    NoCertificate,
    #[error("{path:?}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path:?}: {problem}")]
    Files {
        path: PathBuf,
        problem: &'static str,
    },
}

/// A new key, and a certificate request for it that asks for nothing (no names, not a CA): what
/// a machine sends to join or to renew, since its identity comes from the controller alone.
pub fn csr() -> Result<(String, rcgen::KeyPair), PkiError> {
    let key = rcgen::KeyPair::generate()?;
    let csr_pem = rcgen::CertificateParams::default()
        .serialize_request(&key)?
        .pem()?;
    Ok((csr_pem, key))
}

/// The SHA-256 of the first certificate in a PEM text (of its DER): what a joining agent pins.
pub fn fingerprint(cert_pem: &str) -> Result<[u8; 32], PkiError> {
    use sha2::Digest;
    Ok(sha2::Sha256::digest(cert_der_from_pem(cert_pem)?).into())
}

/// The first certificate in a PEM text.
pub(crate) fn cert_der_from_pem(pem: &str) -> Result<CertificateDer<'static>, PkiError> {
    CertificateDer::from_pem_slice(pem.as_bytes()).map_err(|_| PkiError::NoCertificate)
}
