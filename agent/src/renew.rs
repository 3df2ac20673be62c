//! Keeping the machine certificate fresh: past half its lifetime the agent asks its controller
//! for a new one over Sync, with a CSR for a new key; the new certificate and key replace the
//! old ones on disk (each written whole, owner-only) and are used from the next connection on.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use einsora_proto::agent::v1 as pb;
use time::OffsetDateTime;

#[derive(Debug)]
pub struct Renewal {
    state_dir: PathBuf,
    /// When the current certificate is due for renewal (half its lifetime).
    due: OffsetDateTime,
    /// The new key of a renewal asked for and not answered yet.
    pending: Option<rcgen::KeyPair>,
}

impl Renewal {
    /// For the certificate kept in `state_dir`; one whose dates can't be read is due at once.
    pub fn new(state_dir: &Path, cert_pem: &str) -> Renewal {
        Renewal {
            state_dir: state_dir.to_owned(),
            due: due(cert_pem).unwrap_or(OffsetDateTime::UNIX_EPOCH),
            pending: None,
        }
    }

    /// The request to send, if the certificate is due and none is pending.
    pub fn request(&mut self) -> Option<pb::AgentReport> {
        if self.pending.is_some() || OffsetDateTime::now_utc() < self.due {
            return None;
        }
        let (csr_pem, key) = einsora_runtime::pki::csr().ok()?;
        self.pending = Some(key);
        Some(pb::AgentReport {
            report: Some(pb::agent_report::Report::RenewCertificate(
                pb::CertificateRenewal { csr_pem },
            )),
        })
    }

    /// Keeps a renewed certificate with the key it was asked for.
    pub fn renewed(&mut self, renewed: &pb::RenewedCertificate) {
        let Some(key) = self.pending.take() else {
            return;
        };
        let saved = write_private(&self.state_dir.join("agent.key"), &key.serialize_pem())
            .and_then(|()| {
                write_private(
                    &self.state_dir.join("agent.pem"),
                    &renewed.certificate_chain_pem,
                )
            });
        match saved {
            Ok(()) => {
                self.due = due(&renewed.certificate_chain_pem).unwrap_or(self.due);
                tracing::info!("machine certificate renewed");
            }
            Err(e) => tracing::warn!(error = %e, "couldn't keep the renewed certificate"),
        }
    }
}

/// Half way through the certificate's validity.
fn due(cert_pem: &str) -> Option<OffsetDateTime> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes()).ok()?;
    let cert = pem.parse_x509().ok()?;
    let validity = cert.validity();
    let (from, to) = (
        validity.not_before.to_datetime(),
        validity.not_after.to_datetime(),
    );
    Some(from + (to - from) / 2)
}

/// Written whole (a temporary file renamed over it), owner-only.
pub(crate) fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    file.write_all(contents.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)
}
