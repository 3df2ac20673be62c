//! What tests leave for people to look at (screenshots, the log gate's findings), and the
//! Node scripts they run.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::harness::support::finish;

/// The target directory the test binary's `einsora` was built in.
fn target_dir() -> PathBuf {
    let binary = PathBuf::from(env!("CARGO_BIN_EXE_einsora"));
    binary
        .ancestors()
        .nth(2)
        .expect("the binary lies in <target>/<profile>/")
        .to_path_buf()
}

/// Where tests write what people look at afterwards (screenshots): EINSORA_TEST_OUTPUT, else
/// `target/test-output`.
pub fn test_output() -> PathBuf {
    std::env::var_os("EINSORA_TEST_OUTPUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("test-output"))
}

/// Runs `cli/tests/browser/<script>` with Node, with `env`; its output, which it prints, and
/// the JSON of its `RESULT ` line. Fails the test if the script fails.
pub fn run_script(script: &str, env: &[(&str, String)]) -> Value {
    let modules = std::env::var_os("EINSORA_BROWSER_MODULES")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("browser-tests").join("node_modules"));
    assert!(
        modules.join("playwright-core").is_dir(),
        "the browser tests need playwright-core in {} (./scripts/test installs it)",
        modules.display()
    );
    let chromium = std::env::var("EINSORA_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        std::path::Path::new(&chromium).is_file(),
        "the browser tests need Chromium at {chromium} (./scripts/test installs Debian's)"
    );
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("browser")
        .join(script);
    let child = Command::new("node")
        .arg(&path)
        .env("EINSORA_BROWSER_MODULES", &modules)
        .env("EINSORA_CHROMIUM", &chromium)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node runs (./scripts/test installs it)");
    let out = finish(child, Duration::from_secs(900));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(out.status.success(), "{script} failed ({})", out.status);
    let result = stdout
        .lines()
        .find_map(|line| line.strip_prefix("RESULT "))
        .unwrap_or_else(|| panic!("{script} printed no RESULT line"));
    serde_json::from_str(result).unwrap()
}
