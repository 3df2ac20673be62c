//! HTTPS on the access proxy's port (`EINSORA_ACCESS_TLS`, ADR 0015): `off` (plain HTTP: Solo's
//! default, or behind a TLS terminator of the operator's), `files` (the operator's certificate
//! chain and key, `EINSORA_ACCESS_TLS_CERT` / `EINSORA_ACCESS_TLS_KEY`, e.g. a wildcard from
//! their ACME client), or `issued` (the installation's own, from its name-constrained web CA:
//! `pki::web`). The files are read again when they change, so a renewed certificate is served
//! without a restart, and a broken renewal keeps the one served so far.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
pub use tokio_rustls::TlsAcceptor;

use super::{TlsError, provider};
use crate::access_url::AccessUrl;
use crate::grpc::InternalTls;
use crate::pki::{Pki, PkiError, WebNames, access_web_paths};
use crate::settings::{ConfigError, Settings};

pub const MODE: &str = "EINSORA_ACCESS_TLS";
pub const CERT: &str = "EINSORA_ACCESS_TLS_CERT";
pub const KEY: &str = "EINSORA_ACCESS_TLS_KEY";
/// How often a handshake may look at the files' modification times.
const RECHECK: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessTls {
    Off,
    Files {
        cert: PathBuf,
        key: PathBuf,
    },
    /// Kept in the installation's PKI directory.
    Issued {
        dir: PathBuf,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Off,
    Files,
    Issued,
}

impl AccessTls {
    pub fn from_settings(settings: &Settings, url: &AccessUrl) -> Result<Self, ConfigError> {
        let modes = [
            ("off", Mode::Off),
            ("files", Mode::Files),
            ("issued", Mode::Issued),
        ];
        let mode = settings.choice(MODE, &modes, "off")?;
        let (cert, key) = (settings.optional_path(CERT)?, settings.optional_path(KEY)?);
        if mode != Mode::Files
            && let Some(set) = [(CERT, &cert), (KEY, &key)]
                .iter()
                .find(|(_, p)| p.is_some())
        {
            return Err(ConfigError::new(
                set.0,
                format!("is read only with {MODE}=files"),
            ));
        }
        if mode != Mode::Off && !url.is_https() {
            return Err(ConfigError::new(
                MODE,
                "serves HTTPS, so EINSORA_ACCESS_URL must be an https:// URL",
            ));
        }
        let needed = |name: &str, path: Option<PathBuf>| {
            path.ok_or_else(|| ConfigError::new(name, format!("is needed with {MODE}=files")))
        };
        Ok(match mode {
            Mode::Off => AccessTls::Off,
            Mode::Files => AccessTls::Files {
                cert: needed(CERT, cert)?,
                key: needed(KEY, key)?,
            },
            Mode::Issued => AccessTls::Issued {
                dir: InternalTls::from_settings(settings)?.dir().to_path_buf(),
            },
        })
    }

    /// The certificate chain and key files served; none when off.
    pub fn files(&self) -> Option<(PathBuf, PathBuf)> {
        match self {
            AccessTls::Off => None,
            AccessTls::Files { cert, key } => Some((cert.clone(), key.clone())),
            AccessTls::Issued { dir } => Some(access_web_paths(dir)),
        }
    }

    /// With `issued`, makes or renews the certificate for `url`'s names (`einsora pki init`,
    /// `einsora up`) and says where the root to install is.
    pub fn issue(&self, url: &AccessUrl) -> Result<Option<PathBuf>, PkiError> {
        let AccessTls::Issued { dir } = self else {
            return Ok(None);
        };
        let names = WebNames::new(url.host(), url.domain());
        Pki::load_or_create(dir)?.access_web_cert(&names)?;
        Ok(Some(dir.join("web-ca.pem")))
    }

    /// What the proxy's port accepts with: HTTP/1.1 only, as `http::serve` speaks; none when
    /// off. Fails now if the files can't be served.
    pub fn acceptor(&self) -> Result<Option<TlsAcceptor>, TlsError> {
        self.acceptor_rechecking(RECHECK)
    }

    fn acceptor_rechecking(&self, recheck: Duration) -> Result<Option<TlsAcceptor>, TlsError> {
        let Some((cert, key)) = self.files() else {
            return Ok(None);
        };
        let resolver = Reloading::load(cert, key, recheck)?;
        let mut config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(resolver));
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Some(TlsAcceptor::from(Arc::new(config))))
    }
}

/// The files' certificate, read again when their modification times change.
#[derive(Debug)]
struct Reloading {
    cert: PathBuf,
    key: PathBuf,
    recheck: Duration,
    served: Mutex<Served>,
}

#[derive(Debug)]
struct Served {
    checked: Instant,
    stamps: (SystemTime, SystemTime),
    key: Arc<CertifiedKey>,
}

impl Reloading {
    fn load(cert: PathBuf, key: PathBuf, recheck: Duration) -> Result<Reloading, TlsError> {
        let stamps = stamps(&cert, &key)?;
        let certified = certified_key(&cert, &key)?;
        Ok(Reloading {
            served: Mutex::new(Served {
                checked: Instant::now(),
                stamps,
                key: Arc::new(certified),
            }),
            cert,
            key,
            recheck,
        })
    }

    fn refresh(&self, served: &mut Served) {
        served.checked = Instant::now();
        let Ok(now) = stamps(&self.cert, &self.key) else {
            return;
        };
        if now == served.stamps {
            return;
        }
        match certified_key(&self.cert, &self.key) {
            Ok(certified) => {
                served.key = Arc::new(certified);
                served.stamps = now;
                tracing::info!(cert = %self.cert.display(), "serving the renewed certificate");
            }
            Err(e) => tracing::warn!(
                cert = %self.cert.display(),
                error = %e,
                "the certificate's files changed and can't be served; keeping the one served so far"
            ),
        }
    }
}

impl ResolvesServerCert for Reloading {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let mut served = self.served.lock().unwrap_or_else(PoisonError::into_inner);
        if served.checked.elapsed() >= self.recheck {
            self.refresh(&mut served);
        }
        Some(Arc::clone(&served.key))
    }
}

fn stamps(cert: &Path, key: &Path) -> Result<(SystemTime, SystemTime), TlsError> {
    let modified = |path: &Path| {
        std::fs::metadata(path)
            .and_then(|m| m.modified())
            .map_err(|source| PkiError::Io {
                path: path.to_path_buf(),
                source,
            })
    };
    Ok((modified(cert)?, modified(key)?))
}

/// The chain and key from PEM files, checked to belong together.
fn certified_key(cert: &Path, key: &Path) -> Result<CertifiedKey, TlsError> {
    let read = |path: &Path| {
        std::fs::read(path).map_err(|source| PkiError::Io {
            path: path.to_path_buf(),
            source,
        })
    };
    let chain = CertificateDer::pem_slice_iter(&read(cert)?)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| PkiError::NoCertificate)?;
    if chain.is_empty() {
        return Err(PkiError::NoCertificate.into());
    }
    let key = PrivateKeyDer::from_pem_slice(&read(key)?).map_err(|_| TlsError::NoKey)?;
    let signing = provider().key_provider.load_private_key(key)?;
    let certified = CertifiedKey::new(chain, signing);
    certified.keys_match()?;
    Ok(certified)
}

#[cfg(test)]
mod tests;
