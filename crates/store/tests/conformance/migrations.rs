use einsora_store::StoreError;

use crate::harness::TestDb;

pub async fn applied_twice_changes_nothing(db: TestDb) {
    let again = db.store.migrate().await.unwrap();
    assert!(again.applied.is_empty(), "{again:?}");
    assert!(again.version >= 1);
    let reopened = einsora_store::open(&db.url).await.unwrap();
    let third = reopened.migrate().await.unwrap();
    assert_eq!(third, again);
}

/// A database migrated by a newer einsora is refused at open and at migrate, writing nothing.
pub async fn newer_database_is_refused(db: TestDb) {
    let version = db.store.migrate().await.unwrap().version;
    let newer = version + 100;
    mark_applied(&db, newer).await;
    let err = einsora_store::open(&db.url).await.unwrap_err();
    assert!(
        matches!(err, StoreError::DatabaseNewer { found, known } if found == newer && known == version),
        "{err}"
    );
    assert!(err.to_string().contains("upgrade einsora"), "{err}");
    let err = db.store.migrate().await.unwrap_err();
    assert!(matches!(err, StoreError::DatabaseNewer { .. }), "{err}");
}

/// Records a migration this binary doesn't have, as a newer einsora would.
async fn mark_applied(db: &TestDb, version: i64) {
    let sql = format!(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES ({version}, 'from the future', TRUE, X'00', 0)"
    );
    match &db.url {
        einsora_store::DatabaseUrl::Sqlite { path } => {
            let status = std::process::Command::new("sqlite3")
                .arg(path)
                .arg(&sql)
                .status()
                .unwrap();
            assert!(status.success());
        }
        einsora_store::DatabaseUrl::Postgres { url, .. } => {
            let sql = sql.replace("X'00'", "'\\x00'::bytea");
            let status = std::process::Command::new("psql")
                .args([url.as_str(), "-q", "-v", "ON_ERROR_STOP=1", "-c", &sql])
                .status()
                .unwrap();
            assert!(status.success());
        }
    }
}
