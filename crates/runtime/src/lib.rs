//! What every Einsora process shares: the catalog it offers ([`catalog`]), settings from `EINSORA_*` variables validated before any
//! port is bound ([`settings`]), tracing ([`telemetry`]), one shutdown signal ([`shutdown`]),
//! the installation CA and role certificates ([`pki`]), and mutual TLS for tonic in which the
//! peer's role is checked during the handshake ([`tls`]), and serving internal gRPC over it
//! ([`grpc`]).

pub mod catalog;
pub mod grpc;
pub mod pki;
pub mod settings;
pub mod shutdown;
pub mod telemetry;
pub mod tls;
