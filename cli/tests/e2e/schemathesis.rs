//! schemathesis against the OpenAPI document the gateway serves, on the real api: at least 100
//! examples per operation, every check, zero failures (no 5xx, no answer outside the schema, no
//! schema-valid request refused, no invalid one accepted).

use std::process::Command;

use crate::solo::Solo;
use crate::world::{Credential, tenant};

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
    assert!(report.contains("generated"), "no test cases ran:\n{report}");
}
