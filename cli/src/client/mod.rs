//! The CLI as a client of a running Einsora's JSON API: credentials, requests, and output.

mod activity;
mod commands;
mod credentials;
mod http;
mod keys;
mod logs;
mod output;
mod quotas;
mod ssh;
mod status;
mod usage;
mod users;

pub use commands::{ClientCommand, Global, run};
