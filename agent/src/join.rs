//! `einsora agent join`: enrols this machine with a one-time token. The token ends with the
//! installation CA's SHA-256, so the agent pins the controller with nothing else; it sends a
//! CSR for a key that never leaves this machine, and keeps what it gets in its state directory
//! (owner-only): `machine-id`, `agent.pem` (its certificate), `agent.key`, `ca.pem`, `region`,
//! `controller` (the agents' port it joined through).

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use einsora_proto::agent::v1::EnrollRequest;
use einsora_proto::agent::v1::enrolment_service_client::EnrolmentServiceClient;
use einsora_runtime::pki::{Role, fingerprint};
use einsora_runtime::tls::ClientTls;

/// What joining needs. `Debug` leaves the token out.
#[derive(Clone)]
pub struct Join {
    /// SECRET: the enrolment token (`enr_…` then `.` and the CA's SHA-256 in hex).
    pub token: String,
    /// The controller's agents' port, `host:port` (an `https://` prefix is accepted).
    pub controller: String,
    pub state_dir: PathBuf,
}

impl std::fmt::Debug for Join {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Join")
            .field("controller", &self.controller)
            .field("state_dir", &self.state_dir)
            .finish_non_exhaustive()
    }
}

/// The machine this agent now is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joined {
    pub machine_id: String,
    pub region: String,
}

#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    #[error(
        "the enrolment token is malformed: it is `enr_…` followed by `.` and the controller's \
         CA fingerprint (64 hex digits), as `einsora` printed it"
    )]
    MalformedToken,
    #[error(
        "this machine already joined as {machine_id} ({path}); remove that directory to join again"
    )]
    AlreadyJoined { machine_id: String, path: PathBuf },
    #[error("can't reach the controller at {addr}: {why}")]
    Unreachable { addr: String, why: String },
    #[error("the controller refused: {0}")]
    Refused(String),
    #[error("the controller answered with a CA other than the one the token names")]
    WrongCa,
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("couldn't make this machine's key: {0}")]
    Key(#[from] einsora_runtime::pki::PkiError),
}

pub async fn join(request: &Join) -> Result<Joined, JoinError> {
    let pin = pin_of(&request.token)?;
    let id_path = request.state_dir.join("machine-id");
    if let Ok(machine_id) = std::fs::read_to_string(&id_path) {
        return Err(JoinError::AlreadyJoined {
            machine_id: machine_id.trim().to_owned(),
            path: request.state_dir.clone(),
        });
    }
    let addr = request
        .controller
        .strip_prefix("https://")
        .unwrap_or(&request.controller)
        .trim_end_matches('/');
    let unreachable = |why: String| JoinError::Unreachable {
        addr: addr.to_owned(),
        why,
    };
    let (csr_pem, key) = einsora_runtime::pki::csr()?;
    let hostname = crate::inventory::collect(&crate::inventory::Probe::default())
        .await
        .map(|i| i.hostname)
        .unwrap_or_else(|_| "machine".to_owned());
    let tls = ClientTls::pinned(pin, Role::Controller).map_err(|e| unreachable(e.to_string()))?;
    let channel = tls
        .connect(addr)
        .await
        .map_err(|e| unreachable(e.to_string()))?;
    let answer = EnrolmentServiceClient::new(channel)
        .enroll(EnrollRequest {
            enrolment_token: request.token.clone(),
            csr_pem,
            hostname,
        })
        .await
        .map_err(|status| JoinError::Refused(status.message().to_owned()))?
        .into_inner();
    if fingerprint(&answer.ca_certificate_pem).ok() != Some(pin) {
        return Err(JoinError::WrongCa);
    }
    save(&request.state_dir, &answer, &key.serialize_pem(), addr)?;
    Ok(Joined {
        machine_id: answer.machine_id,
        region: answer.region,
    })
}

/// The CA fingerprint at the end of a token.
fn pin_of(token: &str) -> Result<[u8; 32], JoinError> {
    let (_, hex) = token.rsplit_once('.').ok_or(JoinError::MalformedToken)?;
    if hex.len() != 64 {
        return Err(JoinError::MalformedToken);
    }
    let mut pin = [0u8; 32];
    for (i, byte) in pin.iter_mut().enumerate() {
        *byte = u8::from_str_radix(
            hex.get(2 * i..2 * i + 2).ok_or(JoinError::MalformedToken)?,
            16,
        )
        .map_err(|_| JoinError::MalformedToken)?;
    }
    Ok(pin)
}

/// Everything owner-only; the machine ID last, so a half-written state never counts as joined.
fn save(
    dir: &Path,
    answer: &einsora_proto::agent::v1::EnrollResponse,
    key_pem: &str,
    controller: &str,
) -> Result<(), JoinError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| JoinError::Io { path, source }
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io(dir))?;
    for (name, contents) in [
        ("agent.key", key_pem),
        ("agent.pem", answer.certificate_chain_pem.as_str()),
        ("ca.pem", answer.ca_certificate_pem.as_str()),
        ("region", answer.region.as_str()),
        ("controller", controller),
        ("machine-id", answer.machine_id.as_str()),
    ] {
        let path = dir.join(name);
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .mode(0o600)
            .open(&path)
            .map_err(io(&path))?;
        file.write_all(contents.as_bytes()).map_err(io(&path))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pin_is_the_tokens_last_64_hex_digits() {
        let token = format!("enr_abc.{}", "0a".repeat(32));
        assert_eq!(pin_of(&token).unwrap(), [0x0a; 32]);
        for bad in [
            "enr_abc",
            "enr_abc.1234",
            &format!("enr_abc.{}", "zz".repeat(32)),
        ] {
            assert!(
                matches!(pin_of(bad), Err(JoinError::MalformedToken)),
                "{bad}"
            );
        }
        let message = JoinError::MalformedToken.to_string();
        assert!(
            !message.contains("enr_abc"),
            "the token never reaches an error"
        );
    }
}
