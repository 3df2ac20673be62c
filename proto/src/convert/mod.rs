//! The one place raw proto types become validated domain types: `TryFrom` (or a `from_field`
//! reader that knows the field's name) on receive, `From` on send. Services never read a raw
//! proto field past their boundary.
//!
//! Errors name the field and the problem, and never echo the value: a value may be a secret
//! pasted in the wrong place.

mod catalog;
mod checks;
mod create_workload;
mod desired;
mod enums;
mod params_json;
mod report;
mod times;
mod workload;

pub use create_workload::{
    CreateWorkload, DEFAULT_SLOTS, MAX_DISK_GIB, MAX_FALLBACK, MAX_FALLBACK_AFTER_S,
    MAX_SERVED_NAME, MAX_SLOTS, MAX_SSH_KEYS, RawParams, WorkloadParams, default_served_name,
};
pub use desired::{DesiredWorkload, PlacedSpec, Resources};
pub use enums::{ProtoEnum, enum_list};
pub use report::{
    AccessTarget, InventoryReport, WorkloadStatus, WorkloadStatuses, bounds, gpu_usage, output,
};
pub use times::{optional_time, required_time, timestamp};

use std::str::FromStr;

use einsora_core::ids::InvalidId;
use einsora_core::kind::WorkloadKind;

/// A field of a received message that can't become a domain value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} {problem}")]
pub struct ConvertError {
    /// The field's path in the message, e.g. `kind`, `endpoint.model`, `fallback[1]`.
    pub field: String,
    pub problem: Problem,
}

impl ConvertError {
    pub fn new(field: impl Into<String>, problem: Problem) -> Self {
        ConvertError {
            field: field.into(),
            problem,
        }
    }

    /// A field whose value breaks a rule; `rule` says what a good value looks like.
    pub fn invalid(field: impl Into<String>, rule: impl Into<String>) -> Self {
        ConvertError::new(field, Problem::Invalid(rule.into()))
    }
}

/// What is wrong with a field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("is required")]
    Missing,
    /// An enum left at its zero `*_UNSPECIFIED` value.
    #[error("is required (it is unspecified)")]
    Unspecified,
    #[error("has an unknown value ({0})")]
    UnknownEnumValue(i32),
    #[error("is not a valid ID (a UUID)")]
    InvalidId,
    /// A member of a kind's parameters given for another kind.
    #[error("is not allowed for a {0}")]
    WrongKind(WorkloadKind),
    /// Breaks a rule; the text says what a good value looks like.
    #[error("is not valid: {0}")]
    Invalid(String),
}

/// Parses a required ID field; empty reads as missing.
pub fn parse_id<T>(field: &str, raw: &str) -> Result<T, ConvertError>
where
    T: FromStr<Err = InvalidId>,
{
    if raw.is_empty() {
        return Err(ConvertError::new(field, Problem::Missing));
    }
    raw.parse()
        .map_err(|_| ConvertError::new(field, Problem::InvalidId))
}

/// Parses an optional ID field; empty reads as none.
pub fn parse_optional_id<T>(field: &str, raw: &str) -> Result<Option<T>, ConvertError>
where
    T: FromStr<Err = InvalidId>,
{
    if raw.is_empty() {
        return Ok(None);
    }
    parse_id(field, raw).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use einsora_core::ids::{MachineId, WorkloadId};

    #[test]
    fn ids_parse_and_errors_name_the_field_without_the_value() {
        let id = WorkloadId::new();
        assert_eq!(parse_id::<WorkloadId>("id", &id.to_string()), Ok(id));

        let err = parse_id::<WorkloadId>("id", "tsk_secret").unwrap_err();
        assert_eq!(err, ConvertError::new("id", Problem::InvalidId));
        assert_eq!(err.to_string(), "id is not a valid ID (a UUID)");
        assert!(!err.to_string().contains("tsk_secret"));

        let err = parse_id::<MachineId>("machine_id", "").unwrap_err();
        assert_eq!(err.to_string(), "machine_id is required");
    }

    #[test]
    fn optional_ids_read_empty_as_none() {
        assert_eq!(parse_optional_id::<MachineId>("machine_id", ""), Ok(None));
        let id = MachineId::new();
        assert_eq!(
            parse_optional_id::<MachineId>("machine_id", &id.to_string()),
            Ok(Some(id))
        );
        assert_eq!(
            parse_optional_id::<MachineId>("machine_id", "x")
                .unwrap_err()
                .field,
            "machine_id"
        );
    }
}
