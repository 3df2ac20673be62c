//! The embedded migrations (migrations/sqlite and migrations/postgres share their numbering).

use sqlx::migrate::{MigrateError, Migrator};

use crate::StoreError;

pub(crate) static SQLITE: Migrator = sqlx::migrate!("../../migrations/sqlite");
pub(crate) static POSTGRES: Migrator = sqlx::migrate!("../../migrations/postgres");

/// What `migrate` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationReport {
    /// Versions applied by this call.
    pub applied: Vec<i64>,
    /// The database's version afterwards.
    pub version: i64,
}

pub(crate) fn latest(migrator: &Migrator) -> i64 {
    migrator.iter().map(|m| m.version).max().unwrap_or(0)
}

/// Refuses a database that has migrations this binary doesn't know.
pub(crate) fn check_not_newer(migrator: &Migrator, applied: Option<i64>) -> Result<(), StoreError> {
    let known = latest(migrator);
    match applied {
        Some(found) if found > known => Err(StoreError::DatabaseNewer { found, known }),
        _ => Ok(()),
    }
}

pub(crate) fn map_error(migrator: &Migrator, err: MigrateError) -> StoreError {
    match err {
        MigrateError::VersionMissing(found) => StoreError::DatabaseNewer {
            found,
            known: latest(migrator),
        },
        MigrateError::Execute(e) => StoreError::from(e),
        other => StoreError::Migration(other.to_string()),
    }
}

pub(crate) fn report(before: Option<i64>, after: Option<i64>) -> MigrationReport {
    let before = before.unwrap_or(0);
    let version = after.unwrap_or(0);
    MigrationReport {
        applied: ((before + 1)..=version).collect(),
        version,
    }
}
