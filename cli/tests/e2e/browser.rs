//! The dashboard in a real browser: Debian's Chromium, driven by Playwright from a Node script
//! (`cli/tests/browser/dashboard.mjs`), against `einsora up` on a temp data dir in local auth
//! mode (the owner made by `einsora setup`) with this machine's Docker engine running the
//! workloads. The script signs in, launches, watches, opens, stops, starts and deletes a
//! notebook, launches an endpoint, makes and revokes tokens, draws the usage chart, attacks the
//! API from other sites with the session live, and writes a screenshot of every page at desktop
//! and phone sizes to `<test output>/screenshots`. What it needs, `./scripts/test` installs:
//! Chromium, Node, and `playwright-core` in `target/browser-tests` (EINSORA_BROWSER_MODULES).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::docker::{port, solo_as_owner};
use crate::lifecycle::Owner;
use crate::solo::{OWNER_EMAIL, OWNER_PASSWORD, Solo};
use crate::support::finish;
use crate::world::call;

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

/// The dashboard's address as a browser on this machine uses it: `localhost`, the name the
/// notebooks' `w-<id>.localhost` hosts sit under, so that a session cookie scoped too widely
/// would show on their requests.
fn dashboard(solo: &Solo) -> String {
    let port = solo.http.rsplit_once(':').unwrap().1;
    format!("http://localhost:{port}")
}

/// Every page of the dashboard, as the screenshots name them.
const PAGES: [&str; 7] = [
    "signin",
    "workloads",
    "launch",
    "workload",
    "machines",
    "tokens",
    "usage",
];
/// 1280×800 and 390×844.
const SIZES: [&str; 2] = ["desktop", "phone"];

#[test]
fn the_dashboard_in_chromium_launches_watches_opens_and_keeps_other_sites_out() {
    // Usage records kept current every second, so the chart has a bar of this run.
    let (solo, _leftovers) = solo_as_owner(&[("EINSORA_METERING_INTERVAL", "1s")]);
    let owner = Owner::of(&solo);
    let screenshots = test_output().join("screenshots");
    std::fs::create_dir_all(&screenshots).unwrap();
    for shot in PAGES
        .iter()
        .flat_map(|page| SIZES.map(|size| format!("{page}-{size}.png")))
    {
        let _ = std::fs::remove_file(screenshots.join(shot)); // none of an earlier run counts
    }
    let env = [
        ("EINSORA_DASHBOARD_URL", dashboard(&solo)),
        ("EINSORA_API_URL", format!("http://{}", solo.http)),
        ("EINSORA_ACCESS_PORT", port(&solo).to_owned()),
        ("EINSORA_OWNER_EMAIL", OWNER_EMAIL.to_owned()),
        ("EINSORA_OWNER_PASSWORD", OWNER_PASSWORD.to_owned()),
        ("EINSORA_API_TOKEN", owner.token.clone()),
        ("EINSORA_MODEL", "tiny.gguf".to_owned()),
        ("EINSORA_SCREENSHOTS", screenshots.display().to_string()),
    ];
    let result = run_script("dashboard.mjs", &env);

    // What the browser did, seen from the API: no attack left a token, the notebook went its
    // whole way to deleted, the browser's token is revoked.
    let listed = call(&solo, &owner.session, "GET", "/v1/tokens", None);
    assert_eq!(listed.status, 200, "{}", listed.body);
    let tokens = listed.json()["tokens"]
        .as_array()
        .cloned()
        .expect("a list of tokens");
    let names: Vec<&str> = tokens.iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(
        names.contains(&"laptop"),
        "the list holds the test's own token: {names:?}"
    );
    assert!(
        names.iter().all(|n| !n.starts_with("attack")),
        "an attack made a token: {names:?}"
    );
    // Revoked tokens stay listed, with when.
    let made = result["token_name"].as_str().unwrap();
    let browsers: Vec<_> = tokens.iter().filter(|t| t["name"] == made).collect();
    assert_eq!(browsers.len(), 1, "the browser made one token: {tokens:?}");
    assert!(
        browsers[0]["revoked_at"].is_string(),
        "the browser revoked its token: {tokens:?}"
    );
    let notebook = result["notebook"].as_str().unwrap();
    let path = format!("/v1/workloads/{notebook}?include_deleted=true");
    let got = call(&solo, &owner.session, "GET", &path, None).json();
    assert_eq!(got["state"], "deleted", "{got}");
    for shot in PAGES
        .iter()
        .flat_map(|page| SIZES.map(|size| format!("{page}-{size}.png")))
    {
        let shot = screenshots.join(shot);
        assert!(shot.is_file(), "no screenshot {}", shot.display());
    }
}
