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
        "EINSORA_LIBVIRTD_DIR",
        "images/libvirtd's own directory for its daemons' PIDs and logs, as images/dockerd's",
    ),
    (
        "EINSORA_SERVER_BINARY",
        "`einsora images build server` hands images/build the binary the image runs (itself)",
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
/// out), the image scripts, and the Lab's compose file (its `EINSORA_LAB_*` variables).
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
    paths.push(root.join("compose/compose.yaml"));
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

/// The settings table's rows: the names in the first cell, the default cell as written.
fn table_rows(docs: &str) -> Vec<(Vec<String>, String)> {
    docs.lines()
        .filter(|line| line.starts_with("| `EINSORA_"))
        .map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split(" | ").collect();
            let names = cells[0]
                .split('/')
                .map(|n| n.trim().trim_matches('`').to_owned())
                .collect();
            (names, cells[1].trim().to_owned())
        })
        .collect()
}

/// `text`'s backticked parts, in order.
fn backticked(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// `text` as `# `-comment lines of at most 100 columns.
fn comment(text: &str, out: &mut String) {
    let mut line = String::from("#");
    for word in text.split_whitespace() {
        if line.len() + 1 + word.len() > 100 && line.len() > 1 {
            out.push_str(&line);
            out.push('\n');
            line = String::from("#");
        }
        line.push(' ');
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
}

/// The settings packaging/einsora.env sets, where the service's values differ from Solo's.
const SET_FOR_THE_SERVICE: [&str; 2] = ["EINSORA_DATA_DIR", "EINSORA_LOG_FILE"];

/// What packaging/einsora.env holds: the service's two settings that differ from Solo's, then
/// every setting of the table commented out, with its default where it is a literal value.
fn env_file(docs: &str) -> String {
    let mut out = String::from(
        "# Einsora's settings for the system service, read by einsora.service (EnvironmentFile)\n\
         # and by `sudo einsora setup` and `sudo einsora migrate`. `NAME=value` lines; no quotes\n\
         # needed. Restart the service after a change: sudo systemctl restart einsora\n\
         #\n\
         # Generated from docs/operations.md's settings table by cli/tests/settings_table.rs.\n\
         \n\
         # Where the service keeps its data: the unit's StateDirectory.\n\
         EINSORA_DATA_DIR=/var/lib/einsora\n\
         # The JSON log of every role: the unit's LogsDirectory (journald gets the readable lines).\n\
         EINSORA_LOG_FILE=/var/log/einsora/einsora.log\n\
         \n\
         # Every setting, at its default. Uncomment a line to change it.\n",
    );
    for (names, default) in table_rows(docs) {
        if names
            .iter()
            .all(|n| SET_FOR_THE_SERVICE.contains(&n.as_str()))
        {
            continue;
        }
        out.push('\n');
        comment(&default.replace('`', ""), &mut out);
        let values = backticked(&default);
        for (i, name) in names.iter().enumerate() {
            let literal = default.starts_with('`')
                && values.len() >= names.len()
                && !values[i].contains(['<', '~', ' ']);
            let value = if literal { values[i] } else { "" };
            out.push_str(&format!("#{name}={value}\n"));
        }
    }
    out
}

/// packaging/einsora.env is generated from the table, so the service's settings file names every
/// setting with the default the docs give. After a change to the table, regenerate it with
/// `EINSORA_UPDATE_ENV_FILE=1 cargo test -p einsora --test settings_table`, and commit it.
#[test]
fn the_packaged_settings_file_is_the_table() {
    let docs = std::fs::read_to_string(root().join("docs/operations.md")).unwrap();
    let generated = env_file(&docs);
    let path = root().join("packaging/einsora.env");
    if std::env::var_os("EINSORA_UPDATE_ENV_FILE").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "packaging/einsora.env isn't docs/operations.md's table: run EINSORA_UPDATE_ENV_FILE=1 \
         cargo test -p einsora --test settings_table, and commit it"
    );
    let table: BTreeSet<String> = table_rows(&docs).into_iter().flat_map(|r| r.0).collect();
    assert!(table.len() > 50, "the table's rows are found: {table:?}");
    for name in &table {
        assert!(
            generated.contains(&format!("\n#{name}=")) || generated.contains(&format!("\n{name}=")),
            "{name} is in the settings file"
        );
    }
}
