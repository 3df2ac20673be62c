//! The dashboard in a real browser: Debian's Chromium, driven by Playwright from a Node script
//! (`cli/tests/browser/dashboard.mjs`), against `einsora up` on a temp data dir in local auth
//! mode (the owner made by `einsora setup`) with this machine's Docker engine running the
//! workloads. The script signs in, launches, watches, opens, stops, starts and deletes a
//! notebook, follows its output on the Logs tab (scrolling up stops following; Download saves
//! it), launches an endpoint, makes and revokes tokens, draws the usage chart, reads and exports
//! the activity log, attacks the API from other sites with the session live, and writes a
//! screenshot of every page at desktop and phone sizes to `<test output>/screenshots`. What it needs, `./scripts/test` installs:
//! Chromium, Node, and `playwright-core` in `target/browser-tests` (EINSORA_BROWSER_MODULES).

use crate::harness::notebooks::{port, solo_as_owner};
use crate::harness::output::*;
use crate::harness::solo::{OWNER_EMAIL, OWNER_PASSWORD, Solo};
use crate::harness::workloads::Owner;
use crate::harness::world::call;

/// The dashboard's address as a browser on this machine uses it: `localhost`, the name the
/// notebooks' `w-<id>.localhost` hosts sit under, so that a session cookie scoped too widely
/// would show on their requests.
fn dashboard(solo: &Solo) -> String {
    let port = solo.http.rsplit_once(':').unwrap().1;
    format!("http://localhost:{port}")
}

/// Every page of the dashboard, as the screenshots name them (`status-banner`: a page with
/// the banner of what is down).
const PAGES: [&str; 15] = [
    "signin",
    "workloads",
    "status-banner",
    "launch",
    "workload",
    "logs",
    "machines",
    "tokens",
    "keys",
    "usage",
    "usage-tokens",
    "activity",
    "users",
    "join",
    "quotas",
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
    // The member the browser invited joined, and the owner disabled them there.
    let member = result["member"].as_str().unwrap();
    let users = call(&solo, &owner.session, "GET", "/v1/users", None).json();
    let joined = users["users"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["email"] == member)
        .unwrap_or_else(|| panic!("{member} joined: {users}"));
    assert_eq!(joined["role"], "member", "{joined}");
    assert!(joined["disabled_at"].is_string(), "{joined}");
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
