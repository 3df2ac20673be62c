//! The published figures are the benches' own output: every table in docs/benchmarks.md is,
//! byte for byte, a table of one of the reports committed under docs/benchmarks/raw/, and every
//! report there names the clean commit it ran at (its first line, from scripts/bench-header).

// A test harness: a failed unwrap is a failed test, and it reads its own environment.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Each run of consecutive lines starting with `|`, with the line it starts on (1-based).
fn tables(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        if line.starts_with('|') {
            let (_, table) = current.get_or_insert_with(|| (i + 1, String::new()));
            table.push_str(line);
            table.push('\n');
        } else if let Some(done) = current.take() {
            found.push(done);
        }
    }
    found.extend(current);
    found
}

fn reports() -> Vec<(String, String)> {
    let dir = root().join("docs/benchmarks/raw");
    let mut reports: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("a readable report");
            (p.file_name().unwrap().to_string_lossy().into_owned(), text)
        })
        .collect();
    reports.sort();
    reports
}

#[test]
fn every_table_in_the_benchmarks_doc_is_one_of_a_raw_reports_tables() {
    let doc = std::fs::read_to_string(root().join("docs/benchmarks.md")).expect("the doc");
    let raw: Vec<(String, String)> = reports()
        .into_iter()
        .flat_map(|(name, text)| {
            tables(&text)
                .into_iter()
                .map(move |(_, t)| (name.clone(), t))
        })
        .collect();
    let published = tables(&doc);
    assert!(!published.is_empty(), "docs/benchmarks.md has no tables");
    let typed: Vec<String> = published
        .iter()
        .filter(|(_, t)| !raw.iter().any(|(_, r)| r == t))
        .map(|(line, t)| {
            format!(
                "line {line}:\n{}",
                t.lines().take(3).collect::<Vec<_>>().join("\n")
            )
        })
        .collect();
    assert!(
        typed.is_empty(),
        "tables in docs/benchmarks.md that no report in docs/benchmarks/raw/ printed \
         (paste them from the bench's output, don't edit them):\n\n{}",
        typed.join("\n\n")
    );
}

#[test]
fn every_raw_report_names_the_clean_commit_it_ran_at() {
    let reports = reports();
    assert!(!reports.is_empty(), "docs/benchmarks/raw/ has no reports");
    for (name, text) in reports {
        let first = text.lines().next().unwrap_or_default();
        let commit = first
            .split_once(": commit ")
            .and_then(|(_, rest)| rest.split([',', ' ']).next())
            .unwrap_or_default();
        assert!(
            commit.len() >= 7 && commit.chars().all(|c| c.is_ascii_hexdigit()),
            "{name}: its first line names no commit: {first}"
        );
        assert!(
            !first.contains(" dirty") && first.contains(" load average ") && first.contains('`'),
            "{name}: not the header of a run at a clean commit: {first}"
        );
        assert!(
            !tables(&text).is_empty(),
            "{name}: a report without a table"
        );
    }
}

#[test]
fn a_table_is_found_whole_and_apart_from_its_neighbours() {
    let text = "intro\n| a | b |\n|---|---:|\n| x | 1 |\n\n| c |\n|---|\nend\n";
    let found = tables(text);
    assert_eq!(found.len(), 2);
    assert_eq!(
        found[0],
        (2, "| a | b |\n|---|---:|\n| x | 1 |\n".to_owned())
    );
    assert_eq!(found[1].1, "| c |\n|---|\n");
}
