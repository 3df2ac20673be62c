//! The version `einsora --version` prints: scripts/release hands it the release's version and
//! commit (from the tag or `git describe`); any other build says it is a development build of
//! the workspace's version.

// A build script reads cargo's environment, not the product's settings.
#![allow(clippy::disallowed_methods)]

fn main() {
    println!("cargo:rerun-if-env-changed=EINSORA_RELEASE_VERSION");
    println!("cargo:rerun-if-env-changed=EINSORA_RELEASE_COMMIT");
    let version = std::env::var("EINSORA_RELEASE_VERSION").ok();
    let commit = std::env::var("EINSORA_RELEASE_COMMIT").ok();
    let line = match (version, commit) {
        (Some(version), Some(commit)) => format!("{version} (commit {commit})"),
        (Some(version), None) => format!("{version} (commit unknown)"),
        (None, _) => format!(
            "{} (development build, commit unknown)",
            std::env::var("CARGO_PKG_VERSION").unwrap_or_default()
        ),
    };
    println!("cargo:rustc-env=VERSION_AND_COMMIT={line}");
}
