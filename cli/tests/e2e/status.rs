//! `einsora status` and `GET /v1/status`: every role up and the region led on a fresh
//! installation; a role that stops answering is DOWN (and the command exits non-zero) until it
//! answers again.

use std::time::Duration;

use einsora_testkit::eventually_or;

use crate::harness::cli::Cli;
use crate::harness::notebooks::token;
use crate::harness::solo::Solo;
use crate::harness::support::signal;
use crate::harness::world::tenant;

/// Longer than the api keeps an answer (2 s) and a role's time to answer (2 s).
const PATIENCE: Duration = Duration::from_secs(30);

#[test]
fn status_says_what_answers_and_what_does_not() {
    let solo = Solo::start(&[("EINSORA_AUTH_MODE", "dev")]);
    let acme = tenant(&solo, "dev@acme");
    let cli = Cli::with_token(&solo, token(&acme));
    let all_up = eventually_or(
        "every role up and the region led",
        PATIENCE,
        || {
            let out = cli.run(&["status"], None);
            out.status
                .success()
                .then(|| String::from_utf8(out.stdout).unwrap())
        },
        || String::from_utf8_lossy(&cli.run(&["status"], None).stdout).into_owned(),
    );
    for role in [
        "gateway",
        "api",
        "store",
        "controller",
        "metering",
        "access",
        "region local",
    ] {
        let line = all_up
            .lines()
            .find(|l| l.starts_with(role))
            .unwrap_or_default();
        assert!(line.contains(" up "), "{role}: {all_up}");
    }
    assert!(all_up.contains("workloads: none"), "{all_up}");
    let json = cli.json(&["status"]);
    assert_eq!(json["roles"].as_array().unwrap().len(), 7, "{json}");

    // Metering stopped in its tracks (not exited: `up` would start it again).
    let metering = solo.child("metering").expect("up runs metering");
    signal(metering, "STOP");
    let down = eventually_or(
        "metering reported down",
        PATIENCE,
        || {
            let out = cli.run(&["status"], None);
            let text = String::from_utf8(out.stdout).unwrap();
            let line = text.lines().find(|l| l.starts_with("metering"))?.to_owned();
            (line.contains("DOWN") && !out.status.success()).then_some(line)
        },
        || String::from_utf8_lossy(&cli.run(&["status"], None).stdout).into_owned(),
    );
    assert!(down.contains("not answering"), "{down}");
    signal(metering, "CONT");
    eventually_or(
        "metering back up",
        PATIENCE,
        || cli.run(&["status"], None).status.success().then_some(()),
        || String::from_utf8_lossy(&cli.run(&["status"], None).stdout).into_owned(),
    );
}
