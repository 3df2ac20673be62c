//! Enums both ways. Every mapping is an exhaustive match in both directions, so a value added
//! on either side without its counterpart fails to compile.

use einsora_core::accelerator::AcceleratorKind;
use einsora_core::agent::{Mode, StatusCode};
use einsora_core::driver::Isolation;
use einsora_core::kind::WorkloadKind;
use einsora_core::lifecycle::State;
use einsora_core::output::OutputStream;
use einsora_core::reasons::SessionClient;
use einsora_core::role::Role;
use einsora_core::sharing::SharingLevel;

use super::{ConvertError, Problem};
use crate::accounts::v1 as accounts_pb;
use crate::agent::v1 as agent_pb;
use crate::catalog::v1 as catalog_pb;
use crate::common::v1 as common_pb;

/// A domain enum with a proto counterpart whose zero value is `*_UNSPECIFIED`.
pub trait ProtoEnum: Sized + Copy {
    /// The generated enum.
    type Proto: Copy + Into<i32> + TryFrom<i32>;

    /// The field name errors use when converting without one (`TryFrom`).
    const FIELD: &'static str;

    fn to_proto(self) -> Self::Proto;

    /// `None` for the unspecified value.
    fn from_proto(proto: Self::Proto) -> Option<Self>;

    /// Reads an enum field as it is on the wire (an `i32`), naming `field` in errors.
    fn from_field(field: &str, raw: i32) -> Result<Self, ConvertError> {
        let proto = Self::Proto::try_from(raw)
            .map_err(|_| ConvertError::new(field, Problem::UnknownEnumValue(raw)))?;
        Self::from_proto(proto).ok_or_else(|| ConvertError::new(field, Problem::Unspecified))
    }

    /// The value to put in an enum field.
    fn to_field(self) -> i32 {
        self.to_proto().into()
    }
}

/// Reads a repeated enum field; errors name the element, e.g. `kinds[2]`.
pub fn enum_list<T: ProtoEnum>(field: &str, raw: &[i32]) -> Result<Vec<T>, ConvertError> {
    raw.iter()
        .enumerate()
        .map(|(i, &v)| T::from_field(&format!("{field}[{i}]"), v))
        .collect()
}

macro_rules! enum_pair {
    ($domain:ident, $proto:ty, $field:literal, $unspecified:ident, { $($d:ident <=> $p:ident),+ $(,)? }) => {
        impl ProtoEnum for $domain {
            type Proto = $proto;
            const FIELD: &'static str = $field;

            fn to_proto(self) -> $proto {
                match self {
                    $($domain::$d => <$proto>::$p,)+
                }
            }

            fn from_proto(proto: $proto) -> Option<Self> {
                match proto {
                    <$proto>::$unspecified => None,
                    $(<$proto>::$p => Some($domain::$d),)+
                }
            }
        }

        impl From<$domain> for $proto {
            fn from(value: $domain) -> Self {
                value.to_proto()
            }
        }

        impl TryFrom<$proto> for $domain {
            type Error = ConvertError;

            fn try_from(proto: $proto) -> Result<Self, ConvertError> {
                $domain::from_proto(proto)
                    .ok_or_else(|| ConvertError::new($field, Problem::Unspecified))
            }
        }
    };
}

enum_pair!(WorkloadKind, common_pb::WorkloadKind, "kind", Unspecified, {
    Vm <=> Vm,
    Notebook <=> Notebook,
    Endpoint <=> Endpoint,
});

enum_pair!(State, common_pb::WorkloadState, "state", Unspecified, {
    Pending <=> Pending,
    Queued <=> Queued,
    Provisioning <=> Provisioning,
    Running <=> Running,
    Stopping <=> Stopping,
    Stopped <=> Stopped,
    Failed <=> Failed,
    Deleting <=> Deleting,
    Deleted <=> Deleted,
});

enum_pair!(OutputStream, agent_pb::OutputStream, "stream", Unspecified, {
    Stdout <=> Stdout,
    Stderr <=> Stderr,
});

enum_pair!(SessionClient, accounts_pb::SessionClient, "client", Unspecified, {
    Browser <=> Browser,
    Cli <=> Cli,
});

enum_pair!(Role, accounts_pb::Role, "role", Unspecified, {
    Owner <=> Owner,
    Admin <=> Admin,
    Member <=> Member,
});

enum_pair!(AcceleratorKind, common_pb::AcceleratorKind, "accelerator", Unspecified, {
    Nvidia <=> Nvidia,
    Apple <=> Apple,
    Amd <=> Amd,
    Cpu <=> Cpu,
});

enum_pair!(SharingLevel, common_pb::SharingLevel, "sharing", Unspecified, {
    Private <=> Private,
    InviteOnly <=> InviteOnly,
    Community <=> Community,
});

enum_pair!(Mode, agent_pb::Mode, "mode", Unspecified, {
    Run <=> Run,
    Park <=> Park,
    Remove <=> Remove,
});

enum_pair!(StatusCode, agent_pb::StatusCode, "code", Unspecified, {
    Starting <=> Starting,
    PullingImage <=> PullingImage,
    Ready <=> Ready,
    Stopping <=> Stopping,
    Stopped <=> Stopped,
    Removed <=> Removed,
    GpuBusy <=> GpuBusy,
    OutOfMemory <=> OutOfMemory,
    Exited <=> Exited,
    StartFailed <=> StartFailed,
    ImageMissing <=> ImageMissing,
    DriverMissing <=> DriverMissing,
    IsolationRefused <=> IsolationRefused,
    DiskMissing <=> DiskMissing,
    SandboxChanged <=> SandboxChanged,
    ModelUnavailable <=> ModelUnavailable,
    ModelRefused <=> ModelRefused,
    ModelChecksumMismatch <=> ModelChecksumMismatch,
    ModelInvalid <=> ModelInvalid,
    SocketTampered <=> SocketTampered,
    DiskLow <=> DiskLow,
    DiskLimitUnavailable <=> DiskLimitUnavailable,
    GpuMissing <=> GpuMissing,
    GpuPassthroughUnavailable <=> GpuPassthroughUnavailable,
    Other <=> Other,
});

enum_pair!(Isolation, catalog_pb::Isolation, "isolation", Unspecified, {
    Weak <=> Weak,
    Strong <=> Strong,
});

#[cfg(test)]
#[path = "enums_tests.rs"]
mod tests;
