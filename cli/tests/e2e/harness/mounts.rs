//! The mounts a test's agent made (workloads' disks and run directories, which outlive the
//! agent by design), found in /proc/self/mountinfo and unmounted when the test is done.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Every mount point at or below `dir`, deepest first.
pub fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut found: Vec<PathBuf> = info
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|point| PathBuf::from(unescape(point)))
        .filter(|point| point.starts_with(dir))
        .collect();
    found.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    found.dedup();
    found
}

/// What is mounted on `dir` (`fstype source`), if anything.
pub fn mounted_on(dir: &Path) -> Option<(String, String)> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().rev().find_map(|line| {
        let fields: Vec<&str> = line.split(' ').collect();
        let point = PathBuf::from(unescape(fields.get(4)?));
        let after = fields.iter().position(|f| *f == "-")?;
        let kind = fields.get(after + 1)?;
        let source = fields.get(after + 2)?;
        (point == dir).then(|| ((*kind).to_owned(), (*source).to_owned()))
    })
}

/// Unmounts everything at or below `dir`, deepest first (busy ones lazily). Loop devices set
/// up by `mount -o loop` go with their filesystems.
pub fn unmount_all_under(dir: &Path) {
    for point in mounts_under(dir) {
        let done = Command::new("umount").arg(&point).output();
        if !done.is_ok_and(|o| o.status.success()) {
            let _ = Command::new("umount").arg("-l").arg(&point).output();
        }
    }
}

/// mountinfo's octal escapes (space, tab, newline, backslash).
fn unescape(field: &str) -> String {
    field
        .replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}
