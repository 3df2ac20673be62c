//! The model download: one GET per hop over HTTP/1.1 (hyper's connection API over TCP, and
//! tokio-rustls with ring for https, the stack the rest of Einsora already builds on), a few
//! redirects followed (model hubs answer from a CDN), the body streamed into the file while
//! its SHA-256 is computed, refused as soon as its declared or received size passes the limit.
//!
//! Servers are trusted through Mozilla's roots compiled in (webpki-roots), so every machine
//! trusts the same CAs whatever its OS store holds.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::header::{ACCEPT_ENCODING, CONTENT_LENGTH, HOST, LOCATION, USER_AGENT};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, RootCertStore};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

use super::ModelProblem;
use super::source::Url;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest a server may stay silent: for the response's head, or between body chunks.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
const MAX_REDIRECTS: usize = 5;

#[derive(Debug)]
pub(super) struct Downloaded {
    pub size: u64,
    pub sha256: [u8; 32],
}

/// The client TLS config for model servers: `roots` trusted, TLS 1.2 and 1.3, HTTP/1.1.
pub(super) fn tls_config(roots: RootCertStore) -> Arc<ClientConfig> {
    let mut config =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("ring supports rustls's default protocol versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(config)
}

/// Mozilla's CA roots.
pub(super) fn public_roots() -> RootCertStore {
    RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    }
}

/// Downloads `url` into `out`, following redirects, at most `max` bytes.
pub(super) async fn download(
    url: &Url,
    out: &mut tokio::fs::File,
    max: u64,
    tls: &Arc<ClientConfig>,
    allow_loopback_http: bool,
) -> Result<Downloaded, ModelProblem> {
    let mut url = url.clone();
    for _ in 0..=MAX_REDIRECTS {
        check_scheme(&url, allow_loopback_http)?;
        let tcp = timeout(
            CONNECT_TIMEOUT,
            TcpStream::connect((url.host.as_str(), url.port)),
        )
        .await
        .map_err(|_| failed(&url, "connecting timed out"))?
        .map_err(|e| failed(&url, e))?;
        let hop = if url.https {
            let name = ServerName::try_from(url.host.clone())
                .map_err(|_| failed(&url, "not a name TLS can check"))?;
            let tls = timeout(
                CONNECT_TIMEOUT,
                tokio_rustls::TlsConnector::from(tls.clone()).connect(name, tcp),
            )
            .await
            .map_err(|_| failed(&url, "the TLS handshake timed out"))?
            .map_err(|e| failed(&url, e))?;
            get(tls, &url, out, max).await?
        } else {
            get(tcp, &url, out, max).await?
        };
        match hop {
            Hop::Done(done) => return Ok(done),
            Hop::Redirect(location) => url = url.follow(&location)?,
        }
    }
    Err(failed(&url, "too many redirects"))
}

/// https, or plain http to a loopback host when that's allowed (tests, development).
pub(super) fn check_scheme(url: &Url, allow_loopback_http: bool) -> Result<(), ModelProblem> {
    if url.https || (allow_loopback_http && url.is_loopback()) {
        Ok(())
    } else {
        Err(ModelProblem::BadSource(
            "plain http:// isn't accepted; use https://",
        ))
    }
}

enum Hop {
    Done(Downloaded),
    Redirect(String),
}

async fn get<S>(io: S, url: &Url, out: &mut tokio::fs::File, max: u64) -> Result<Hop, ModelProblem>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| failed(url, e))?;
    // The connection's task ends when the exchange is over, however it ends.
    let _conn = crate::abort_on_drop::AbortOnDrop(tokio::spawn(async move {
        let _ = conn.await;
    }));
    let request = Request::get(url.path_and_query.as_str())
        .header(HOST, host_header(url))
        .header(USER_AGENT, "einsora-agent")
        .header(ACCEPT_ENCODING, "identity")
        .body(Empty::<Bytes>::new())
        .map_err(|_| failed(url, "the URL's path can't be sent"))?;
    let response = timeout(IDLE_TIMEOUT, sender.send_request(request))
        .await
        .map_err(|_| failed(url, "no answer in time"))?
        .map_err(|e| failed(url, e))?;

    let status = response.status();
    if matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308) {
        let location = response
            .headers()
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| failed(url, "a redirect without a usable Location"))?;
        return Ok(Hop::Redirect(location.to_owned()));
    }
    if status != StatusCode::OK {
        return Err(failed(url, format!("answered HTTP {}", status.as_u16())));
    }
    let declared = match response.headers().get(CONTENT_LENGTH) {
        Some(v) => Some(
            v.to_str()
                .ok()
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(|| failed(url, "a bad Content-Length"))?,
        ),
        None => None,
    };
    if declared.is_some_and(|len| len > max) {
        return Err(ModelProblem::TooLarge { limit: max });
    }

    let mut body = response.into_body();
    let mut hasher = Sha256::new();
    let mut size = 0u64;
    loop {
        let frame = match timeout(IDLE_TIMEOUT, body.frame()).await {
            Err(_) => return Err(failed(url, "the download stalled")),
            Ok(None) => break,
            Ok(Some(frame)) => frame.map_err(|e| failed(url, e))?,
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        size += data.len() as u64;
        if size > max {
            return Err(ModelProblem::TooLarge { limit: max });
        }
        hasher.update(&data);
        out.write_all(&data)
            .await
            .map_err(|e| ModelProblem::Storage(format!("writing the model: {e}")))?;
    }
    if declared.is_some_and(|len| len != size) {
        return Err(failed(url, "the download ended early"));
    }
    Ok(Hop::Done(Downloaded {
        size,
        sha256: hasher.finalize().into(),
    }))
}

/// The Host header: the port only when it isn't the scheme's (signed URLs may sign the host).
fn host_header(url: &Url) -> String {
    let default = if url.https { 443 } else { 80 };
    match (url.port == default, url.host.contains(':')) {
        (true, true) => format!("[{}]", url.host),
        (true, false) => url.host.clone(),
        (false, _) => url.authority(),
    }
}

/// A download problem, naming the server but never the path or query.
fn failed(url: &Url, what: impl std::fmt::Display) -> ModelProblem {
    ModelProblem::Download(format!("{}: {what}", url.authority()))
}
