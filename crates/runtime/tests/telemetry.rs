//! `telemetry::init` installs once per process: its own binary, so no other test's subscriber
//! interferes.

// A test harness: a failed unwrap is a failed test, and it reads its own environment.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use einsora_runtime::settings::Settings;
use einsora_runtime::telemetry::{self, TelemetryOptions};

#[test]
fn json_lines_reach_the_log_file_and_a_second_init_is_harmless() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("data").join("einsora.log");
    let settings = Settings::from_map([("EINSORA_LOG", "debug")]);
    telemetry::init(TelemetryOptions::from_settings(&settings, Some(log.clone())).unwrap())
        .unwrap();
    tracing::info!(workload = "w-1", "first line");

    let elsewhere = dir.path().join("second.log");
    telemetry::init(TelemetryOptions::from_settings(&settings, Some(elsewhere)).unwrap()).unwrap();
    tracing::info!("second line");

    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() >= 2, "{text}");
    assert!(
        lines.iter().all(|l| l.starts_with('{') && l.ends_with('}')),
        "JSON lines: {text}"
    );
    assert!(lines[0].contains(r#""message":"first line""#), "{text}");
    assert!(lines[0].contains(r#""workload":"w-1""#), "{text}");
    assert!(
        text.contains("second line"),
        "the first subscriber stays: {text}"
    );
}

#[test]
fn a_bad_log_filter_names_the_setting() {
    let settings = Settings::from_map([("EINSORA_LOG", "info,=[")]);
    let err = TelemetryOptions::from_settings(&settings, None).unwrap_err();
    assert_eq!(err.setting(), "EINSORA_LOG");
    assert!(err.to_string().contains("is not a log filter"), "{err}");
}
