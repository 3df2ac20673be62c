//! A directory that keeps the CA (`ca.pem`, `ca.key`) and the role certificates issued from it
//! (`<role>.pem`, `<role>.key`; an agent's are `agent-<machine id>.*`), every file 0600.

use std::ffi::OsString;
use std::fs::{DirBuilder, File, OpenOptions, Permissions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rcgen::KeyPair;
use time::OffsetDateTime;

use super::{Ca, IssuedCert, PkiError, Role, Validity, cert_der_from_pem, role_of};

const CA_NAME: &str = "Einsora installation CA";
const ROLE_CERT_LIFETIME: Duration = Duration::from_secs(365 * 24 * 3600);
const RENEW_BEFORE: time::Duration = time::Duration::days(30);

#[derive(Debug)]
pub struct Pki {
    dir: PathBuf,
    ca: Ca,
}

impl Pki {
    /// Loads the CA kept in `dir`, creating the directory (0700) and a new CA if there is
    /// none. Refuses to replace half a CA.
    pub fn load_or_create(dir: &Path) -> Result<Self, PkiError> {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io_error(dir))?;
        let _lock = lock(dir)?;
        let (cert_path, key_path) = (dir.join("ca.pem"), dir.join("ca.key"));
        let ca = match (read_optional(&cert_path)?, read_optional(&key_path)?) {
            (Some(cert_pem), Some(key_pem)) => Ca::from_pem(&cert_pem, &key_pem)?,
            (None, None) => {
                let ca = Ca::generate(CA_NAME)?;
                write_private(&key_path, &ca.key_pem())?;
                write_private(&cert_path, ca.cert_pem())?;
                ca
            }
            (Some(_), None) => return Err(half_a_ca(key_path)),
            (None, Some(_)) => return Err(half_a_ca(cert_path)),
        };
        Ok(Self {
            dir: dir.to_path_buf(),
            ca,
        })
    }

    pub(super) fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn ca(&self) -> &Ca {
        &self.ca
    }

    /// The agents CA kept in the directory (`agents-ca.pem`, `agents-ca.key`), created if there
    /// is none: machine certificates come from it, never from the installation CA.
    pub fn agents_ca(&self) -> Result<Ca, PkiError> {
        let _lock = lock(&self.dir)?;
        let (cert_path, key_path) = agents_ca_paths(&self.dir);
        match (read_optional(&cert_path)?, read_optional(&key_path)?) {
            (Some(cert_pem), Some(key_pem)) => Ca::from_pem(&cert_pem, &key_pem),
            (None, None) => {
                let ca = Ca::generate(super::AGENTS_CA_NAME)?;
                write_private(&key_path, &ca.key_pem())?;
                write_private(&cert_path, ca.cert_pem())?;
                Ok(ca)
            }
            (Some(_), None) => Err(half_a_ca(key_path)),
            (None, Some(_)) => Err(half_a_ca(cert_path)),
        }
    }

    /// The agents CA, for the controller: read only, never created (`einsora pki init` makes
    /// it), and without the installation CA's key.
    pub fn load_agents_ca(dir: &Path) -> Result<Ca, PkiError> {
        let (cert_path, key_path) = agents_ca_paths(dir);
        let read = |path: PathBuf| {
            read_optional(&path)?.ok_or(PkiError::Files {
                path,
                problem: "is missing: run `einsora pki init`",
            })
        };
        Ca::from_pem(&read(cert_path)?, &read(key_path)?)
    }

    /// The certificate kept for `role`, issuing (and keeping) a new one when there is none, or
    /// when the kept one is near expiry, from another CA, or does not match its key.
    pub fn role_cert(&self, role: Role) -> Result<IssuedCert, PkiError> {
        let _lock = lock(&self.dir)?;
        let (cert_path, key_path) = role_paths(&self.dir, role);
        if let (Some(cert_pem), Some(key_pem)) =
            (read_optional(&cert_path)?, read_optional(&key_path)?)
        {
            let kept = IssuedCert { cert_pem, key_pem };
            if self.still_good(&kept, role) {
                return Ok(kept);
            }
        }
        let issued = self
            .ca
            .issue(role, Validity::from_now(ROLE_CERT_LIFETIME))?;
        write_private(&key_path, &issued.key_pem)?;
        write_private(&cert_path, &issued.cert_pem)?;
        Ok(issued)
    }

    fn still_good(&self, kept: &IssuedCert, role: Role) -> bool {
        still_good(kept, &self.ca, |der, _| role_of(der) == Ok(role))
    }
}

