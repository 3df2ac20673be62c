//! End-to-end tests of the real `einsora` binary.

mod adoption;
mod agent_backend;
mod attacks;
mod bad_input;
mod browser;
mod cli_flow;
mod controllers;
mod crash;
mod docker;
mod enrolment;
mod fencing;
mod isolation;
mod lan;
mod lifecycle;
mod outage;
mod partition;
mod replay;
mod roles;
mod sandbox;
mod schemathesis;
mod solo;
mod support;
mod up;
mod wire;
mod world;
