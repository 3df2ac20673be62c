//! What every Einsora process shares: the catalog it offers ([`catalog`]), settings from `EINSORA_*` variables validated before any
//! port is bound ([`settings`]), tracing ([`telemetry`]), one shutdown signal ([`shutdown`]),
//! the installation CA and role certificates ([`pki`]), and mutual TLS for tonic in which the
//! peer's role is checked during the handshake ([`tls`]), and serving internal gRPC over it
//! ([`grpc`]), serving plain HTTP within limits ([`http`]), Prometheus metrics ([`metrics`]), origins and `host[:port]` ([`origin`]), what a panic does ([`panics`]), where this host's agent lays out run directories ([`run_dirs`]), and dialling a workload's Unix socket without trusting its directory
//! ([`workload_socket`]).

pub mod access_url;
pub mod catalog;
pub mod error_code;
pub mod grpc;
pub mod http;
pub mod metrics;
pub mod origin;
pub mod panics;
pub mod pki;
pub mod relay_io;
pub mod run_dirs;
/// Settings live in their own crate so the store can read its one without the runtime.
pub use einsora_settings as settings;
pub mod shutdown;
mod slots;
pub mod telemetry;
pub mod tls;
pub mod workload_socket;
