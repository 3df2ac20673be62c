//! The agents' port over real mutual TLS on loopback: enrolment, one stream per machine, and
//! renewals retiring the previous
//! certificate, and the bounds on what a stream may send.

mod enrolment;
mod harness;
mod inventory;
mod limits;
mod streams;
