//! The agents' port over real mutual TLS on loopback, each test a scripted fake agent:
//! enrolment, one stream per machine, renewals retiring the previous certificate, the bounds on
//! what a stream may send, and a session's own timers (revocation within the recheck, an agent
//! that doesn't take its desired state), what its workloads print. Real time, with a session's timers scaled down where
//! a test waits on them: the store does real I/O on threads of its own, which paused time
//! would race.

mod enrolment;
mod harness;
mod inventory;
mod limits;
mod output;
mod relay;
mod sessions;
mod streams;
