//! The CLI against a running api and gateway: log in with the password on stdin, launch, read
//! the timeline, act, make a token and use it, and fail with the request ID.

use serde_json::Value;

use crate::harness::cli::*;
use crate::harness::solo::{Engine, Solo};
use crate::harness::support::stderr;

#[test]
fn the_cli_drives_the_api_with_a_session_and_with_a_token_on_sqlite() {
    cli_flow(Engine::Sqlite);
}

#[test]
fn the_cli_drives_the_api_with_a_session_and_with_a_token_on_postgres() {
    cli_flow(Engine::Postgres);
}

fn cli_flow(engine: Engine) {
    let solo = Solo::start_on(engine, &[("EINSORA_AUTH_MODE", "dev")]);
    let cli = Cli::new(&solo, "acme");
    cli.login("dev@acme", &dev_password(&solo, "dev@acme"));

    let created = cli.launch_notebook("nb");
    let id = created["id"].as_str().unwrap().to_owned();
    assert_eq!(created["state"], "pending");
    let table = cli.ok(&["workloads"]);
    let header = table.lines().next().unwrap();
    assert!(
        header.starts_with("ID") && header.contains("STATE"),
        "{table}"
    );
    // The controller admits it at once: its state moves on from pending.
    assert!(table.contains(&id), "{table}");

    // Only a stopped or failed workload starts.
    let refused = cli.run(&["start", &id], None);
    assert!(!refused.status.success());
    let err = stderr(&refused);
    assert!(err.starts_with("einsora: invalid_transition: "), "{err}");
    assert!(
        err.contains("(request "),
        "errors carry the request ID: {err}"
    );

    cli.ok(&["delete", &id]);
    let reasons = |events: &Value| -> Vec<String> {
        let events = events["events"].as_array().unwrap();
        events
            .iter()
            .map(|e| e["reason"].as_str().unwrap().to_owned())
            .collect()
    };
    let timeline = reasons(&cli.json(&["events", &id]));
    assert_eq!(timeline[0], "created by dev@acme (CLI session)");
    assert!(
        timeline.contains(&"delete requested by dev@acme (CLI session)".to_owned()),
        "{timeline:?}"
    );
    // The controller removes it; its history stays.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while cli.json(&["workloads", "--all"])["workloads"][0]["state"] != "deleted" {
        assert!(std::time::Instant::now() < deadline, "never deleted");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let listed = cli.json(&["workloads"]);
    let gone = listed["workloads"].as_array().is_none_or(Vec::is_empty);
    assert!(
        gone,
        "a deleted workload is listed only on request: {listed}"
    );
    let made = cli.json(&["tokens", "create", "--name", "laptop"]);
    let token = made["token"].as_str().unwrap().to_owned();
    assert!(token.starts_with("tsk_"));
    let by_token = Cli::with_token(&solo, &token);
    let launched = by_token.json(&[
        "launch",
        "--kind",
        "notebook",
        "--name",
        "nb2",
        "--class",
        "cpu-1c-2g",
        "--image",
        "jupyterlab",
    ]);
    let id2 = launched["id"].as_str().unwrap();
    let prefix = &token[..8];
    let created_by = &by_token.json(&["events", id2])["events"][0]["reason"];
    assert_eq!(
        created_by,
        &format!("created by dev@acme (API token \"laptop\" ({prefix}…))")
    );
    let minted = by_token.run(&["tokens", "create", "--name", "again"], None);
    assert!(!minted.status.success(), "a token minted a token");
    assert!(stderr(&minted).contains("forbidden"), "{}", stderr(&minted));
    let listed = cli.ok(&["tokens", "list"]);
    assert!(listed.contains("laptop") && listed.contains(prefix) && !listed.contains(&token));

    let export = cli.json(&["export", &id]);
    assert_eq!(export["workload"]["id"], id.as_str());
    assert_eq!(reasons(&export), reasons(&cli.json(&["events", &id])));
    assert!(cli.ok(&["catalog"]).contains("cpu-1c-2g"));

    // Usage: the records, and the report summed by class or user, as a table, CSV or JSON
    // (with whatever metering has recorded by now).
    let period = [
        "--from",
        "2000-01-01T00:00:00Z",
        "--to",
        "2100-01-01T00:00:00Z",
    ];
    let with = |more: &[&'static str]| [&["usage"][..], &period, more].concat();
    assert!(cli.ok(&with(&[])).starts_with("HOUR"));
    let by_class = cli.ok(&with(&["--by", "class"]));
    assert!(
        by_class.starts_with("CLASS") && by_class.contains("UNIT HOURS"),
        "{by_class}"
    );
    let csv = cli.ok(&with(&["--by", "user", "--format", "csv"]));
    assert_eq!(
        csv.lines().next(),
        Some("group_id,label,placed_class,workloads,seconds,unit_seconds,unit_hours"),
        "{csv}"
    );
    let report = cli.json(&with(&["--by", "user"]));
    assert_eq!(report["by"], "user", "{report}");
    for row in report["rows"].as_array().unwrap() {
        assert_eq!(row["label"], "dev@acme", "only the user's own: {report}");
    }
    assert_eq!(
        csv.lines().count(),
        report["rows"].as_array().unwrap().len() + 1
    );
    // Tokens endpoints used: per hour, or summed over the period.
    let hourly = cli.ok(&with(&["--tokens", "hour"]));
    assert!(
        hourly.starts_with("HOUR") && hourly.contains("PROMPT TOKENS"),
        "{hourly}"
    );
    let summed = cli.ok(&with(&["--tokens", "range"]));
    assert!(summed.starts_with("ENDPOINT"), "{summed}");
    let tokens_csv = cli.ok(&with(&["--tokens", "hour", "--format", "csv"]));
    assert_eq!(
        tokens_csv.lines().next(),
        Some(
            "hour_start,tenant_id,endpoint_id,key_id,user_id,requests,prompt_tokens,completion_tokens"
        ),
        "{tokens_csv}"
    );
    assert!(cli.json(&with(&["--tokens", "range"]))["tokens"].is_array());
    let records_csv = cli.ok(&with(&["--format", "csv"]));
    assert!(
        records_csv.starts_with("hour_start,tenant_id,workload_id,"),
        "{records_csv}"
    );
    cli.ok(&["logout"]);
    let after = cli.run(&["workloads"], None);
    assert!(!after.status.success());
    assert!(
        stderr(&after).contains("unauthenticated"),
        "{}",
        stderr(&after)
    );
}
