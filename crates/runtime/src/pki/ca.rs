//! The installation's certificate authority: ECDSA P-256, issuing one certificate per role.

use std::fmt;

use rcgen::{
    BasicConstraints, CertificateParams, CertificateSigningRequestParams, DistinguishedName,
    DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose, NameConstraints,
    PKCS_ECDSA_P256_SHA256, SanType, SerialNumber,
};
use time::OffsetDateTime;
use uuid::Uuid;

use super::{PkiError, Role};

// Certificates start a little in the past so a peer whose clock is slightly behind accepts them.
const CLOCK_SKEW: time::Duration = time::Duration::minutes(5);
const CA_LIFETIME: std::time::Duration = std::time::Duration::from_secs(10 * 365 * 24 * 3600);

/// When a certificate is valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validity {
    pub not_before: OffsetDateTime,
    pub not_after: OffsetDateTime,
}

impl Validity {
    pub fn from_now(lifetime: std::time::Duration) -> Self {
        let now = OffsetDateTime::now_utc();
        Self {
            not_before: now - CLOCK_SKEW,
            not_after: now + lifetime,
        }
    }
}

/// A certificate and its private key, both PEM. `Debug` leaves the key out.
#[derive(Clone, PartialEq, Eq)]
pub struct IssuedCert {
    pub cert_pem: String,
    pub key_pem: String,
}

impl fmt::Debug for IssuedCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IssuedCert")
            .field("cert_pem", &self.cert_pem)
            .finish_non_exhaustive()
    }
}

pub struct Ca {
    cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl fmt::Debug for Ca {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ca")
            .field("cert_pem", &self.cert_pem)
            .finish_non_exhaustive()
    }
}

impl Ca {
    /// A new CA whose certificate's common name is `name`.
    pub fn generate(name: &str) -> Result<Self, PkiError> {
        Self::generate_with(name, None)
    }

    /// A new CA that can vouch only for the names `constraints` permit (RFC 5280, 4.2.1.10).
    pub fn generate_constrained(
        name: &str,
        constraints: NameConstraints,
    ) -> Result<Self, PkiError> {
        Self::generate_with(name, Some(constraints))
    }

    fn generate_with(name: &str, constraints: Option<NameConstraints>) -> Result<Self, PkiError> {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
        let mut params = CertificateParams::default();
        params.name_constraints = constraints;
        params.distinguished_name = distinguished_name(name);
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let validity = Validity::from_now(CA_LIFETIME);
        params.not_before = validity.not_before;
        params.not_after = validity.not_after;
        params.serial_number = Some(fresh_serial());
        let cert_pem = params.self_signed(&key)?.pem();
        Ok(Self {
            cert_pem,
            issuer: Issuer::new(params, key),
        })
    }

    /// A CA saved earlier; refuses a certificate that is no CA or does not match the key.
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Self, PkiError> {
        let key = KeyPair::from_pem(key_pem)?;
        let der = super::cert_der_from_pem(cert_pem)?;
        let (_, cert) = x509_parser::parse_x509_certificate(&der)
            .map_err(|_| PkiError::BadCa("cannot be parsed"))?;
        if !cert.is_ca() {
            return Err(PkiError::BadCa("is not a CA certificate"));
        }
        if cert.public_key().subject_public_key.data.as_ref() != key.public_key_raw() {
            return Err(PkiError::BadCa("does not belong to the CA key"));
        }
        let issuer = Issuer::from_ca_cert_der(&der, key)?;
        Ok(Self {
            cert_pem: cert_pem.to_owned(),
            issuer,
        })
    }

    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The private key, PEM: only for saving the CA next to its certificate.
    pub fn key_pem(&self) -> String {
        self.issuer.key().serialize_pem()
    }

    /// A fresh key and a certificate for `role`.
    pub fn issue(&self, role: Role, validity: Validity) -> Result<IssuedCert, PkiError> {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
        let cert = leaf_params(role, validity)?.signed_by(&key, &self.issuer)?;
        Ok(IssuedCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// A fresh key and a server certificate for `names` alone, naming no role: it can serve
    /// browsers and is no one's identity inside the installation.
    pub fn issue_server(
        &self,
        names: Vec<SanType>,
        validity: Validity,
    ) -> Result<IssuedCert, PkiError> {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
        let mut params = CertificateParams::default();
        params.distinguished_name = distinguished_name("einsora access proxy");
        params.subject_alt_names = names;
        params.not_before = validity.not_before;
        params.not_after = validity.not_after;
        params.serial_number = Some(fresh_serial());
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(IssuedCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// Signs the key of a CSR (whose signature proves the requester holds it) as `role`. The
    /// certificate's names come from `role` alone; whatever the CSR asks for is ignored.
    pub fn sign_csr(
        &self,
        csr_pem: &str,
        role: Role,
        validity: Validity,
    ) -> Result<String, PkiError> {
        let csr = CertificateSigningRequestParams::from_pem(csr_pem)?;
        let cert = leaf_params(role, validity)?.signed_by(&csr.public_key, &self.issuer)?;
        Ok(cert.pem())
    }
}

fn leaf_params(role: Role, validity: Validity) -> Result<CertificateParams, PkiError> {
    let mut params = CertificateParams::default();
    params.distinguished_name = distinguished_name(&format!("einsora {role}"));
    params.subject_alt_names = vec![
        SanType::URI(role.spiffe_id().try_into()?),
        SanType::DnsName("localhost".try_into()?),
        SanType::DnsName(role.name().try_into()?),
    ];
    params.not_before = validity.not_before;
    params.not_after = validity.not_after;
    params.serial_number = Some(fresh_serial());
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    // Agents only ever dial out, so their certificates cannot serve.
    params.extended_key_usages = match role {
        Role::Agent { .. } => vec![ExtendedKeyUsagePurpose::ClientAuth],
        _ => vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ],
    };
    params.use_authority_key_identifier_extension = true;
    Ok(params)
}

fn distinguished_name(common_name: &str) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::OrganizationName, "Einsora");
    name.push(DnType::CommonName, common_name);
    name
}

// rcgen would derive the serial from the public key, repeating it when a key is signed again.
fn fresh_serial() -> SerialNumber {
    SerialNumber::from_slice(Uuid::now_v7().as_bytes())
}
