//! Postgres over TLS: a Lab's database is across the network, so its connection is encrypted and
//! the server verified (`sslmode=verify-full&sslrootcert=…`), against a real server with TLS on.

// A test harness: a failed unwrap is a failed test, and it reads its own environment.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::time::Duration;

use einsora_runtime::pki::{Ca, Role, Validity};
use einsora_store::{DatabaseUrl, StoreError};
use einsora_testkit::TempPostgres;

#[tokio::test]
async fn postgres_over_tls_verifies_the_server() {
    let ca = Ca::generate("test CA").unwrap();
    // A service certificate names `localhost`, which is what the client verifies here.
    let server = ca
        .issue(Role::Api, Validity::from_now(Duration::from_secs(3600)))
        .unwrap();
    let pg = TempPostgres::with_tls(&server.cert_pem, &server.key_pem).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ours = dir.path().join("ca.pem");
    std::fs::write(&ours, ca.cert_pem()).unwrap();
    let foreign = dir.path().join("foreign.pem");
    std::fs::write(&foreign, Ca::generate("another CA").unwrap().cert_pem()).unwrap();

    let plain = pg
        .fresh_database()
        .unwrap()
        .replace("127.0.0.1", "localhost");
    let url = |root: &std::path::Path| {
        let raw = format!("{plain}?sslmode=verify-full&sslrootcert={}", root.display());
        DatabaseUrl::parse(&raw).unwrap()
    };
    let (store, report) = einsora_store::migrate(&url(&ours)).await.unwrap();
    assert!(report.version >= 1);
    store.ping().await.unwrap();

    let err = einsora_store::open(&url(&foreign)).await.unwrap_err();
    assert!(
        matches!(
            &err,
            StoreError::Config {
                setting: "EINSORA_DATABASE_URL",
                ..
            }
        ),
        "a server our CA didn't sign was accepted: {err}"
    );

    let shared = TempPostgres::shared().fresh_database().unwrap();
    let required = DatabaseUrl::parse(&format!("{shared}?sslmode=require")).unwrap();
    let err = einsora_store::open(&required).await.unwrap_err();
    assert!(err.to_string().contains("EINSORA_DATABASE_URL"), "{err}");
}
