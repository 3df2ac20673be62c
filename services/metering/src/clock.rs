//! Where the metering role reads the time, so tests can set it instead of waiting for it.

use std::fmt;

use time::OffsetDateTime;

pub trait Clock: Send + Sync + fmt::Debug {
    fn now(&self) -> OffsetDateTime;
}

/// The system's clock, in UTC.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> OffsetDateTime {
        OffsetDateTime::now_utc()
    }
}
