//! docs/operations.md is the one table of settings: every `EINSORA_*` name the product's source
//! mentions (the crates' `src`, outside tests; the image scripts) is in it, and every name in it
//! is one the source mentions. The few names that are hand-offs between Einsora's own
//! processes, or the tests' own, are listed here with why they aren't settings.

// A test harness: a failed unwrap is a failed test, and it reads its own environment.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Not settings a user sets.
const INTERNAL: &[(&str, &str)] = &[
    (
        "EINSORA_SUPERVISOR_PID",
        "`einsora up` tells its children which process supervises them",
    ),
    (
        "EINSORA_IMAGES_CACHE",
        "`einsora images build` hands images/build its cache",
    ),
    (
        "EINSORA_DOCKERD_DIR",
        "`einsora images build` hands images/dockerd its directory",
    ),
    (
        "EINSORA_VLLM_BIN",
        "the vLLM image's entrypoint's own test points it at a stand-in for vLLM",
    ),
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every `EINSORA_[A-Z0-9_]+` in `text` (a trailing `_`, as in a prefix, left off).
fn names(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("EINSORA_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(tail.len());
        let name = tail[..end].trim_end_matches('_');
        if name.len() > "EINSORA".len() {
            found.insert(name.to_owned());
        }
        rest = &tail[end..];
    }
    found
}

/// Files under `dir` whose path `keep` accepts, recursively.
fn files(dir: &Path, keep: &dyn Fn(&Path) -> bool, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.map(|e| e.expect("a directory entry")) {
        let path = entry.path();
        if path.is_dir() {
            files(&path, keep, out);
        } else if keep(&path) {
            out.push(path);
        }
    }
}

/// The product's source: Rust under each crate's `src` (test modules and the test kit left
/// out), and the image scripts.
fn source() -> BTreeSet<String> {
    let root = root();
    let rust = |p: &Path| {
        let text = p.to_string_lossy();
        p.extension().is_some_and(|e| e == "rs")
            && text.contains("/src/")
            && !text.contains("/tests/")
            && !text.ends_with("tests.rs")
            && !text.contains("crates/testkit/")
    };
    let mut paths = Vec::new();
    for dir in [
        "crates",
        "services",
        "agent",
        "gateway",
        "cli/src",
        "proto/src",
    ] {
        files(&root.join(dir), &rust, &mut paths);
    }
    files(&root.join("images"), &|_| true, &mut paths);
    paths
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .flat_map(|text| names(&text))
        .collect()
}

#[test]
fn operations_md_names_every_setting_and_only_settings() {
    let docs = std::fs::read_to_string(root().join("docs/operations.md")).unwrap();
    let documented = names(&docs);
    let internal: BTreeSet<String> = INTERNAL.iter().map(|(n, _)| (*n).to_owned()).collect();
    let read = source();
    let undocumented: Vec<_> = read
        .difference(&documented)
        .filter(|n| !internal.contains(*n))
        .collect();
    assert!(
        undocumented.is_empty(),
        "read by the source but missing from docs/operations.md: {undocumented:?}"
    );
    let unknown: Vec<_> = documented.difference(&read).collect();
    assert!(
        unknown.is_empty(),
        "in docs/operations.md but read nowhere: {unknown:?}"
    );
    let documented_internal: Vec<_> = documented.intersection(&internal).collect();
    assert!(
        documented_internal.is_empty(),
        "internal hand-offs documented as settings: {documented_internal:?}"
    );
}

#[test]
fn names_are_found_whole() {
    let found = names("`EINSORA_AGENT_HEARTBEAT`, EINSORA_X=1 and EINSORA_AGENT_* and EINSORA");
    let found: Vec<_> = found.iter().map(String::as_str).collect();
    assert_eq!(
        found,
        ["EINSORA_AGENT", "EINSORA_AGENT_HEARTBEAT", "EINSORA_X"]
    );
}
