//! End-to-end tests of the real `einsora` binary.

mod bad_input;
mod roles;
mod support;
