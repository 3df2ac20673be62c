//! Free space on the filesystem of the agent's state directory, where workloads' disks and
//! models are kept, against the floor below which no new work starts.

use std::io;
use std::path::Path;

use super::settings::Floor;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Space {
    /// What an unprivileged writer may still use.
    pub available: u64,
    pub total: u64,
}

impl Space {
    pub fn of(dir: &Path) -> io::Result<Space> {
        let s = rustix::fs::statvfs(dir)?;
        Ok(Space {
            available: s.f_bavail.saturating_mul(s.f_frsize),
            total: s.f_blocks.saturating_mul(s.f_frsize),
        })
    }

    /// Whether setting `needed` bytes aside still leaves the floor free.
    pub fn leaves(&self, needed: u64, floor: Floor) -> bool {
        self.available
            .checked_sub(needed)
            .is_some_and(|left| left >= floor.bytes_of(self.total))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn new_work_needs_the_floor_left_over() {
        let space = Space {
            available: 5 * GIB,
            total: 100 * GIB,
        };
        assert!(space.leaves(0, Floor::Bytes(2 * GIB)));
        assert!(space.leaves(3 * GIB, Floor::Bytes(2 * GIB)));
        assert!(!space.leaves(3 * GIB + 1, Floor::Bytes(2 * GIB)));
        assert!(!space.leaves(6 * GIB, Floor::Bytes(0)));
        assert!(space.leaves(0, Floor::Percent(5)));
        assert!(!space.leaves(0, Floor::Percent(6)));
    }

    #[test]
    fn the_free_space_of_a_real_directory_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let space = Space::of(dir.path()).unwrap();
        assert!(
            space.total > 0 && space.available <= space.total,
            "{space:?}"
        );
        assert!(!space.leaves(0, Floor::Bytes(space.total + 1)));
    }
}
