use einsora_store::{DatabaseUrl, StoreError};

use crate::harness::TestDb;

pub async fn applied_twice_changes_nothing(db: TestDb) {
    let again = db.store.migrate().await.unwrap();
    assert!(again.applied.is_empty(), "{again:?}");
    assert!(again.version >= 1);
    let (_, third) = einsora_store::migrate(&db.url).await.unwrap();
    assert_eq!(third, again);
    einsora_store::open(&db.url).await.unwrap();
}

/// Roles open only a database at this binary's version: a missing or older one asks for
/// `einsora migrate`, and opening it creates nothing.
pub async fn older_or_missing_database_is_refused(db: TestDb) {
    let fresh = match &db.url {
        DatabaseUrl::Sqlite { path } => {
            let missing = path.with_file_name("missing.db");
            let url = DatabaseUrl::parse(&format!("sqlite:{}", missing.display())).unwrap();
            let err = einsora_store::open(&url).await.unwrap_err();
            assert!(err.to_string().contains("run `einsora migrate`"), "{err}");
            assert!(!missing.exists(), "opening created the file");
            let empty = path.with_file_name("empty.db");
            std::fs::File::create(&empty).unwrap();
            DatabaseUrl::parse(&format!("sqlite:{}", empty.display())).unwrap()
        }
        DatabaseUrl::Postgres { .. } => {
            let url = einsora_testkit::TempPostgres::shared()
                .fresh_database()
                .unwrap();
            DatabaseUrl::parse(&url).unwrap()
        }
    };
    let err = einsora_store::open(&fresh).await.unwrap_err();
    assert!(
        matches!(err, StoreError::DatabaseOlder { found: 0, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("run `einsora migrate`"), "{err}");
    let (_, report) = einsora_store::migrate(&fresh).await.unwrap();
    assert_eq!(report.applied.len() as i64, report.version);
    einsora_store::open(&fresh).await.unwrap();
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
    let err = einsora_store::migrate(&db.url).await.unwrap_err();
    assert!(matches!(err, StoreError::DatabaseNewer { .. }), "{err}");
}

/// Records a migration this binary doesn't have, as a newer einsora would.
async fn mark_applied(db: &TestDb, version: i64) {
    let sql = format!(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES ({version}, 'from the future', TRUE, X'00', 0)"
    );
    let sql = match &db.url {
        einsora_store::DatabaseUrl::Sqlite { .. } => sql,
        einsora_store::DatabaseUrl::Postgres { .. } => sql.replace("X'00'", "'\\x00'::bytea"),
    };
    db.execute(&sql);
}
