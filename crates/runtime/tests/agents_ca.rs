//! Machine certificates: signed by the agents CA for the machine the controller names, with the
//! CSR's names and CA requests refused, and kept apart from the installation CA.

// A test harness: a failed unwrap is a failed test, and it reads its own environment.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::time::Duration;

use einsora_runtime::pki::{Ca, Pki, PkiError, Role, Validity, role_of};
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair, SanType};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use sha2::{Digest, Sha256};
use uuid::Uuid;

const HOUR: Duration = Duration::from_secs(3600);

fn csr(params: CertificateParams) -> String {
    let key = KeyPair::generate().unwrap();
    params.serialize_request(&key).unwrap().pem().unwrap()
}

#[test]
fn a_machine_certificate_names_the_machine_the_controller_chose() {
    let agents = Ca::generate("agents").unwrap();
    let machine = Uuid::now_v7();
    let issued = agents
        .sign_agent_csr(
            &csr(CertificateParams::default()),
            machine,
            Validity::from_now(HOUR),
        )
        .unwrap();
    let der = CertificateDer::from_pem_slice(issued.cert_pem.as_bytes()).unwrap();
    assert_eq!(
        role_of(&der),
        Ok(Role::Agent {
            machine_id: machine
        })
    );
    assert_eq!(issued.fingerprint, <[u8; 32]>::from(Sha256::digest(&der)));
    let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
    assert_eq!(issued.serial, cert.raw_serial_as_string().replace(':', ""));
    assert!(!cert.is_ca());
}

#[test]
fn a_csr_asking_for_names_or_to_be_a_ca_is_refused() {
    let agents = Ca::generate("agents").unwrap();
    let mut names = CertificateParams::default();
    names.subject_alt_names = vec![SanType::DnsName("controller".try_into().unwrap())];
    let mut ca = CertificateParams::default();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    for (request, why) in [
        (csr(names), "asks for names"),
        (csr(ca), "certificate authority"),
    ] {
        let err = agents
            .sign_agent_csr(&request, Uuid::now_v7(), Validity::from_now(HOUR))
            .unwrap_err();
        assert!(matches!(err, PkiError::Csr(_)), "{err}");
        assert!(err.to_string().contains(why), "{err}");
    }
    let err = agents
        .sign_agent_csr("not a csr", Uuid::now_v7(), Validity::from_now(HOUR))
        .unwrap_err();
    assert!(matches!(err, PkiError::Csr(_)), "{err}");
}

#[test]
fn pki_init_keeps_an_agents_ca_apart_from_the_installation_ca() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::load_or_create(dir.path()).unwrap();
    let agents = pki.agents_ca().unwrap();
    assert_ne!(agents.cert_pem(), pki.ca().cert_pem());
    assert_eq!(
        pki.agents_ca().unwrap().cert_pem(),
        agents.cert_pem(),
        "kept, not replaced"
    );
    // The controller reads it without the installation CA's key.
    std::fs::remove_file(dir.path().join("ca.key")).unwrap();
    let loaded = Pki::load_agents_ca(dir.path()).unwrap();
    assert_eq!(loaded.cert_pem(), agents.cert_pem());
    let empty = tempfile::tempdir().unwrap();
    let err = Pki::load_agents_ca(empty.path()).unwrap_err();
    assert!(err.to_string().contains("einsora pki init"), "{err}");
}
