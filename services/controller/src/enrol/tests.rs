use std::sync::Arc;

use einsora_core::ids::{EnrolmentTokenId, TenantId, UserId};
use einsora_core::region::Region;
use einsora_runtime::pki::{Ca, Role, role_of};
use einsora_store::{DatabaseUrl, NewEnrolmentToken, NewTenant, NewUser, Store, secret_hash};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use time::OffsetDateTime;

use super::*;

const HOUR: Duration = Duration::from_secs(3600);

async fn store_with_token(token: &str) -> (Arc<dyn Store>, TenantId, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let url = DatabaseUrl::parse(&format!("sqlite:{}/einsora.db", dir.path().display())).unwrap();
    let (store, _) = einsora_store::migrate(&url).await.unwrap();
    let tenant = TenantId::new();
    let new = NewTenant {
        id: tenant,
        slug: "acme".into(),
        name: "Acme".into(),
        trusted: false,
    };
    store.create_tenant(&new).await.unwrap();
    let user = UserId::new();
    let you = NewUser {
        id: user,
        tenant_id: tenant,
        email: "you@acme.test".into(),
        display_name: "You".into(),
        phc: "$argon2id$unused".into(),
    };
    store.create_user(&you).await.unwrap();
    let made = NewEnrolmentToken {
        id: EnrolmentTokenId::new(),
        tenant_id: tenant,
        name: "lab-box".into(),
        region: Region::new("local").unwrap(),
        prefix: "enr_Ab3x".into(),
        token_hash: secret_hash(token),
        created_by: user,
        expires_at: OffsetDateTime::now_utc() + time::Duration::hours(1),
    };
    store.create_enrolment_token(&made).await.unwrap();
    (store, tenant, dir)
}

fn csr() -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    rcgen::CertificateParams::default()
        .serialize_request(&key)
        .unwrap()
        .pem()
        .unwrap()
}

#[tokio::test]
async fn a_token_and_a_csr_make_a_machine_of_the_tokens_tenant_once() {
    let token = "enr_0123456789abcdefghijklmnopqrstuv";
    let (store, tenant, _dir) = store_with_token(token).await;
    let agents = Ca::generate("agents").unwrap();
    let enrolled = enrol(&*store, &agents, token, &csr(), "lab-box-3", HOUR)
        .await
        .unwrap();
    assert_eq!(
        (enrolled.owner, enrolled.region.as_str()),
        (tenant, "local")
    );
    let der = CertificateDer::from_pem_slice(enrolled.certificate.cert_pem.as_bytes()).unwrap();
    let machine_id = *enrolled.machine_id.as_uuid();
    assert_eq!(role_of(&der), Ok(Role::Agent { machine_id }));
    let machines = store.machines_of(tenant).await.unwrap();
    assert_eq!(machines.len(), 1);
    assert_eq!(
        machines[0].machine.name, "lab-box-3",
        "the host name is its label"
    );

    let again = enrol(&*store, &agents, token, &csr(), "another", HOUR)
        .await
        .unwrap_err();
    assert!(matches!(again, EnrolError::Token), "{again}");
    let unknown = enrol(&*store, &agents, "enr_nope", &csr(), "x", HOUR)
        .await
        .unwrap_err();
    assert_eq!(
        unknown.to_string(),
        again.to_string(),
        "no oracle: all bad tokens read alike"
    );
    assert!(
        !unknown.to_string().contains("enr_"),
        "the token never reaches an error"
    );
}

#[tokio::test]
async fn a_bad_csr_is_refused_without_using_the_token_up() {
    let token = "enr_0123456789abcdefghijklmnopqrstuv";
    let (store, tenant, _dir) = store_with_token(token).await;
    let agents = Ca::generate("agents").unwrap();
    let err = enrol(&*store, &agents, token, "garbage", "x", HOUR)
        .await
        .unwrap_err();
    assert!(matches!(err, EnrolError::Csr(_)), "{err}");
    assert!(store.machines_of(tenant).await.unwrap().is_empty());
    enrol(&*store, &agents, token, &csr(), "x", HOUR)
        .await
        .expect("the token is still good");
}
