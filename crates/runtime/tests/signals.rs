//! `Shutdown::on_signals`, with a real SIGTERM sent to this test process (its own binary, so
//! no other test shares the signal).

// A test harness: a failed unwrap is a failed test, and it reads its own environment.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::time::Duration;

use einsora_runtime::shutdown::Shutdown;

#[tokio::test]
async fn sigterm_triggers_shutdown() {
    let shutdown = Shutdown::new();
    shutdown.on_signals().unwrap();
    let child = shutdown.child();
    assert!(!shutdown.is_triggered());

    let sent = std::process::Command::new("kill")
        .args(["-TERM", &std::process::id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());

    tokio::time::timeout(Duration::from_secs(10), child.cancelled())
        .await
        .expect("SIGTERM triggers the shutdown");
    assert!(shutdown.is_triggered());
}
