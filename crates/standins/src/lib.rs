//! Stand-ins for a Mac's tools, so the macos-native driver's code runs on Linux CI (issue 17):
//! `sysctl` replays Macs as Apple's published specifications describe them ([`macs`]), and
//! `sandbox-exec` checks the profile it is given and runs the command under bubblewrap with the
//! places the profile names (`src/bin/sandbox-exec.rs`). Neither is a Mac: what macOS really
//! enforces is `scripts/mac-check`'s to show, on one.

pub mod macs;
