//! The test harness every crate's tests share: real components, started in temp directories
//! and stopped when the test process ends (a throwaway store on SQLite or Postgres, `db`);
//! builders for what tests put in a store (`fixtures`); ports held for them so nothing else
//! takes those; waits on conditions, never on a guess of how long something takes; and the
//! report every bench prints.

// Test support: a failed unwrap is a failed test, and tests read their own environment.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

pub mod bench;
pub mod catalog;
pub mod db;
pub mod docker;
pub mod fixtures;
pub mod grpc;
pub mod http;
pub mod logs;
pub mod otlp;
mod ports;
mod postgres;
pub mod process;
mod settings;
pub mod spawn;
mod strings;
mod wait;

pub use ports::Port;
pub use postgres::TempPostgres;
pub use settings::settings_in;
pub use strings::all_strings;
pub use wait::{POLL, eventually, eventually_async, eventually_or, setting};
