//! A browser's TLS, blocking: one request to the access proxy over HTTPS, trusting only the
//! root it is given, with `name` as the server name it checks the certificate against.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use einsora_testkit::http::{Answer, parse};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

/// `request` (a whole HTTP/1.1 request) to `addr` over TLS; the error is the handshake's.
pub fn exchange(addr: &str, root_pem: &str, name: &str, request: &str) -> Result<Answer, String> {
    let mut roots = rustls::RootCertStore::empty();
    let root = CertificateDer::from_pem_slice(root_pem.as_bytes()).map_err(|e| e.to_string())?;
    roots.add(root).map_err(|e| e.to_string())?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let server = ServerName::try_from(name.to_owned()).map_err(|e| e.to_string())?;
    let connection =
        rustls::ClientConnection::new(Arc::new(config), server).map_err(|e| e.to_string())?;
    let tcp = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    tcp.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| e.to_string())?;
    let mut tls = rustls::StreamOwned::new(connection, tcp);
    tls.write_all(request.as_bytes())
        .map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    // A close without close_notify still ends the answer.
    let _ = tls.read_to_end(&mut raw);
    parse(&raw).ok_or_else(|| format!("not an HTTP answer: {}", String::from_utf8_lossy(&raw)))
}
