//! Downloads from a small HTTP/1.1 server on loopback (written out by hand, so the tests can
//! also send what a good server wouldn't), and one over TLS.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;
use einsora_core::agent::StatusCode;

use crate::models::fetch::{prepare_with_tls, read_manifest};
use crate::models::{Limits, MODEL_FILE, ModelProblem, ModelSource, PreparedModel};

struct Server {
    addr: std::net::SocketAddr,
    hits: Arc<AtomicUsize>,
    /// Answers the client stopped reading before their end.
    cut_short: Arc<AtomicUsize>,
    _task: tokio::task::JoinHandle<()>,
}

impl Server {
    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    fn cut_short(&self) -> usize {
        self.cut_short.load(Ordering::SeqCst)
    }
}

/// The server's answer to a path, head and body.
fn answer(path: &str, model: &[u8]) -> Vec<u8> {
    let head = |status: &str, extra: &str| {
        format!("HTTP/1.1 {status}\r\n{extra}Connection: close\r\n\r\n")
    };
    let with_len = |body: &[u8]| {
        let mut out = head("200 OK", &format!("Content-Length: {}\r\n", body.len())).into_bytes();
        out.extend_from_slice(body);
        out
    };
    match path.split('?').next().unwrap_or("") {
        "/model.gguf" => with_len(model),
        "/no-length" => [head("200 OK", "").as_bytes(), model].concat(),
        "/short" => {
            let mut out = head(
                "200 OK",
                &format!("Content-Length: {}\r\n", model.len() + 10),
            )
            .into_bytes();
            out.extend_from_slice(model);
            out
        }
        "/redirect" => head("302 Found", "Location: /model.gguf\r\n").into_bytes(),
        "/loop" => head("302 Found", "Location: /loop\r\n").into_bytes(),
        "/not-gguf" => with_len(b"<html>this is not a model</html>"),
        _ => head("404 Not Found", "Content-Length: 0\r\n").into_bytes(),
    }
}

/// What `/endless` sends: far more than any socket buffer holds.
const ENDLESS: usize = 256 << 20;

async fn respond<S: AsyncRead + AsyncWrite + Unpin>(
    mut io: S,
    model: &[u8],
    hits: &AtomicUsize,
    cut_short: &AtomicUsize,
) {
    let mut request = Vec::new();
    let mut buf = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < 16 << 10 {
        match io.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => request.extend_from_slice(&buf[..n]),
        }
    }
    hits.fetch_add(1, Ordering::SeqCst);
    let text = String::from_utf8_lossy(&request);
    let path = text.split(' ').nth(1).unwrap_or("/");
    if let Some(len) = path.strip_prefix("/endless") {
        // A GGUF head, then zeros, with or without saying how many.
        let len = if len.is_empty() {
            String::new()
        } else {
            format!("Content-Length: {ENDLESS}\r\n")
        };
        let head = format!("HTTP/1.1 200 OK\r\n{len}Connection: close\r\n\r\n");
        let mut sent = io
            .write_all(head.as_bytes())
            .await
            .and(io.write_all(&model[..64]).await);
        let zeros = vec![0u8; 64 << 10];
        let mut left = ENDLESS - 64;
        while sent.is_ok() && left > 0 {
            let n = left.min(zeros.len());
            sent = io.write_all(&zeros[..n]).await;
            left -= n;
        }
        if sent.is_err() {
            cut_short.fetch_add(1, Ordering::SeqCst);
        }
        return;
    }
    let _ = io.write_all(&answer(path, model)).await;
    let _ = io.shutdown().await;
}

async fn serve(model: Vec<u8>, tls: Option<tokio_rustls::TlsAcceptor>) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let hits = Arc::new(AtomicUsize::new(0));
    let cut_short = Arc::new(AtomicUsize::new(0));
    let (h, c, model) = (hits.clone(), cut_short.clone(), Arc::new(model));
    let task = tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (h, c, model, tls) = (h.clone(), c.clone(), model.clone(), tls.clone());
            tokio::spawn(async move {
                match tls {
                    Some(tls) => {
                        if let Ok(io) = tls.accept(tcp).await {
                            respond(io, &model, &h, &c).await;
                        }
                    }
                    None => respond(tcp, &model, &h, &c).await,
                }
            });
        }
    });
    Server {
        addr,
        hits,
        cut_short,
        _task: task,
    }
}

