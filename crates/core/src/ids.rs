//! Identifiers. Every object's ID is a UUIDv7 (time-ordered), typed so a workload ID can never
//! be passed where a machine ID is expected.

use std::fmt;
use std::str::FromStr;

use uuid::Uuid;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} {value:?} is not a valid ID (a UUID)")]
pub struct InvalidId {
    pub what: &'static str,
    pub value: String,
}

macro_rules! id_type {
    ($($(#[$meta:meta])* $name:ident = $what:literal;)+) => {$(
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(Uuid);

        impl $name {
            /// A new, time-ordered ID.
            pub fn new() -> Self {
                $name(Uuid::now_v7())
            }

            pub const fn from_uuid(uuid: Uuid) -> Self {
                $name(uuid)
            }

            pub const fn as_uuid(&self) -> &Uuid {
                &self.0
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.as_hyphenated().fmt(f)
            }
        }

        impl FromStr for $name {
            type Err = InvalidId;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Uuid::try_parse(s).map($name).map_err(|_| InvalidId {
                    what: $what,
                    value: s.chars().take(64).collect(),
                })
            }
        }
    )+};
}

id_type! {
    /// A tenant: the unit of isolation, quota and usage.
    TenantId = "tenant ID";
    /// A person with an account in a tenant.
    UserId = "user ID";
    /// A workload: a notebook, an endpoint or a VM.
    WorkloadId = "workload ID";
    /// A machine that runs workloads through its agent.
    MachineId = "machine ID";
    /// An API token (the ID, never the secret).
    TokenId = "token ID";
    /// An enrolment token (the ID, never the secret).
    EnrolmentTokenId = "enrolment token ID";
    /// An hourly usage record.
    UsageRecordId = "usage record ID";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_v7_and_round_trip() {
        let id = WorkloadId::new();
        assert_eq!(id.as_uuid().get_version_num(), 7);
        assert_eq!(id.to_string().parse::<WorkloadId>(), Ok(id));
    }

    #[test]
    fn bad_id_names_what_it_is() {
        let err = "nope".parse::<MachineId>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "machine ID \"nope\" is not a valid ID (a UUID)"
        );
    }

    #[test]
    fn later_ids_sort_after_earlier_ones() {
        let a = WorkloadId::new();
        let b = WorkloadId::new();
        assert!(a < b);
    }
}
