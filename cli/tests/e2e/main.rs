//! End-to-end tests of the real `einsora` binary.

// A test harness: a failed unwrap is a failed test, and it reads its own environment.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod access_sessions;
mod adoption;
mod agent_backend;
mod attacks;
mod backup;
mod bad_input;
mod browser;
mod cli_flow;
mod compose;
mod crash;
mod disk;
mod docker;
mod enrolment;
mod failover;
mod fencing;
mod gpus;
mod harness;
mod hostile;
mod https;
mod idempotency;
mod images;
mod isolation;
mod lifecycle;
mod logs;
mod macos;
mod metrics;
mod models;
mod native;
mod outage;
mod partition;
mod python_sdk;
mod relay;
mod roles;
mod sandbox;
mod schemathesis;
mod status;
mod traces;
mod up;
mod user_roles;
