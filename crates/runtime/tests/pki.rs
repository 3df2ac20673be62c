//! The CA: role certificates, CSR signing, and loading a saved CA.

// A test harness: a failed unwrap is a failed test, and it reads its own environment.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::time::Duration;

use einsora_runtime::pki::{Ca, IdentityError, PkiError, Role, Validity, role_of};
use rcgen::{CertificateParams, KeyPair, SanType};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use uuid::Uuid;
use x509_parser::extensions::GeneralName;

const HOUR: Duration = Duration::from_secs(3600);

fn der(pem: &str) -> CertificateDer<'static> {
    CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()
}

fn names(cert_pem: &str) -> Vec<String> {
    let der = der(cert_pem);
    let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
    let san = cert.subject_alternative_name().unwrap().unwrap();
    san.value
        .general_names
        .iter()
        .map(|name| match name {
            GeneralName::URI(uri) => format!("uri:{uri}"),
            GeneralName::DNSName(dns) => format!("dns:{dns}"),
            other => format!("{other:?}"),
        })
        .collect()
}

fn signed_by(cert_pem: &str, ca: &Ca) -> bool {
    let (cert_der, ca_der) = (der(cert_pem), der(ca.cert_pem()));
    let (_, cert) = x509_parser::parse_x509_certificate(&cert_der).unwrap();
    let (_, ca) = x509_parser::parse_x509_certificate(&ca_der).unwrap();
    cert.verify_signature(Some(ca.public_key())).is_ok()
}

#[test]
fn a_certificate_names_its_role_localhost_and_the_role_word() {
    let ca = Ca::generate("test").unwrap();
    let issued = ca.issue(Role::Metering, Validity::from_now(HOUR)).unwrap();
    assert_eq!(role_of(&der(&issued.cert_pem)), Ok(Role::Metering));
    assert_eq!(
        names(&issued.cert_pem),
        [
            "uri:spiffe://einsora/metering",
            "dns:localhost",
            "dns:metering"
        ]
    );
    assert!(signed_by(&issued.cert_pem, &ca));
    assert!(!format!("{issued:?}").contains(&issued.key_pem));
}

#[test]
fn a_csr_gets_the_role_the_ca_chooses_not_the_one_it_asks_for() {
    let ca = Ca::generate("test").unwrap();
    let key = KeyPair::generate().unwrap();
    let mut wish = CertificateParams::new(vec!["controller".to_owned()]).unwrap();
    wish.subject_alt_names.push(SanType::URI(
        "spiffe://einsora/controller".try_into().unwrap(),
    ));
    let csr_pem = wish.serialize_request(&key).unwrap().pem().unwrap();

    let machine = Role::Agent {
        machine_id: Uuid::now_v7(),
    };
    let cert_pem = ca
        .sign_csr(&csr_pem, machine, Validity::from_now(HOUR))
        .unwrap();
    assert_eq!(role_of(&der(&cert_pem)), Ok(machine));
    assert!(!names(&cert_pem).iter().any(|n| n.contains("controller")));
    assert!(signed_by(&cert_pem, &ca));

    let cert_der = der(&cert_pem);
    let (_, cert) = x509_parser::parse_x509_certificate(&cert_der).unwrap();
    assert_eq!(
        cert.public_key().subject_public_key.data.as_ref(),
        key.public_key_raw()
    );
    let usage = cert.extended_key_usage().unwrap().unwrap().value;
    assert!(
        usage.client_auth && !usage.server_auth,
        "an agent cannot serve"
    );
}

#[test]
fn a_tampered_csr_is_refused() {
    let ca = Ca::generate("test").unwrap();
    let err = ca
        .sign_csr(
            "-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n",
            Role::Agent {
                machine_id: Uuid::now_v7(),
            },
            Validity::from_now(HOUR),
        )
        .unwrap_err();
    assert!(matches!(err, PkiError::Rcgen(_)), "{err}");
}

#[test]
fn a_saved_ca_issues_certificates_that_chain_to_the_same_certificate() {
    let ca = Ca::generate("test").unwrap();
    let loaded = Ca::from_pem(ca.cert_pem(), &ca.key_pem()).unwrap();
    let issued = loaded
        .issue(Role::Gateway, Validity::from_now(HOUR))
        .unwrap();
    assert!(signed_by(&issued.cert_pem, &ca));
}

#[test]
fn a_saved_ca_must_be_a_ca_and_match_its_key() {
    let ca = Ca::generate("test").unwrap();
    let other = Ca::generate("other").unwrap();
    let err = Ca::from_pem(ca.cert_pem(), &other.key_pem()).unwrap_err();
    assert!(matches!(err, PkiError::BadCa(_)), "{err}");

    let leaf = ca.issue(Role::Api, Validity::from_now(HOUR)).unwrap();
    let err = Ca::from_pem(&leaf.cert_pem, &leaf.key_pem).unwrap_err();
    assert!(err.to_string().contains("not a CA"), "{err}");
}

#[test]
fn a_certificate_without_an_einsora_role_has_no_identity() {
    let key = KeyPair::generate().unwrap();
    let plain = CertificateParams::new(vec!["api".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    assert_eq!(role_of(plain.der()), Err(IdentityError::NoRole));

    let mut two = CertificateParams::new(Vec::<String>::new()).unwrap();
    for role in ["api", "controller"] {
        let uri = format!("spiffe://einsora/{role}");
        two.subject_alt_names
            .push(SanType::URI(uri.try_into().unwrap()));
    }
    let two = two.self_signed(&key).unwrap();
    assert_eq!(role_of(two.der()), Err(IdentityError::Ambiguous));
    assert_eq!(role_of(b"not a certificate"), Err(IdentityError::Malformed));
}
