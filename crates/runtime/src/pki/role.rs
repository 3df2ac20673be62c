//! Roles: what a certificate may do, named in it as a URI SAN `spiffe://einsora/<role>`.

use std::fmt;

use uuid::Uuid;
use x509_parser::extensions::GeneralName;

const SPIFFE_PREFIX: &str = "spiffe://einsora/";

/// Who a certificate speaks for. Part of the identity: an agent is never a service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    Gateway,
    Api,
    Controller,
    Metering,
    Access,
    Agent { machine_id: Uuid },
}

/// A role without the machine, for what a server admits: any agent, or one service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RoleKind {
    Gateway,
    Api,
    Controller,
    Metering,
    Access,
    Agent,
}

impl RoleKind {
    pub fn name(self) -> &'static str {
        match self {
            Self::Gateway => "gateway",
            Self::Api => "api",
            Self::Controller => "controller",
            Self::Metering => "metering",
            Self::Access => "access",
            Self::Agent => "agent",
        }
    }
}

impl Role {
    pub fn kind(self) -> RoleKind {
        match self {
            Self::Gateway => RoleKind::Gateway,
            Self::Api => RoleKind::Api,
            Self::Controller => RoleKind::Controller,
            Self::Metering => RoleKind::Metering,
            Self::Access => RoleKind::Access,
            Self::Agent { .. } => RoleKind::Agent,
        }
    }

    /// The role's word, also the DNS name its certificate answers to.
    pub fn name(self) -> &'static str {
        self.kind().name()
    }

    pub fn spiffe_id(self) -> String {
        format!("{SPIFFE_PREFIX}{self}")
    }

    fn from_spiffe_path(path: &str) -> Option<Self> {
        Some(match path {
            "gateway" => Self::Gateway,
            "api" => Self::Api,
            "controller" => Self::Controller,
            "metering" => Self::Metering,
            "access" => Self::Access,
            _ => {
                let id = path.strip_prefix("agent/")?;
                let machine_id = Uuid::try_parse(id).ok()?;
                // Only the canonical spelling, so one machine has exactly one name.
                if machine_id.hyphenated().to_string() != id {
                    return None;
                }
                Self::Agent { machine_id }
            }
        })
    }
}

/// `api`, `controller`, …, `agent/<machine uuid>`.
impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Agent { machine_id } => write!(f, "agent/{}", machine_id.hyphenated()),
            other => f.write_str(other.name()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    #[error("the certificate cannot be parsed")]
    Malformed,
    #[error("the certificate names no Einsora role")]
    NoRole,
    #[error("the certificate names more than one Einsora role")]
    Ambiguous,
    #[error("the certificate names an unknown Einsora role {0:?}")]
    Unknown(String),
}

/// The role a DER certificate names. Says nothing about whether to trust it: only call this
/// on a certificate that has been verified against the installation CA.
pub fn role_of(cert_der: &[u8]) -> Result<Role, IdentityError> {
    let (_, cert) =
        x509_parser::parse_x509_certificate(cert_der).map_err(|_| IdentityError::Malformed)?;
    let san = cert
        .subject_alternative_name()
        .map_err(|_| IdentityError::Malformed)?
        .ok_or(IdentityError::NoRole)?;
    let mut roles = san
        .value
        .general_names
        .iter()
        .filter_map(|name| match name {
            GeneralName::URI(uri) => uri.strip_prefix(SPIFFE_PREFIX),
            _ => None,
        });
    let path = roles.next().ok_or(IdentityError::NoRole)?;
    if roles.next().is_some() {
        return Err(IdentityError::Ambiguous);
    }
    Role::from_spiffe_path(path).ok_or_else(|| IdentityError::Unknown(path.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spiffe_ids_round_trip() {
        let machine_id = Uuid::now_v7();
        let roles = [
            Role::Gateway,
            Role::Api,
            Role::Controller,
            Role::Metering,
            Role::Access,
            Role::Agent { machine_id },
        ];
        for role in roles {
            let id = role.spiffe_id();
            let path = id.strip_prefix(SPIFFE_PREFIX).unwrap();
            assert_eq!(Role::from_spiffe_path(path), Some(role), "{id}");
        }
        assert_eq!(
            Role::Agent { machine_id }.spiffe_id(),
            format!("spiffe://einsora/agent/{machine_id}")
        );
    }

    #[test]
    fn unknown_and_non_canonical_paths_are_not_roles() {
        let upper = Uuid::now_v7().hyphenated().to_string().to_uppercase();
        for path in [
            "",
            "root",
            "API",
            "agent",
            "agent/",
            "agent/x",
            &format!("agent/{upper}"),
        ] {
            assert_eq!(Role::from_spiffe_path(path), None, "{path}");
        }
    }
}
