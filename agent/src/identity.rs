//! What `einsora agent join` left in the state directory: who this machine is and how it
//! reaches its controller.

use std::path::{Path, PathBuf};

use einsora_runtime::pki::IssuedCert;

#[derive(Debug)]
pub struct Identity {
    pub machine_id: String,
    /// The machine certificate and its key. `Debug` leaves the key out.
    pub cert: IssuedCert,
    /// The installation CA, which the controller's certificate chains to.
    pub ca_pem: String,
    /// The agents' port it joined through.
    pub controller: String,
}

#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error(
        "this machine hasn't joined ({0} has no machine-id): run `einsora agent join --token … \
         --controller https://host:port` first"
    )]
    NotJoined(PathBuf),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl Identity {
    pub fn load(dir: &Path) -> Result<Identity, IdentityError> {
        if !dir.join("machine-id").exists() {
            return Err(IdentityError::NotJoined(dir.to_owned()));
        }
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read_to_string(&path)
                .map(|s| s.trim().to_owned())
                .map_err(|source| IdentityError::Io { path, source })
        };
        Ok(Identity {
            machine_id: read("machine-id")?,
            cert: IssuedCert {
                cert_pem: read("agent.pem")?,
                key_pem: read("agent.key")?,
            },
            ca_pem: read("ca.pem")?,
            controller: read("controller")?,
        })
    }
}