fn loopback() -> Limits {
    Limits {
        allow_loopback_http: true,
        ..Limits::default()
    }
}

async fn fetch(
    url: &str,
    sha256: Option<&str>,
    private: &std::path::Path,
    limits: &Limits,
) -> Result<PreparedModel, ModelProblem> {
    let source = ModelSource::parse(url, sha256)?;
    let tls = crate::models::http::tls_config(crate::models::http::public_roots());
    prepare_with_tls(&source, None, private, limits, &tls).await
}

fn nothing_served(private: &std::path::Path) {
    let left: Vec<_> = std::fs::read_dir(private)
        .map(|d| d.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[tokio::test]
async fn a_download_is_checked_recorded_and_reused() {
    let model = Gguf::valid().bytes();
    let server = serve(model.clone(), None).await;
    let dir = tempfile::tempdir().unwrap();
    let private = dir.path().join("private");
    let url = server.url("/model.gguf?token=s3cr3t");
    let sha = sha256_hex(&model);

    let got = fetch(&url, Some(&sha), &private, &loopback())
        .await
        .unwrap();
    assert_eq!(got.sha256, sha);
    assert_eq!(got.size, model.len() as u64);
    assert!(!got.reused);
    assert_eq!(std::fs::read(private.join(MODEL_FILE)).unwrap(), model);
    let manifest = read_manifest(&private).unwrap();
    assert_eq!(
        manifest.source,
        format!("http://{}/model.gguf", server.addr)
    );
    assert_eq!(manifest.sha256, sha);
    assert_eq!(manifest.size, model.len() as u64);
    assert!(
        !std::fs::read_to_string(private.join("manifest.json"))
            .unwrap()
            .contains("s3cr3t")
    );
    assert_eq!(server.hits(), 1);

    let again = fetch(&url, Some(&sha), &private, &loopback())
        .await
        .unwrap();
    assert!(again.reused);
    assert_eq!(again.sha256, sha);
    assert_eq!(server.hits(), 1, "reused without a request");
    // Another URL (the query counts) is fetched again.
    let other = fetch(
        &server.url("/model.gguf?token=other"),
        None,
        &private,
        &loopback(),
    )
    .await;
    assert!(!other.unwrap().reused);
    assert_eq!(server.hits(), 2);
}

#[tokio::test]
async fn without_content_length_and_through_a_redirect() {
    let model = Gguf::valid().bytes();
    let server = serve(model.clone(), None).await;
    let dir = tempfile::tempdir().unwrap();
    for path in ["/no-length", "/redirect"] {
        let private = dir.path().join(&path[1..]);
        let got = fetch(&server.url(path), None, &private, &loopback())
            .await
            .unwrap();
        assert_eq!(got.sha256, sha256_hex(&model), "{path}");
    }
}

#[tokio::test]
async fn a_checksum_mismatch_is_refused() {
    let model = Gguf::valid().bytes();
    let server = serve(model.clone(), None).await;
    let dir = tempfile::tempdir().unwrap();
    let wrong = "0".repeat(64);
    let problem = fetch(
        &server.url("/model.gguf"),
        Some(&wrong),
        dir.path(),
        &loopback(),
    )
    .await
    .unwrap_err();
    assert_eq!(
        problem,
        ModelProblem::ChecksumMismatch {
            expected: wrong,
            actual: sha256_hex(&model)
        }
    );
    nothing_served(dir.path());
}

#[tokio::test]
async fn over_the_size_limit_is_refused_with_or_without_content_length() {
    let model = Gguf::valid().bytes();
    let server = serve(model.clone(), None).await;
    let dir = tempfile::tempdir().unwrap();
    let limits = Limits {
        max_file_size: model.len() as u64 - 1,
        ..loopback()
    };
    for path in ["/model.gguf", "/no-length"] {
        let problem = fetch(&server.url(path), None, dir.path(), &limits)
            .await
            .unwrap_err();
        assert_eq!(
            problem,
            ModelProblem::TooLarge {
                limit: model.len() as u64 - 1
            },
            "{path}"
        );
        assert_eq!(problem.status(), StatusCode::ModelRefused);
        nothing_served(dir.path());
    }
    // Refused as soon as it is known: the rest is never read.
    for path in ["/endless", "/endless-with-length"] {
        let problem = fetch(&server.url(path), None, dir.path(), &limits)
            .await
            .unwrap_err();
        assert!(matches!(problem, ModelProblem::TooLarge { .. }), "{path}");
        nothing_served(dir.path());
    }
    for _ in 0..100 {
        if server.cut_short() == 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(server.cut_short(), 2);
    // Exactly at the limit is fine.
    let limits = Limits {
        max_file_size: model.len() as u64,
        ..loopback()
    };
    fetch(&server.url("/no-length"), None, dir.path(), &limits)
        .await
        .unwrap();
}

#[tokio::test]
async fn server_failures_are_download_problems() {
    let model = Gguf::valid().bytes();
    let server = serve(model, None).await;
    let dir = tempfile::tempdir().unwrap();
    for (path, says) in [
        ("/missing?sig=s3cr3t", "answered HTTP 404"),
        ("/loop", "too many redirects"),
        ("/short", ""),
    ] {
        let problem = fetch(&server.url(path), None, dir.path(), &loopback())
            .await
            .unwrap_err();
        let ModelProblem::Download(what) = &problem else {
            panic!("{path}: {problem:?}");
        };
        assert!(what.contains(says), "{path}: {what}");
        assert!(what.starts_with(&server.addr.to_string()), "{what}");
        assert!(!problem.to_string().contains("s3cr3t"));
        assert_eq!(problem.status(), StatusCode::ModelUnavailable);
        nothing_served(dir.path());
    }
    let problem = fetch(&server.url("/not-gguf"), None, dir.path(), &loopback()).await;
    assert_eq!(
        problem.unwrap_err(),
        ModelProblem::Invalid(crate::models::GgufProblem::BadMagic)
    );
    nothing_served(dir.path());
    // Nobody listening.
    drop(server);
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/model.gguf", closed.local_addr().unwrap());
    drop(closed);
    let problem = fetch(&url, None, dir.path(), &loopback())
        .await
        .unwrap_err();
    assert!(matches!(problem, ModelProblem::Download(_)), "{problem:?}");
}

#[tokio::test]
async fn plain_http_only_to_loopback_and_only_when_allowed() {
    let server = serve(Gguf::valid().bytes(), None).await;
    let dir = tempfile::tempdir().unwrap();
    let refused = |p: &ModelProblem| matches!(p, ModelProblem::BadSource(_));
    let problem = fetch(
        &server.url("/model.gguf"),
        None,
        dir.path(),
        &Limits::default(),
    )
    .await;
    assert!(refused(&problem.unwrap_err()));
    assert_eq!(server.hits(), 0);
    nothing_served(dir.path());
    // Not loopback: refused before any connection is tried.
    let problem = fetch("http://192.0.2.1/model.gguf", None, dir.path(), &loopback()).await;
    assert!(refused(&problem.unwrap_err()));
    let problem = fetch(
        "http://example.com/model.gguf",
        None,
        dir.path(),
        &loopback(),
    )
    .await;
    assert!(refused(&problem.unwrap_err()));
}

#[tokio::test]
async fn https_with_a_trusted_server_and_not_with_an_unknown_one() {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&leaf_key, &issuer)
        .unwrap();
    let server_config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![leaf.der().clone()],
        rustls::pki_types::PrivateKeyDer::try_from(leaf_key.serialize_der()).unwrap(),
    )
    .unwrap();
    let model = Gguf::valid().bytes();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server_config));
    let server = serve(model.clone(), Some(acceptor)).await;
    let url = format!("https://localhost:{}/model.gguf", server.addr.port());
    let source = ModelSource::parse(&url, None).unwrap();
    let dir = tempfile::tempdir().unwrap();

    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.der().clone()).unwrap();
    let trusting = crate::models::http::tls_config(roots);
    // https needs no loopback exception.
    let limits = Limits::default();
    let got = prepare_with_tls(&source, None, dir.path(), &limits, &trusting).await;
    assert_eq!(got.unwrap().sha256, sha256_hex(&model));

    let other = dir.path().join("other");
    let public = crate::models::http::tls_config(crate::models::http::public_roots());
    let problem = prepare_with_tls(&source, None, &other, &limits, &public)
        .await
        .unwrap_err();
    assert!(matches!(problem, ModelProblem::Download(_)), "{problem:?}");
    nothing_served(&other);
}
