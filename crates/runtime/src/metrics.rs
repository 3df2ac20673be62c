//! A process's Prometheus metrics (`einsora_metrics`, re-exported here) served at `/metrics`
//! on `EINSORA_METRICS_ADDR` when it is set ([`serve`]), and the gRPC servers' handling times
//! ([`GrpcMetricsLayer`]); `einsora up` serves the whole installation's (docs/operations.md,
//! "Metrics").

mod grpc;
mod serve;

pub use einsora_metrics::*;
pub use grpc::GrpcMetricsLayer;
pub use serve::{METRICS_ADDR, MetricsAddr, serve};
