//! A Lab's proxy: HTTPS on its own port with the installation's issued certificate, notebooks
//! under the Lab's domain, and a browser elsewhere that installed the web CA's root. The ticket
//! becomes a `Secure` cookie; plain HTTP, Solo's `.localhost` hosts and names the certificate
//! doesn't hold get nothing.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use einsora_runtime::access_url::AccessUrl;
use einsora_runtime::tls::web::AccessTls;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::fakes::ALICE;
use crate::http::{self, Answer};
use crate::{Harness, cookie, open_path};

const DOMAIN: &str = "nb.lab.test";
const PORT: u16 = 8443;

async fn lab() -> (Harness, String) {
    let url = AccessUrl::parse_with_domain(&format!("https://lab.test:{PORT}"), DOMAIN).unwrap();
    let pki = std::sync::Mutex::new(None);
    let h = Harness::serving(
        url,
        |dir| {
            *pki.lock().unwrap() = Some(dir.to_path_buf());
            AccessTls::Issued {
                dir: dir.to_path_buf(),
            }
        },
        Duration::ZERO,
    )
    .await;
    let dir = pki.lock().unwrap().take().unwrap();
    let root = std::fs::read_to_string(dir.join("web-ca.pem")).unwrap();
    (h, root)
}

/// One request over TLS to `name` (its SNI, and its Host with the public port).
async fn over_tls(proxy: SocketAddr, root: &str, name: &str, head: &str) -> Result<Answer, String> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(root.as_bytes()).unwrap())
        .unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(proxy).await.unwrap();
    let server_name = ServerName::try_from(name.to_owned()).unwrap();
    let mut tls = connector
        .connect(server_name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    let text = format!("{head}\r\nHost: {name}:{PORT}\r\nConnection: close\r\n\r\n");
    tls.write_all(text.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    // A close without close_notify is the proxy's to answer for, not the test's.
    let _ = tls.read_to_end(&mut raw).await;
    einsora_testkit::http::parse(&raw).ok_or_else(|| format!("not an answer: {raw:?}"))
}

#[tokio::test]
async fn a_notebook_opens_over_https_under_the_labs_domain_with_a_secure_cookie() {
    let (h, root) = lab().await;
    let id = h.notebook(&ALICE);
    let name = format!("w-{id}.{DOMAIN}");
    let ticket = h.ticket(id, &ALICE);
    let opened = over_tls(
        h.proxy,
        &root,
        &name,
        &format!("GET {} HTTP/1.1", open_path(&ticket)),
    )
    .await
    .unwrap();
    assert_eq!(opened.status, 200, "{opened:?}");
    let set = opened.header("set-cookie").unwrap();
    assert!(
        set.contains("; Secure") && set.contains("HttpOnly"),
        "{set}"
    );
    let session = set.split(';').next().unwrap().split_once('=').unwrap().1;
    let lab = format!("GET /lab HTTP/1.1\r\nCookie: {}", cookie(session));
    let page = over_tls(h.proxy, &root, &name, &lab).await.unwrap();
    assert_eq!(page.status, 200, "{page:?}");
    assert_eq!(
        http::echoed(&page, "host"),
        ["localhost"],
        "the workload sees its own name"
    );

    // Endpoints are at the public host, with the same certificate.
    let endpoint = h.endpoint(&ALICE);
    let models = format!("GET /e/{endpoint}/v1/models HTTP/1.1");
    let unauthorised = over_tls(h.proxy, &root, "lab.test", &models).await.unwrap();
    assert_eq!(unauthorised.status, 401, "{unauthorised:?}");
}

#[tokio::test]
async fn plain_http_other_names_and_solos_hosts_get_nothing() {
    let (h, root) = lab().await;
    let id = h.notebook(&ALICE);
    let session = h.ticket(id, &ALICE);
    // Plain HTTP on the HTTPS port: no answer at all.
    let plain = format!(
        "GET {} HTTP/1.1\r\nHost: w-{id}.{DOMAIN}:{PORT}",
        open_path(&session)
    );
    let mut tcp = TcpStream::connect(h.proxy).await.unwrap();
    tcp.write_all(format!("{plain}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut raw = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(20), tcp.read_to_end(&mut raw)).await;
    assert!(read.is_ok(), "the connection is closed");
    assert!(einsora_testkit::http::parse(&raw).is_none(), "{raw:?}");
    // Names the certificate doesn't hold: the browser refuses before any request.
    for other in [format!("w-{id}.localhost"), "evil.example".to_owned()] {
        let refused = over_tls(h.proxy, &root, &other, "GET / HTTP/1.1").await;
        assert!(
            refused.unwrap_err().contains("not valid for name"),
            "{other}"
        );
    }
    // A name the certificate holds that is no notebook's host.
    let stray = over_tls(h.proxy, &root, &format!("x.{DOMAIN}"), "GET / HTTP/1.1")
        .await
        .unwrap();
    assert_eq!(stray.status, 404, "{stray:?}");
}
