//! The packages of scripts/package, built from this tree's binary and tested the way a user
//! meets them: lintian and rpm's own listings, the systemd unit verified, the .deb installed,
//! set up, run, upgraded, removed and purged in a clean Debian container, the .rpm installed
//! into a throwaway root, install.sh against a local server (and refusing what it must), the
//! completions, man pages, SBOM, launchd agent and Homebrew formula checked.

// A test harness: a failed unwrap is a failed test, and it reads its own environment.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod built;
mod container;
mod deb;
mod files;
mod install_sh;
mod rpm;
