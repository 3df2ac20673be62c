//! TLS 1.3 for tonic, with the installation CA as the only trust anchor and a certificate's
//! [`Role`](crate::pki::Role) checked during the handshake on both sides: a server admits only
//! the roles it was built for, a client accepts only the server role it dialled.
//!
//! Always the ring provider, passed explicitly: no process-wide default is read or installed.

mod client;
mod limited;
mod pinned;
mod server;
pub mod web;

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{CertificateError, OtherError, RootCertStore};

use crate::pki::{IssuedCert, PkiError, cert_der_from_pem};

pub use client::ClientTls;
pub use limited::{ConnectionLimits, Limited, incoming_limited};
pub use server::{incoming, peer_role, server_config, server_config_for_agents};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error(transparent)]
    Pki(#[from] PkiError),
    #[error("no private key found in the PEM text")]
    NoKey,
    #[error("TLS setup refused: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("cannot build the certificate verifier: {0}")]
    Verifier(#[from] rustls::server::VerifierBuilderError),
    #[error("{0:?} is not a host:port address")]
    Address(String),
    #[error("cannot connect: {0}")]
    Connect(#[from] tonic::transport::Error),
}

const ALPN_H2: &[u8] = b"h2";

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn roots(ca_pem: &str) -> Result<Arc<RootCertStore>, TlsError> {
    let mut roots = RootCertStore::empty();
    roots.add(cert_der_from_pem(ca_pem)?)?;
    Ok(Arc::new(roots))
}

fn chain_and_key(
    own: &IssuedCert,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
    let cert = cert_der_from_pem(&own.cert_pem)?;
    let key = PrivateKeyDer::from_pem_slice(own.key_pem.as_bytes()).map_err(|_| TlsError::NoKey)?;
    Ok((vec![cert], key))
}

/// Why a peer's certificate was refused after its chain verified: its role.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct RoleRefused(String);

fn refuse(why: impl Into<String>) -> rustls::Error {
    rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(RoleRefused(
        why.into(),
    )))))
}
