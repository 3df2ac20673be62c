//! einsora-proto: Einsora's contracts. The `.proto` files under `proto/proto/` are the single
//! source of truth for the public API (with its HTTP mapping), the agent protocol and the
//! internal services; this crate holds the code generated from them, the descriptor set the
//! gateway derives JSON routes and OpenAPI from, and [`convert`], the one place where raw
//! proto types become validated domain types.
//!
//! gRPC health is the standard `grpc.health.v1`, served with tonic-health, not defined here.

pub mod codec;
pub mod convert;
pub mod metadata;
pub mod schema;

/// The relay's frames (`agent.v1.RelayService`, `internal.v1.ControllerInternalService.Relay`):
/// the most bytes one carries. Readers of a connection's end read at most this much at a time.
pub const RELAY_MAX_FRAME: usize = 64 << 10;

/// The encoded `google.protobuf.FileDescriptorSet` of every .proto file here and its imports,
/// with source comments and extension options (`google.api.http`, `einsora.options.v1.*`).
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/einsora_descriptor.bin"));

/// Declares the module of one generated package.
macro_rules! package {
    ($(#[$meta:meta])* $name:ident => $file:literal) => {
        $(#[$meta])*
        pub mod $name {
            /// Version 1.
            #[allow(clippy::all, clippy::pedantic, missing_debug_implementations)]
            pub mod v1 {
                include!(concat!(env!("OUT_DIR"), "/", $file));
            }
        }
    };
}

package!(
    /// Vocabulary shared by the public API and the agent protocol (`einsora.common.v1`).
    common => "einsora.common.v1.rs"
);
package!(
    /// Public: notebooks, endpoints and VMs (`einsora.workloads.v1`).
    workloads => "einsora.workloads.v1.rs"
);
package!(
    /// Public: the caller's machines and their revocation (`einsora.machines.v1`).
    machines => "einsora.machines.v1.rs"
);
package!(
    /// Public: regions, classes, images and drivers (`einsora.catalog.v1`).
    catalog => "einsora.catalog.v1.rs"
);
package!(
    /// Public: notebook links and endpoint URLs (`einsora.access.v1`).
    access => "einsora.access.v1.rs"
);
package!(
    /// Public: sessions, the current user, passwords and API tokens (`einsora.accounts.v1`).
    accounts => "einsora.accounts.v1.rs"
);
package!(
    /// Public: hourly usage records (`einsora.usage.v1`).
    usage => "einsora.usage.v1.rs"
);
package!(
    /// Public: the installation's health at a glance (`einsora.status.v1`).
    status => "einsora.status.v1.rs"
);
package!(
    /// Public: the tenant's activity log (`einsora.activity.v1`).
    activity => "einsora.activity.v1.rs"
);
package!(
    /// Public: enrolment tokens for machines joining (`einsora.enrolment.v1`).
    enrolment => "einsora.enrolment.v1.rs"
);
package!(
    /// Descriptor options: secrets, enum words and request field rules (`einsora.options.v1`).
    options => "einsora.options.v1.rs"
);
package!(
    /// Agents: Enroll and the Sync stream (`einsora.agent.v1`).
    agent => "einsora.agent.v1.rs"
);
package!(
    /// Between services only: api, controller and metering RPCs (`einsora.internal.v1`).
    internal => "einsora.internal.v1.rs"
);

/// `google.api`: the HTTP mapping types read from method options.
pub mod google {
    /// `google.api.HttpRule` and friends.
    #[allow(clippy::all, clippy::pedantic, missing_debug_implementations)]
    pub mod api {
        include!(concat!(env!("OUT_DIR"), "/google.api.rs"));
    }
}
