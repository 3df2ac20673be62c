//! Trust for an agent that has no CA certificate yet, only the SHA-256 of one (from its
//! enrolment token, as kubeadm's discovery hash): the controller's enrolment port sends the
//! installation CA's certificate after its own; the one matching the pin becomes the only
//! trust anchor, and the usual chain and role checks follow.

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};
use sha2::{Digest, Sha256};

use super::client::RoleVerifier;
use super::{provider, refuse};
use crate::pki::Role;

#[derive(Debug)]
pub(super) struct PinnedVerifier {
    pub pin: [u8; 32],
    pub expected: Role,
}

impl ServerCertVerifier for PinnedVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let ca = intermediates
            .iter()
            .find(|c| <[u8; 32]>::from(Sha256::digest(c.as_ref())) == self.pin)
            .ok_or_else(|| refuse("the server didn't present the CA certificate the pin names"))?;
        let mut roots = RootCertStore::empty();
        roots.add(ca.clone().into_owned())?;
        let chain = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider())
            .build()
            .map_err(|e| refuse(e.to_string()))?;
        let verifier = RoleVerifier {
            chain,
            expected: self.expected,
        };
        verifier.verify_server_cert(end_entity, &[], server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &provider().signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &provider().signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}
