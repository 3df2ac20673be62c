//! Bad configuration is one clear error naming the setting or entry, a non-zero exit, and
//! nothing written.

use std::process::Command;

use einsora_testkit::Port;

use crate::harness::support::{Einsora, dump, stderr};

#[test]
fn a_malformed_database_url_names_the_setting_and_hides_the_password() {
    let e = Einsora::new();
    for url in [
        "mysql://admin:hunter2@db/einsora",
        "not a url",
        "sqlite:",
        "postgres://admin:hunter2@db:http/x",
    ] {
        let out = e.run(&["migrate"], &[("EINSORA_DATABASE_URL", url)]);
        let err = stderr(&out);
        assert!(!out.status.success(), "{url}: {err}");
        assert!(
            err.starts_with("einsora: EINSORA_DATABASE_URL: "),
            "{url}: {err}"
        );
        assert!(!err.contains("hunter2"), "{err}");
        assert_eq!(err.lines().count(), 1, "one error: {err}");
    }
    assert!(!e.db().exists(), "nothing written");
}

#[test]
fn an_unreachable_postgres_names_the_setting_and_the_cause() {
    let e = Einsora::new();
    // Held, and nothing listens on it: connecting is refused.
    let nobody = Port::loopback();
    let url = format!("postgres://admin:hunter2@{nobody}/einsora");
    let out = e.run(&["migrate"], &[("EINSORA_DATABASE_URL", &url)]);
    let err = stderr(&out);
    assert!(!out.status.success());
    assert!(
        err.contains("EINSORA_DATABASE_URL: can't reach Postgres at postgres://admin:***@"),
        "{err}"
    );
    assert!(err.contains("refused"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
}

#[test]
fn a_database_newer_than_the_binary_is_refused_untouched() {
    let e = Einsora::new();
    assert!(e.run(&["migrate"], &[]).status.success());
    let status = Command::new("sqlite3")
        .arg(e.db())
        .arg(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, \
             execution_time) VALUES (9999, 'from the future', 1, X'00', 0)",
        )
        .status()
        .unwrap();
    assert!(status.success());
    let before = dump(&e.db());
    let api = Port::loopback();
    for role in ["migrate", "api"] {
        let out = e.run(&[role], &[("EINSORA_API_ADDR", &api.to_string())]);
        let err = stderr(&out);
        assert!(!out.status.success(), "{role}: {err}");
        assert!(
            err.contains("the database has migration 9999, newer than this einsora knows"),
            "{err}"
        );
    }
    assert_eq!(dump(&e.db()), before, "nothing written");
}

#[test]
fn a_malformed_catalog_names_the_entry_and_nothing_starts() {
    let e = Einsora::new();
    let catalog = e.dir().join("catalog.yaml");
    let builtin = include_str!("../../../catalog/catalog.yaml");
    let broken = builtin.replacen("name: cpu-4c-16g", "name: cpu-1c-2g", 1);
    assert_ne!(broken, builtin, "the test must actually break the catalog");
    std::fs::write(&catalog, broken).unwrap();
    let catalog = catalog.to_str().unwrap();
    for role in ["api", "controller"] {
        let out = e.run(&[role], &[("EINSORA_CATALOG", catalog)]);
        let err = stderr(&out);
        assert!(!out.status.success(), "{role}: {err}");
        assert!(err.contains("EINSORA_CATALOG"), "{err}");
        assert!(err.contains("class \"cpu-1c-2g\""), "{err}");
    }
    let missing = e.run(
        &["controller"],
        &[("EINSORA_CATALOG", "/nonexistent/catalog.yaml")],
    );
    assert!(
        stderr(&missing).contains("/nonexistent/catalog.yaml"),
        "{}",
        stderr(&missing)
    );
    assert!(
        !e.db().exists() && !e.dir().join("pki").exists(),
        "nothing written"
    );
}

#[test]
fn bad_settings_are_refused_before_anything_is_written() {
    let e = Einsora::new();
    let cases = [
        ("api", "EINSORA_API_ADDR", "localhost"),
        ("controller", "EINSORA_CONTROLLER_INTERVAL", "soon"),
        ("controller", "EINSORA_CLUSTER_BACKEND", "nomad"),
        ("controller", "EINSORA_REGION", "mars"),
        ("gateway", "EINSORA_HTTP_ADDR", "8080"),
        ("access", "EINSORA_ACCESS_URL", "ftp://x"),
    ];
    for (role, setting, value) in cases {
        let out = e.run(&[role], &[(setting, value)]);
        let err = stderr(&out);
        assert!(!out.status.success(), "{setting}={value}: {err}");
        assert!(err.starts_with(&format!("einsora: {setting}: ")), "{err}");
    }
    assert_eq!(
        std::fs::read_dir(e.dir()).unwrap().count(),
        0,
        "nothing written"
    );
}

#[test]
fn a_role_without_certificates_says_how_to_make_them() {
    let e = Einsora::new();
    assert!(e.run(&["migrate"], &[]).status.success());
    let api = Port::loopback();
    let out = e.run(&["api"], &[("EINSORA_API_ADDR", &api.to_string())]);
    let err = stderr(&out);
    assert!(!out.status.success());
    assert!(err.contains("EINSORA_PKI_DIR: "), "{err}");
    assert!(err.contains("run `einsora pki init`"), "{err}");
    assert!(
        !e.dir().join("pki").join("ca.key").exists(),
        "a role created a CA"
    );
}

#[test]
fn a_role_refuses_a_database_that_was_never_migrated() {
    let e = Einsora::new();
    assert!(e.run(&["pki", "init"], &[]).status.success());
    let api = Port::loopback();
    let out = e.run(&["api"], &[("EINSORA_API_ADDR", &api.to_string())]);
    let err = stderr(&out);
    assert!(!out.status.success());
    assert!(err.contains("run `einsora migrate`"), "{err}");
    assert!(!e.db().exists(), "a role created the database");
}
