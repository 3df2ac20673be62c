//! Drivers: how a machine runs workloads. `process` is the supervisor the native drivers build
//! on.

pub mod process;
