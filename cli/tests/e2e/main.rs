//! End-to-end tests of the real `einsora` binary.

mod attacks;
mod bad_input;
mod cli_flow;
mod isolation;
mod roles;
mod schemathesis;
mod solo;
mod support;
mod up;
mod world;
