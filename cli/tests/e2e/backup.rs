//! `einsora backup` and `einsora restore` between real installations: a Solo (SQLite) with an
//! owner, a token, workloads, their timelines and usage, backed up while it runs, restored
//! into a new installation on Postgres, which answers the API exactly as the first did, the
//! same token and password working; then backed up from there and restored into SQLite, the
//! same again. A target that isn't empty and an archive from a newer einsora are each refused
//! with one line, and nothing of them is written.

use std::path::Path;

use einsora_testkit::{TempPostgres, eventually_or};
use serde_json::Value;

use crate::harness::solo::{OWNER_EMAIL, OWNER_PASSWORD, Solo};
use crate::harness::support::{Einsora, stderr};
use crate::harness::workloads::{Owner, act, create, wait_for};
use crate::harness::world::{Credential, call, login};

/// Every usage record there is.
const USAGE: &str = "/v1/usage?from=2000-01-01T00:00:00Z&to=2100-01-01T00:00:00Z";

/// What the API says of everything restored, read with the owner's token: `ids` are live
/// workloads (a deleted one is 404, and its usage in the usage answer).
fn answers(solo: &Solo, token: &Credential, ids: &[String]) -> Vec<(String, Value)> {
    let mut paths = vec![
        "/v1/me".to_owned(),
        "/v1/workloads".to_owned(),
        USAGE.to_owned(),
    ];
    for id in ids {
        paths.push(format!("/v1/workloads/{id}"));
        paths.push(format!("/v1/workloads/{id}/events"));
    }
    paths
        .into_iter()
        .map(|path| {
            let answer = call(solo, token, "GET", &path, None);
            assert_eq!(answer.status, 200, "{path}: {}", answer.body);
            (path, answer.json())
        })
        .collect()
}

fn backup(solo: &Solo, env: &[(&str, &str)], to: &Path) {
    let out = solo.e.run(&["backup", "--to", to.to_str().unwrap()], env);
    assert!(out.status.success(), "backup: {}", stderr(&out));
    let mode = std::fs::metadata(to).unwrap().permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o600,
        "owner-only"
    );
}

fn restore(e: &Einsora, database: &str, from: &Path) -> std::process::Output {
    let env = [("EINSORA_DATABASE_URL", database)];
    e.run(&["restore", "--from", from.to_str().unwrap()], &env)
}

#[test]
fn a_solo_install_moves_to_postgres_and_back_with_the_same_answers() {
    let solo = Solo::start(&[("EINSORA_METERING_INTERVAL", "200ms")]);
    let owner = Owner::of(&solo);
    let who = &owner.session;
    let id = |made: (u16, Value)| made.1["id"].as_str().unwrap().to_owned();
    let ids = [
        id(create(&solo, who, "kept", "cpu-1c-2g")),
        id(create(&solo, who, "gone", "cpu-1c-2g")),
    ];
    for w in &ids {
        wait_for(&solo, who, w, "running");
    }
    // A few seconds of use to meter; then nothing runs in the archive (the fake backend of a
    // new installation has nothing).
    std::thread::sleep(std::time::Duration::from_secs(3));
    act(&solo, who, &ids[0], "stop");
    act(&solo, who, &ids[1], "delete");
    wait_for(&solo, who, &ids[0], "stopped");
    wait_for(&solo, who, &ids[1], "deleted");
    let token = Credential::Token(owner.token.clone());
    let usage = || call(&solo, &token, "GET", USAGE, None).json();
    // Metered to the end: records there, and no longer changing (metering every 200 ms).
    eventually_or(
        "usage recorded to the end",
        std::time::Duration::from_secs(30),
        || {
            let first = usage();
            std::thread::sleep(std::time::Duration::from_secs(1));
            let recorded = first["records"].as_array().is_some_and(|r| r.len() == 2);
            (recorded && usage() == first).then_some(())
        },
        || usage().to_string(),
    );
    let before = answers(&solo, &token, &ids[..1]);

    let archives = tempfile::tempdir().unwrap();
    let first = archives.path().join("solo.backup");
    backup(&solo, &[], &first);

    // Into Postgres: a new installation, empty.
    let pg = TempPostgres::shared().fresh_database().unwrap();
    let lab = Einsora::new();
    let out = restore(&lab, &pg, &first);
    assert!(out.status.success(), "restore: {}", stderr(&out));
    let lab = Solo::resume(lab, pg.clone(), &[]);
    assert_eq!(
        answers(&lab, &token, &ids[..1]),
        before,
        "the same answers on Postgres"
    );
    login(&lab, OWNER_EMAIL, OWNER_PASSWORD);

    // And back into SQLite.
    let second = archives.path().join("lab.backup");
    backup(&lab, &[("EINSORA_DATABASE_URL", pg.as_str())], &second);
    let again = Einsora::new();
    let sqlite = format!("sqlite:{}", again.db().display());
    let out = restore(&again, &sqlite, &second);
    assert!(out.status.success(), "restore: {}", stderr(&out));
    let again = Solo::resume(again, sqlite.clone(), &[]);
    assert_eq!(
        answers(&again, &token, &ids[..1]),
        before,
        "the same answers on SQLite"
    );

    // Into an installation that isn't empty: one line, nothing written.
    let out = restore(&again.e, &sqlite, &first);
    let said = stderr(&out);
    assert!(!out.status.success());
    assert_eq!(said.trim().lines().count(), 1, "{said}");
    assert!(said.contains("isn't empty"), "{said}");

    // From a newer einsora: one line, nothing written.
    let text = std::fs::read_to_string(&first).unwrap();
    let newer = archives.path().join("newer.backup");
    std::fs::write(
        &newer,
        text.replacen("\"einsora_backup\":1,", "\"einsora_backup\":2,", 1),
    )
    .unwrap();
    let fresh = Einsora::new();
    let target = format!("sqlite:{}", fresh.db().display());
    let out = restore(&fresh, &target, &newer);
    let said = stderr(&out);
    assert!(!out.status.success());
    assert_eq!(said.trim().lines().count(), 1, "{said}");
    assert!(said.contains("newer than this einsora reads"), "{said}");
    assert!(!fresh.db().exists() && !fresh.dir().join("pki").exists());
}
