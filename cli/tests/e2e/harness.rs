//! The end-to-end harness: everything a topic file uses to run and drive the real binary. Topic
//! files import from here only; nothing here is a test of its own but the replay checker's.

pub mod agents;
pub mod cli;
pub mod controllers;
pub mod engine_proxy;
pub mod https;
pub mod lab;
pub mod lan;
pub mod log_gate;
pub mod mounts;
pub mod notebooks;
pub mod output;
pub mod replay;
pub mod solo;
pub mod support;
pub mod wire;
pub mod workloads;
pub mod world;
