//! The one mapping from the api's errors to `tonic::Status` (docs/api.md, "Errors"). The
//! gateway turns statuses into the JSON envelope; the 409 codes travel as `x-einsora-error`
//! metadata on FAILED_PRECONDITION, since gRPC has one code for all three.

use std::fmt::Display;

use einsora_proto::convert::ConvertError;
use einsora_store::{StoreError, UserRefusal};
use tonic::metadata::MetadataValue;
use tonic::{Code, Status};

/// The metadata key that names a 409 code.
pub use einsora_proto::metadata::ERROR as ERROR_KEY;

/// Another tenant's object gets exactly this answer too, so it can't be told from an unknown ID.
const NOT_FOUND: &str = "not found";
const INTERNAL: &str = "internal error: the operator's log has the details";
const UNAVAILABLE: &str = "the database is unavailable; try again shortly";

/// The api's 409 codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precondition {
    Conflict,
    QuotaExceeded,
    InvalidTransition,
    /// A change to a user that would leave the tenant without an owner.
    LastOwner,
    /// Removing a user who still owns workloads or machines.
    StillOwns,
}

impl Precondition {
    pub fn as_str(self) -> &'static str {
        match self {
            Precondition::Conflict => "conflict",
            Precondition::QuotaExceeded => "quota_exceeded",
            Precondition::InvalidTransition => "invalid_transition",
            Precondition::LastOwner => "last_owner",
            Precondition::StillOwns => "still_owns",
        }
    }
}

/// A store error as the caller sees it.
pub fn store(err: StoreError) -> Status {
    match err {
        StoreError::NotFound => not_found(),
        StoreError::Conflict { .. } => failed(Precondition::Conflict, err),
        StoreError::QuotaExceeded { .. } => failed(Precondition::QuotaExceeded, err),
        StoreError::InvalidTransition(_) => failed(Precondition::InvalidTransition, err),
        StoreError::Refused(UserRefusal::LastOwner) => failed(Precondition::LastOwner, err),
        StoreError::Refused(UserRefusal::StillOwns { .. }) => failed(Precondition::StillOwns, err),
        StoreError::Taken(_) => Status::already_exists(err.to_string()),
        StoreError::InvalidInput(_) => Status::invalid_argument(err.to_string()),
        StoreError::Unavailable(_) => {
            tracing::warn!(error = %err, "the store is unavailable");
            Status::unavailable(UNAVAILABLE)
        }
        StoreError::Config { .. }
        | StoreError::DatabaseNewer { .. }
        | StoreError::DatabaseOlder { .. }
        | StoreError::Migration(_)
        | StoreError::LeaseLost(_)
        | StoreError::Corrupt { .. } => internal(err),
    }
}

/// A request field that can't become a domain value; the message names the field.
pub fn invalid(err: ConvertError) -> Status {
    Status::invalid_argument(err.to_string())
}

pub fn not_found() -> Status {
    Status::not_found(NOT_FOUND)
}

/// A 409: the request is well-formed, but the object's state refuses it.
pub fn failed(code: Precondition, message: impl Display) -> Status {
    let mut status = Status::failed_precondition(message.to_string());
    status
        .metadata_mut()
        .insert(ERROR_KEY, MetadataValue::from_static(code.as_str()));
    status
}

/// Anything unexpected: the operator's log gets the error, the caller a generic message.
pub fn internal(err: impl Display) -> Status {
    tracing::error!(error = %err, "unexpected error");
    Status::new(Code::Internal, INTERNAL)
}

#[cfg(test)]
mod tests {
    use einsora_core::lifecycle::{State, TransitionError};

    use super::*;

    fn code_of(status: &Status) -> Option<&str> {
        status
            .metadata()
            .get(ERROR_KEY)
            .and_then(|v| v.to_str().ok())
    }

    #[test]
    fn store_errors_map_to_the_documented_statuses() {
        let cases = [
            (StoreError::NotFound, Code::NotFound, None),
            (
                StoreError::Conflict {
                    current: State::Running,
                },
                Code::FailedPrecondition,
                Some("conflict"),
            ),
            (
                StoreError::QuotaExceeded {
                    holder: einsora_store::QuotaHolder::Tenant,
                    class: "l40s-48gb".into(),
                    measure: einsora_store::QuotaMeasure::Units,
                    held: 2,
                    requested: 1,
                    limit: 2,
                },
                Code::FailedPrecondition,
                Some("quota_exceeded"),
            ),
            (
                StoreError::InvalidTransition(TransitionError::NotInDiagram {
                    from: State::Stopped,
                    to: State::Stopping,
                }),
                Code::FailedPrecondition,
                Some("invalid_transition"),
            ),
            (
                StoreError::Taken(einsora_store::Taken::WorkloadName("nb".into())),
                Code::AlreadyExists,
                None,
            ),
            (
                StoreError::InvalidInput("bad".into()),
                Code::InvalidArgument,
                None,
            ),
            (
                StoreError::Unavailable("db down".into()),
                Code::Unavailable,
                None,
            ),
        ];
        for (err, code, error_key) in cases {
            let shown = err.to_string();
            let status = store(err);
            assert_eq!(status.code(), code, "{shown}");
            assert_eq!(code_of(&status), error_key, "{shown}");
        }
    }

    #[test]
    fn the_409s_say_what_happened() {
        let status = store(StoreError::QuotaExceeded {
            holder: einsora_store::QuotaHolder::Tenant,
            class: "l40s-48gb".into(),
            measure: einsora_store::QuotaMeasure::Units,
            held: 2,
            requested: 1,
            limit: 2,
        });
        assert_eq!(
            status.message(),
            "the tenant's quota for l40s-48gb exceeded: 2 held, 1 requested, limit 2"
        );
        let status = store(StoreError::QuotaExceeded {
            holder: einsora_store::QuotaHolder::Team("ml".into()),
            class: "cpu-4c-16g".into(),
            measure: einsora_store::QuotaMeasure::Cpus,
            held: 4,
            requested: 4,
            limit: 6,
        });
        assert_eq!(
            status.message(),
            "team \"ml\"'s quota for cpu-4c-16g exceeded: 4 CPUs held, 4 requested, limit 6"
        );
        let status = store(StoreError::InvalidTransition(
            TransitionError::NotInDiagram {
                from: State::Stopped,
                to: State::Stopping,
            },
        ));
        assert_eq!(
            status.message(),
            "a workload can't go from stopped to stopping"
        );
    }

    #[test]
    fn unexpected_and_unavailable_errors_hide_their_details() {
        let unexpected = [
            StoreError::Corrupt {
                what: "state",
                value: "sleeping".into(),
            },
            StoreError::Migration("relation \"x\" at host db.internal".into()),
            StoreError::LeaseLost("controller:local".into()),
        ];
        for err in unexpected {
            let status = store(err);
            assert_eq!(status.code(), Code::Internal);
            assert_eq!(status.message(), INTERNAL);
        }
        let status = store(StoreError::Unavailable("db.internal:5432 refused".into()));
        assert_eq!(status.message(), UNAVAILABLE);
    }

    #[test]
    fn not_found_is_one_fixed_answer() {
        let a = not_found();
        let b = store(StoreError::NotFound);
        assert_eq!((a.code(), a.message()), (b.code(), b.message()));
        assert_eq!(a.metadata().len(), b.metadata().len());
    }

    #[test]
    fn convert_errors_name_the_field() {
        let status = invalid(ConvertError::invalid("gpu_class", "it is not offered here"));
        assert_eq!(status.code(), Code::InvalidArgument);
        assert_eq!(
            status.message(),
            "gpu_class is not valid: it is not offered here"
        );
    }
}
