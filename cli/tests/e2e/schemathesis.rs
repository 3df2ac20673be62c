//! schemathesis against the OpenAPI document the gateway serves, on the real api: up to 100
//! examples per operation (`--max-examples` is a ceiling: Hypothesis stops sooner where an
//! operation has few distinct inputs), every check, zero failures (no 5xx, no answer outside
//! the schema, no schema-valid request refused, no invalid one accepted), and every operation
//! the config selects tested.

use std::process::Command;

use crate::harness::solo::Solo;
use crate::harness::world::{Credential, tenant};

/// Calls hooks.py's `filter_failure` with schemathesis's own failures; prints one line per
/// failure: `dropped` or `kept`.
const HOOK_CHECK: &str = r#"
import importlib.util, sys
from types import SimpleNamespace
from schemathesis.core.failures import ServerError
from schemathesis.openapi.checks import UseAfterFree
spec = importlib.util.spec_from_file_location("hooks", sys.argv[1])
hooks = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hooks)
def uaf(operation, free, usage):
    return UseAfterFree(operation=operation, message="", free=free, usage=usage)
def case(label):
    method, path = label.split(" ", 1)
    return SimpleNamespace(operation=SimpleNamespace(label=label, method=method, path=path))
w = "DELETE /v1/workloads/{id}"
# Each failure, with the operation of the case it was found on.
for failure, on in [
    (uaf(w, "DELETE /v1/workloads/w1", "GET /v1/workloads/w1"), "GET /v1/workloads/{id}"),
    (uaf(w, "DELETE /v1/workloads/w1", "GET /v1/workloads/w1/events"), "GET /v1/workloads/{id}/events"),
    (uaf(w, "DELETE /v1/workloads/w1", "PATCH /v1/workloads/w1"), "PATCH /v1/workloads/{id}"),
    (uaf(w, "DELETE /v1/workloads/w1", "GET /v1/workloads/w10"), "GET /v1/workloads/{id}"),
    (uaf("DELETE /v1/tokens/{id}", "DELETE /v1/tokens/t1", "GET /v1/tokens/t1"), "GET /v1/tokens/{id}"),
    (ServerError(operation="GET /v1/workloads/{id}", status_code=500), "GET /v1/workloads/{id}"),
]:
    kept = hooks.filter_failure(None, failure, case(on), None)
    print(failure.code, getattr(failure, "usage", on), "kept" if kept else "dropped")
"#;

/// The hook drops one finding only: a read of a workload after its own DELETE (it stays
/// readable as `deleting`, then `deleted`). Another operation's use after free, a write after
/// the DELETE, another workload's read, any other check's failure: each is kept.
#[test]
fn schemathesis_hook_drops_only_a_workloads_read_after_its_delete() {
    let program = std::env::var("EINSORA_SCHEMATHESIS").unwrap_or_else(|_| {
        panic!("EINSORA_SCHEMATHESIS is not set: run ./scripts/test, which installs schemathesis")
    });
    // The Python of schemathesis's own environment, beside it.
    let python = std::path::Path::new(&program).with_file_name("python");
    let hooks = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../gateway/tests/schemathesis/hooks.py");
    let out = Command::new(&python)
        .args(["-c", HOOK_CHECK])
        .arg(&hooks)
        .env("EINSORA_TOKEN", "unused")
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", python.display()));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let verdicts: Vec<&str> = said.lines().collect();
    assert_eq!(
        verdicts,
        [
            "ST301 GET /v1/workloads/w1 dropped",
            "ST301 GET /v1/workloads/w1/events dropped",
            "ST301 PATCH /v1/workloads/w1 kept",
            "ST301 GET /v1/workloads/w10 kept",
            "ST301 GET /v1/tokens/t1 kept",
            "ST101 GET /v1/workloads/{id} kept",
        ]
    );
}

#[test]
fn schemathesis_finds_nothing() {
    let program = std::env::var("EINSORA_SCHEMATHESIS").unwrap_or_else(|_| {
        panic!("EINSORA_SCHEMATHESIS is not set: run ./scripts/test, which installs schemathesis")
    });
    let solo = Solo::start(&[("EINSORA_AUTH_MODE", "dev")]);
    let acme = tenant(&solo, "dev@acme");
    let Credential::Token(token) = &acme.token else {
        unreachable!()
    };
    // The config says the token belongs to the document's `bearer` scheme, leaves out the two
    // operations that would end the run's own credential (the attacks tests cover them), and
    // names hooks.py, which keeps generated valid cases within the rules an OpenAPI document
    // can't state (cross-field and catalog rules); its paths are relative to the workspace.
    let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap();
    let config = workspace.join("gateway/tests/schemathesis/schemathesis.toml");
    let out = Command::new(program)
        .env("EINSORA_TOKEN", token)
        .current_dir(workspace)
        .args(["--config-file", config.to_str().unwrap(), "run"])
        .arg(format!("http://{}/v1/openapi.json", solo.http))
        .args([
            "--checks",
            "all",
            "--max-examples",
            "100",
            "--seed",
            "1",
            "--no-color",
        ])
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    let summary = report.rsplit("SUMMARY").next().unwrap_or(&report);
    eprintln!("schemathesis summary:{summary}");
    assert!(
        out.status.success(),
        "schemathesis found problems:\n{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The summary's counts: every selected operation tested, each with cases of its own.
    let selected = summary_count(summary, "Selected: ");
    let total = summary_count(
        summary,
        "Selected: ".to_owned() + &selected.to_string() + "/",
    );
    let tested = summary_count(summary, "Tested: ");
    let generated = summary_count(summary, "Test cases:\n  ");
    assert!(selected > 0, "no operation was selected:\n{summary}");
    assert_eq!(
        selected,
        total - DISABLED,
        "all operations but the config's {DISABLED}:\n{summary}"
    );
    assert_eq!(tested, selected, "an operation went untested:\n{summary}");
    assert!(
        generated >= 10 * selected,
        "{generated} cases for {selected} operations:\n{summary}"
    );
}

/// The operations schemathesis.toml leaves out.
const DISABLED: u64 = 2;

/// The number that follows `label` in schemathesis's summary.
fn summary_count(summary: &str, label: impl AsRef<str>) -> u64 {
    let label = label.as_ref();
    let (_, after) = summary
        .split_once(label)
        .unwrap_or_else(|| panic!("no {label:?} in the summary:\n{summary}"));
    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("no number after {label:?} in the summary:\n{summary}"))
}
