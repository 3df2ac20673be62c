use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use rustls::pki_types::pem::PemObject;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

const ID: &str = "0190f5c4-7a4b-7c8d-9e0f-112233445566";

fn settings(vars: &[(&str, &str)]) -> Settings {
    Settings::from_map(vars.iter().copied())
}

fn lab() -> AccessUrl {
    AccessUrl::parse_with_domain("https://lab.test:8443", "lab.test").unwrap()
}

#[test]
fn off_by_default_and_every_misconfiguration_names_its_setting() {
    let plain = AccessUrl::default();
    assert_eq!(
        AccessTls::from_settings(&settings(&[]), &plain).unwrap(),
        AccessTls::Off
    );
    let files = settings(&[(MODE, "files"), (CERT, "/c.pem"), (KEY, "/k.pem")]);
    assert_eq!(
        AccessTls::from_settings(&files, &lab()).unwrap().files(),
        Some(("/c.pem".into(), "/k.pem".into()))
    );
    for (vars, url, named) in [
        (vec![(MODE, "files"), (CERT, "/c.pem")], lab(), KEY),
        (vec![(MODE, "files"), (KEY, "/k.pem")], lab(), CERT),
        (vec![(CERT, "/c.pem")], lab(), CERT),
        (vec![(MODE, "issued"), (KEY, "/k.pem")], lab(), KEY),
        (vec![(MODE, "issued")], plain.clone(), MODE),
        (
            vec![(MODE, "files"), (CERT, "/c"), (KEY, "/k")],
            plain.clone(),
            MODE,
        ),
        (vec![(MODE, "on")], lab(), MODE),
    ] {
        let err = AccessTls::from_settings(&settings(&vars), &url).unwrap_err();
        assert_eq!(err.setting(), named, "{vars:?}: {err}");
    }
}

/// A browser that installed the web CA reaches a notebook's host and the endpoints' host.
async fn handshake(acceptor: &TlsAcceptor, root: &str, name: &str) -> Result<Vec<u8>, String> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(root.as_bytes()).unwrap())
        .unwrap();
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let (client, server) = tokio::io::duplex(64 * 1024);
    let acceptor = acceptor.clone();
    let served = tokio::spawn(async move {
        let mut tls = acceptor.accept(server).await.map_err(|e| e.to_string())?;
        tls.write_all(b"hello").await.map_err(|e| e.to_string())?;
        tls.shutdown().await.map_err(|e| e.to_string())
    });
    let name = ServerName::try_from(name.to_owned()).unwrap();
    let mut tls = connector
        .connect(name, client)
        .await
        .map_err(|e| e.to_string())?;
    let mut got = Vec::new();
    tls.read_to_end(&mut got).await.map_err(|e| e.to_string())?;
    served.await.unwrap()?;
    let (_, session) = tls.get_ref();
    Ok(session.peer_certificates().unwrap()[0].to_vec())
}

#[tokio::test]
async fn the_issued_certificate_serves_the_labs_names_and_no_other() {
    let dir = tempfile::tempdir().unwrap();
    let tls = AccessTls::Issued {
        dir: dir.path().to_path_buf(),
    };
    let root_path = tls.issue(&lab()).unwrap().unwrap();
    let root = std::fs::read_to_string(root_path).unwrap();
    let acceptor = tls.acceptor().unwrap().unwrap();
    for name in [format!("w-{ID}.lab.test"), "lab.test".to_owned()] {
        handshake(&acceptor, &root, &name).await.unwrap();
    }
    for other in ["evil.example", "x.w-a.lab.test", "localhost"] {
        let refused = handshake(&acceptor, &root, other).await.unwrap_err();
        assert!(refused.contains("not valid for name"), "{other}: {refused}");
    }
}

#[tokio::test]
async fn renewed_files_are_served_without_a_restart_and_broken_ones_are_not() {
    let dir = tempfile::tempdir().unwrap();
    let issued = AccessTls::Issued {
        dir: dir.path().to_path_buf(),
    };
    let root = std::fs::read_to_string(issued.issue(&lab()).unwrap().unwrap()).unwrap();
    let (cert, key) = issued.files().unwrap();
    let files = AccessTls::Files {
        cert: cert.clone(),
        key: key.clone(),
    };
    let acceptor = files.acceptor_rechecking(Duration::ZERO).unwrap().unwrap();
    let name = format!("w-{ID}.lab.test");
    let first = handshake(&acceptor, &root, &name).await.unwrap();

    // A renewal: the same names from the same web CA, a new key (written after a tick, so the
    // modification time moves on every filesystem).
    std::thread::sleep(Duration::from_millis(20));
    std::fs::remove_file(&cert).unwrap();
    issued.issue(&lab()).unwrap();
    let renewed = handshake(&acceptor, &root, &name).await.unwrap();
    assert_ne!(renewed, first, "the renewed certificate is served");

    std::thread::sleep(Duration::from_millis(20));
    std::fs::write(&key, "half-written").unwrap();
    let kept = handshake(&acceptor, &root, &name).await.unwrap();
    assert_eq!(
        kept, renewed,
        "a broken key keeps the certificate served so far"
    );
}

#[test]
fn files_that_cant_be_served_are_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("c.pem"), dir.path().join("k.pem"));
    let files = AccessTls::Files {
        cert: cert.clone(),
        key: key.clone(),
    };
    assert!(files.acceptor().is_err(), "missing files");
    let issued = AccessTls::Issued {
        dir: dir.path().join("pki"),
    };
    issued.issue(&lab()).unwrap();
    let (good_cert, _) = issued.files().unwrap();
    std::fs::copy(&good_cert, &cert).unwrap();
    let other = rcgen::KeyPair::generate().unwrap();
    std::fs::write(&key, other.serialize_pem()).unwrap();
    assert!(
        files.acceptor().is_err(),
        "a key that isn't the certificate's"
    );
}
