//! The log gate: a test fails on a WARN or ERROR line of its stack's logs that it didn't say it
//! expects (`Solo::expect_log`), so a regression that only logs is still caught. A clean run
//! of `einsora up` logs none.

fn is_warning(line: &str) -> bool {
    line.contains("Z  WARN ") || line.contains("Z ERROR ")
}

/// The WARN and ERROR lines of `logs` that `expected` doesn't cover.
pub fn unexpected(logs: &str, expected: &[String]) -> Vec<String> {
    logs.lines()
        .filter(|l| is_warning(l))
        .filter(|l| !expected.iter().any(|f| l.contains(f.as_str())))
        .map(str::to_owned)
        .collect()
}

/// Fails the test on lines it didn't expect, and writes them to
/// `<test output>/log-gate/<test>.txt` too.
pub fn check(unexpected: &[String]) {
    if unexpected.is_empty() {
        return;
    }
    let dir = crate::harness::output::test_output().join("log-gate");
    let _ = std::fs::create_dir_all(&dir);
    let name = std::thread::current()
        .name()
        .unwrap_or("unnamed")
        .replace("::", "-");
    let mut text = unexpected.join("\n");
    text.push('\n');
    let path = dir.join(format!("{name}.txt"));
    let before = std::fs::read_to_string(&path).unwrap_or_default();
    let _ = std::fs::write(&path, before + &text);
    panic!(
        "WARN or ERROR lines this test didn't expect (Solo::expect_log), also in {}:\n{text}",
        path.display()
    );
}

/// Fails if any log line of the processes holds any of `secrets`.
pub fn assert_no_secret_logged<'s>(
    solo: &crate::harness::solo::Solo,
    secrets: impl IntoIterator<Item = &'s String>,
) {
    let logs = solo.logs();
    assert!(!logs.is_empty(), "no log lines were captured");
    for secret in secrets {
        assert!(secret.len() >= 8, "a secret too short to check: {secret:?}");
        assert!(
            !logs.contains(secret.as_str()),
            "a secret reached the log:\n{logs}"
        );
    }
}
