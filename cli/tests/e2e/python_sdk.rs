//! The Python SDK (clients/python): generated from the committed OpenAPI document, and its own
//! tests (`python3 -m unittest discover clients/python/tests`) passing against a live
//! `einsora dev` with a sim agent: a notebook created, running, opened, stopped, started and
//! deleted; errors as typed exceptions carrying the answer's request ID; tokens and usage.
//!
//! After a change to docs/openapi.json, regenerate the SDK with
//! `EINSORA_UPDATE_PYTHON_SDK=1 cargo test -p einsora --test e2e python_sdk_is_generated` (or
//! `python3 clients/python/generate.py`) and commit it.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use einsora_testkit::Port;

use crate::harness::cli::dev_password;
use crate::harness::notebooks::token;
use crate::harness::solo::Solo;
use crate::harness::support::Einsora;
use crate::harness::world::tenant;

fn sdk() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../clients/python"))
}

/// `python3 -m unittest <args>` in the SDK's tests directory, with `env`; none of the client
/// settings of whoever runs the tests (the SDK reads EINSORA_SERVER and EINSORA_TOKEN too).
fn unittest(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new("python3")
        .args(["-m", "unittest"])
        .args(args)
        .current_dir(sdk().join("tests"))
        .env_remove("EINSORA_SERVER")
        .env_remove("EINSORA_TOKEN")
        .env_remove("EINSORA_HTTP_ADDR")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("python3 runs (scripts/test installs it)")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The drift check: the generated models and operations, and the package version, are what
/// generate.py makes of docs/openapi.json and the workspace version (EINSORA_UPDATE_PYTHON_SDK=1,
/// which the Python test reads, writes them first).
#[test]
fn python_sdk_is_generated_from_the_committed_document() {
    let out = unittest(&["-v", "test_generated"], &[]);
    let output = text(&out);
    assert!(out.status.success(), "{output}");
    let drift = output
        .lines()
        .find(|l| l.starts_with("test_the_generated_code_is_what_the_committed_document_gives"))
        .unwrap_or_default();
    assert!(drift.ends_with("... ok"), "{output}");
}

#[test]
fn python_sdk_tests_pass_against_a_live_einsora_dev() {
    let e = Einsora::new();
    let ports = (Port::loopback(), Port::loopback());
    let (http, access) = (ports.0.to_string(), ports.1.to_string());
    // `einsora dev` (dev accounts, a throwaway SQLite) with the local agent's sim driver, so
    // that a workload runs on a machine and can be opened through the access proxy.
    let env = [
        ("EINSORA_HTTP_ADDR", http.as_str()),
        ("EINSORA_ACCESS_ADDR", access.as_str()),
        ("EINSORA_CLUSTER_BACKEND", "agent"),
        ("EINSORA_AGENT_SIM", "true"),
        ("EINSORA_AGENT_DOCKER", "false"),
        ("EINSORA_AGENT_NATIVE", "off"),
    ];
    let dev = e
        .command(&["dev"], &env)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut solo = Solo::watch(e, dev, http, access, String::new());
    solo.hold(ports.0);
    solo.hold(ports.1);

    // acme's owner: an API token, and the password for the SDK's session tests.
    let acme = tenant(&solo, "dev@acme");
    let password = dev_password(&solo, "dev@acme");
    let server = format!("http://{}", solo.http);
    let out = unittest(
        &["discover", "-v", "-s", "."],
        &[
            ("EINSORA_SDK_TEST_SERVER", &server),
            ("EINSORA_SDK_TEST_TOKEN", token(&acme)),
            ("EINSORA_SDK_TEST_EMAIL", "dev@acme"),
            ("EINSORA_SDK_TEST_PASSWORD", &password),
            ("EINSORA_SDK_TEST_REQUIRE_LIVE", "1"),
        ],
    );
    let output = text(&out);
    assert!(
        out.status.success(),
        "the SDK's tests failed:\n{output}\n{}",
        solo.logs()
    );
    // The live tests ran and passed, every one (with EINSORA_SDK_TEST_REQUIRE_LIVE a missing
    // setting fails rather than skips).
    for test in [
        "test_a_notebook_is_created_runs_opens_stops_starts_and_is_deleted",
        "test_an_unknown_id_is_not_found_with_the_answer_s_request_id",
        "test_invalid_requests_are_invalid_request",
        "test_a_session_makes_a_token_that_works_until_revoked",
        "test_usage_is_read_as_records",
    ] {
        let line = output
            .lines()
            .find(|l| l.starts_with(test))
            .unwrap_or_default();
        assert!(line.ends_with("... ok"), "{test}:\n{output}");
    }
    let live: Vec<&str> = output
        .lines()
        .filter(|l| l.contains("(test_live."))
        .collect();
    assert!(live.len() >= 5, "{output}");
    assert!(live.iter().all(|l| l.ends_with("... ok")), "{output}");
    assert!(solo.stop().status.success());
}
