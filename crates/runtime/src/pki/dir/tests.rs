use std::os::unix::fs::PermissionsExt;

use uuid::Uuid;

use super::*;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn the_ca_is_created_once_and_kept_private() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pki");
    let first = Pki::load_or_create(&dir).unwrap();
    let again = Pki::load_or_create(&dir).unwrap();
    assert_eq!(first.ca().cert_pem(), again.ca().cert_pem());
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join("ca.pem")), 0o600);
    assert_eq!(mode(&dir.join("ca.key")), 0o600);
}

#[test]
fn half_a_ca_is_refused_not_replaced() {
    let tmp = tempfile::tempdir().unwrap();
    let pki = Pki::load_or_create(tmp.path()).unwrap();
    std::fs::remove_file(tmp.path().join("ca.key")).unwrap();
    let err = Pki::load_or_create(tmp.path()).unwrap_err();
    assert!(err.to_string().contains("ca.key"), "{err}");
    let kept = std::fs::read_to_string(tmp.path().join("ca.pem")).unwrap();
    assert_eq!(kept, pki.ca().cert_pem());
}

#[test]
fn role_certificates_are_issued_once_and_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let pki = Pki::load_or_create(tmp.path()).unwrap();
    let api = pki.role_cert(Role::Api).unwrap();
    assert_eq!(pki.role_cert(Role::Api).unwrap(), api);
    assert_eq!(mode(&tmp.path().join("api.pem")), 0o600);
    assert_eq!(mode(&tmp.path().join("api.key")), 0o600);

    let machine_id = Uuid::now_v7();
    let agent = pki.role_cert(Role::Agent { machine_id }).unwrap();
    assert!(tmp.path().join(format!("agent-{machine_id}.pem")).exists());
    let der = cert_der_from_pem(&agent.cert_pem).unwrap();
    assert_eq!(role_of(&der), Ok(Role::Agent { machine_id }));
}

#[test]
fn a_kept_certificate_is_replaced_when_near_expiry_or_from_another_ca() {
    let tmp = tempfile::tempdir().unwrap();
    let pki = Pki::load_or_create(tmp.path()).unwrap();

    let short = pki
        .ca()
        .issue(Role::Api, Validity::from_now(Duration::from_secs(3600)))
        .unwrap();
    write_private(&tmp.path().join("api.pem"), &short.cert_pem).unwrap();
    write_private(&tmp.path().join("api.key"), &short.key_pem).unwrap();
    let renewed = pki.role_cert(Role::Api).unwrap();
    assert_ne!(renewed, short);
    assert_eq!(pki.role_cert(Role::Api).unwrap(), renewed);

    let foreign = Ca::generate("foreign").unwrap();
    let other = foreign
        .issue(Role::Api, Validity::from_now(ROLE_CERT_LIFETIME))
        .unwrap();
    write_private(&tmp.path().join("api.pem"), &other.cert_pem).unwrap();
    write_private(&tmp.path().join("api.key"), &other.key_pem).unwrap();
    let reissued = pki.role_cert(Role::Api).unwrap();
    assert_ne!(reissued, other);
    assert!(pki.still_good(&reissued, Role::Api));
    assert!(!pki.still_good(&reissued, Role::Controller));
}