/// Whether a kept certificate can go on being used: `ca` signed it, it is its key's, it is
/// far from expiring, and `also` holds for it (its DER and parsed form).
pub(super) fn still_good(
    kept: &IssuedCert,
    ca: &Ca,
    also: impl FnOnce(&[u8], &x509_parser::certificate::X509Certificate<'_>) -> bool,
) -> bool {
    let (Ok(der), Ok(ca_der), Ok(key)) = (
        cert_der_from_pem(&kept.cert_pem),
        cert_der_from_pem(ca.cert_pem()),
        KeyPair::from_pem(&kept.key_pem),
    ) else {
        return false;
    };
    let (Ok((_, cert)), Ok((_, ca))) = (
        x509_parser::parse_x509_certificate(&der),
        x509_parser::parse_x509_certificate(&ca_der),
    ) else {
        return false;
    };
    cert.verify_signature(Some(ca.public_key())).is_ok()
        && cert.public_key().subject_public_key.data.as_ref() == key.public_key_raw()
        && cert.validity().not_after.to_datetime() > OffsetDateTime::now_utc() + RENEW_BEFORE
        && also(&der, &cert)
}

/// What a role's process holds: the CA's certificate (never its key) and its own certificate.
#[derive(Debug)]
pub struct RoleIdentity {
    pub ca_pem: String,
    pub cert: IssuedCert,
}

impl RoleIdentity {
    /// Reads what `Pki::role_cert` kept for `role`. Creates and issues nothing, so a role runs
    /// without the CA's key and can't mint another role's certificate.
    pub fn load(dir: &Path, role: Role) -> Result<Self, PkiError> {
        let (cert_path, key_path) = role_paths(dir, role);
        let read = |path: PathBuf| {
            read_optional(&path)?.ok_or(PkiError::Files {
                path,
                problem: "is missing: run `einsora pki init`",
            })
        };
        Ok(RoleIdentity {
            ca_pem: read(dir.join("ca.pem"))?,
            cert: IssuedCert {
                cert_pem: read(cert_path)?,
                key_pem: read(key_path)?,
            },
        })
    }
}

fn agents_ca_paths(dir: &Path) -> (PathBuf, PathBuf) {
    (dir.join("agents-ca.pem"), dir.join("agents-ca.key"))
}

fn role_paths(dir: &Path, role: Role) -> (PathBuf, PathBuf) {
    let stem = role.to_string().replace('/', "-");
    (
        dir.join(format!("{stem}.pem")),
        dir.join(format!("{stem}.key")),
    )
}

fn half_a_ca(missing: PathBuf) -> PkiError {
    PkiError::Files {
        path: missing,
        problem: "is missing while the other half of the CA exists; refusing to replace the CA",
    }
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> PkiError + '_ {
    move |source| PkiError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Serialises processes that share the directory (roles started side by side).
pub(super) fn lock(dir: &Path) -> Result<File, PkiError> {
    let path = dir.join(".lock");
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io_error(&path))?;
    file.lock().map_err(io_error(&path))?;
    Ok(file)
}

pub(super) fn read_optional(path: &Path) -> Result<Option<String>, PkiError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(err) if err.kind() == ErrorKind::NotFound => Ok(None),
        Err(err) => Err(io_error(path)(err)),
    }
}

/// Writes through a temporary file, so a reader sees the old file or the whole new one.
pub(super) fn write_private(path: &Path, contents: &str) -> Result<(), PkiError> {
    let mut tmp = OsString::from(path.as_os_str());
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io_error(&tmp))?;
    // The mode above applies only to a new file; a stale temporary keeps its own.
    file.set_permissions(Permissions::from_mode(0o600))
        .map_err(io_error(&tmp))?;
    file.write_all(contents.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(io_error(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io_error(path))
}

#[cfg(test)]
mod tests;
