//! Attempts: each admission of a workload is a new attempt. Agents start an attempt at most
//! once and say which attempt a status is about. Attempts are compared for equality only, so a
//! database restored with a lower count still runs.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Attempt(u32);

impl Attempt {
    /// A workload that was never admitted.
    pub const NONE: Attempt = Attempt(0);

    pub const fn new(n: u32) -> Self {
        Attempt(n)
    }

    pub const fn get(self) -> u32 {
        self.0
    }

    /// The attempt the next admission starts.
    pub const fn next(self) -> Self {
        Attempt(self.0.saturating_add(1))
    }
}

impl fmt::Display for Attempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
