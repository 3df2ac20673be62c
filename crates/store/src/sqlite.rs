//! SQLite (Solo): WAL, a busy timeout, foreign keys. All of this process's writes go through one
//! connection behind a lock, transactions with `BEGIN IMMEDIATE`, so writers queue here instead
//! of spinning on SQLITE_BUSY (and skip the pool's acquire and release, which cost more than a
//! write); reads use a pool of their own. Other processes' commits reach the change signal through
//! `PRAGMA data_version`.

use std::sync::Arc;
use std::time::Duration;

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{Connection, Sqlite, SqliteConnection};
use tokio::sync::{Mutex, MutexGuard};
use tokio::task::JoinHandle;

use crate::changes::ChangeSender;
use crate::{DatabaseUrl, Purpose, StoreError};

type Db = Sqlite;
type ThisStore = SqliteStore;
static MIGRATOR: &sqlx::migrate::Migrator = &crate::migrations::SQLITE;

/// SQLite serialises writers itself: the row locks Postgres needs are implied.
macro_rules! for_update {
    () => {
        ""
    };
}
macro_rules! for_share {
    () => {
        ""
    };
}

/// Takes the write lock of the database at once, so a transaction that reads before it writes
/// (quota) can't be overtaken by another process's writer.
async fn begin_write(conn: &mut SqliteConnection) -> Result<sqlx::Transaction<'_, Db>, StoreError> {
    Ok(conn.begin_with("BEGIN IMMEDIATE").await?)
}

/// How often another process's commits are looked for.
const DATA_VERSION_POLL: Duration = Duration::from_millis(25);
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
const READERS: u32 = 8;

#[derive(Debug)]
pub struct SqliteStore {
    writer: Mutex<SqliteConnection>,
    reader: SqlitePool,
    changes: Arc<ChangeSender>,
    watcher: JoinHandle<()>,
}

impl SqliteStore {
    pub(crate) async fn open(url: &DatabaseUrl, purpose: Purpose) -> Result<Self, StoreError> {
        let DatabaseUrl::Sqlite { path } = url else {
            return Err(StoreError::Config {
                setting: crate::DATABASE_URL_SETTING,
                problem: format!("{url} is not a SQLite URL"),
            });
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
            && !dir.is_dir()
        {
            return Err(StoreError::Config {
                setting: crate::DATABASE_URL_SETTING,
                problem: format!("the directory {} does not exist", dir.display()),
            });
        }
        if purpose == Purpose::Use && !path.exists() {
            return Err(StoreError::Config {
                setting: crate::DATABASE_URL_SETTING,
                problem: format!(
                    "there is no database at {}: run `einsora migrate`",
                    path.display()
                ),
            });
        }
        let options = connect_options(path, purpose);
        let writer = SqliteConnection::connect_with(&options)
            .await
            .map_err(|e| open_error(url, e))?;
        // A local file: a broken connection shows as an error on use, so no ping per acquire.
        let reader = SqlitePoolOptions::new()
            .max_connections(READERS)
            .test_before_acquire(false)
            .connect_with(options.clone())
            .await
            .map_err(|e| open_error(url, e))?;
        let changes = Arc::new(ChangeSender::new());
        let watch_conn = SqliteConnection::connect_with(&options)
            .await
            .map_err(|e| open_error(url, e))?;
        let watcher = tokio::spawn(watch_data_version(watch_conn, Arc::clone(&changes)));
        let store = SqliteStore {
            writer: Mutex::new(writer),
            reader,
            changes,
            watcher,
        };
        Ok(store)
    }

    async fn writer(&self) -> Result<MutexGuard<'_, SqliteConnection>, StoreError> {
        Ok(self.writer.lock().await)
    }

    /// The controller's lifecycle steps write on the one writer, as everything else does.
    async fn step_writer(&self) -> Result<MutexGuard<'_, SqliteConnection>, StoreError> {
        self.writer().await
    }

    fn reader(&self) -> &SqlitePool {
        &self.reader
    }

    /// This process's own commits wake waiters at once, without waiting for the poll.
    fn committed(&self) {
        self.changes.bump();
    }
}

#[async_trait::async_trait]
impl crate::Backend for SqliteStore {
    fn migrator(&self) -> &'static sqlx::migrate::Migrator {
        MIGRATOR
    }

    async fn applied_version(&self) -> Result<Option<i64>, StoreError> {
        let exists: Option<i64> = sqlx::query_scalar(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'",
        )
        .fetch_optional(&self.reader)
        .await?;
        if exists.is_none() {
            return Ok(None);
        }
        Ok(
            sqlx::query_scalar("SELECT MAX(version) FROM _sqlx_migrations WHERE success")
                .fetch_one(&self.reader)
                .await?,
        )
    }
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        self.watcher.abort();
    }
}

/// How every connection to the file is made.
pub(crate) fn connect_options(path: &std::path::Path, purpose: Purpose) -> SqliteConnectOptions {
    SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(purpose == Purpose::Migrate)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(BUSY_TIMEOUT)
        .foreign_keys(true)
}

pub(crate) fn open_error(url: &DatabaseUrl, err: sqlx::Error) -> StoreError {
    StoreError::Config {
        setting: crate::DATABASE_URL_SETTING,
        problem: format!("can't open {url}: {err}"),
    }
}

/// `PRAGMA data_version` changes on this connection whenever another connection commits.
async fn watch_data_version(mut conn: sqlx::SqliteConnection, changes: Arc<ChangeSender>) {
    let mut last: Option<i64> = None;
    let mut tick = tokio::time::interval(DATA_VERSION_POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match sqlx::query_scalar::<_, i64>("PRAGMA data_version")
            .fetch_one(&mut conn)
            .await
        {
            Ok(v) => {
                if last.is_some_and(|l| l != v) {
                    changes.bump();
                }
                last = Some(v);
            }
            Err(e) => tracing::warn!(error = %e, "couldn't read SQLite's data_version"),
        }
    }
}

/// The queries both engines share, compiled here against SQLite.
mod shared {
    use super::{Db, MIGRATOR, ThisStore, begin_write};
    include!("shared/prelude.rs");
}
