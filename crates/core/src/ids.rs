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

/// `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`: of the forms `Uuid::try_parse` reads, only the
/// hyphenated one is this long.
const HYPHENATED_LEN: usize = 36;

/// An object's ID type, with the word for what it identifies (`workload`, `token`): what the
/// activity log names the object of an action with.
pub trait ObjectId: FromStr<Err = InvalidId> + fmt::Display + Copy {
    const KIND: &'static str;
}

macro_rules! id_type {
    ($($(#[$meta:meta])* $name:ident = $what:literal, $kind:literal;)+) => {$(
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

        impl ObjectId for $name {
            const KIND: &'static str = $kind;
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.as_hyphenated().fmt(f)
            }
        }

        /// Only the hyphenated form that `Display` writes (hex digits of either case): one
        /// spelling per ID, as the API documents it.
        impl FromStr for $name {
            type Err = InvalidId;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Some(s)
                    .filter(|s| s.len() == HYPHENATED_LEN)
                    .and_then(|s| Uuid::try_parse(s).ok())
                    .map($name)
                    .ok_or_else(|| InvalidId {
                        what: $what,
                        value: s.chars().take(64).collect(),
                    })
            }
        }
    )+};
}

id_type! {
    /// A tenant: the unit of isolation, quota and usage.
    TenantId = "tenant ID", "tenant";
    /// A person with an account in a tenant.
    UserId = "user ID", "user";
    /// A workload: a notebook, an endpoint or a VM.
    WorkloadId = "workload ID", "workload";
    /// A machine that runs workloads through its agent.
    MachineId = "machine ID", "machine";
    /// An API token (the ID, never the secret).
    TokenId = "token ID", "token";
    /// An inference key (the ID, never the secret).
    InferenceKeyId = "inference key ID", "inference_key";
    /// An enrolment token (the ID, never the secret).
    EnrolmentTokenId = "enrolment token ID", "enrolment_token";
    /// An hourly usage record.
    UsageRecordId = "usage record ID", "usage_record";
    /// A one-time account link: an invite or a password reset (the ID, never the secret).
    AccountLinkId = "invite or reset link ID", "account_link";
    /// A team of users within a tenant.
    TeamId = "team ID", "team";
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
    fn only_the_hyphenated_form_parses() {
        let id = WorkloadId::new();
        let upper = id.to_string().to_uppercase();
        assert_eq!(upper.parse::<WorkloadId>(), Ok(id));
        let uuid = id.as_uuid();
        for other in [
            uuid.simple().to_string(),
            uuid.braced().to_string(),
            uuid.urn().to_string(),
        ] {
            assert!(other.parse::<WorkloadId>().is_err(), "{other}");
        }
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
