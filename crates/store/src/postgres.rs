//! Postgres (Lab, Datacenter). Row locks serialise quota decisions and fence writes against a
//! lease takeover; the change signal is LISTEN/NOTIFY, fed by triggers on the tables.

use std::sync::Arc;
use std::time::Duration;

use std::str::FromStr;

use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPool, PgPoolOptions};
use sqlx::{Connection, PgConnection, Postgres};
use tokio::task::JoinHandle;

use crate::changes::ChangeSender;
use crate::held_connection::{HeldConnection, StepConnection};
use crate::{DatabaseUrl, StoreError};

type Db = Postgres;
type ThisStore = PostgresStore;
static MIGRATOR: &sqlx::migrate::Migrator = &crate::migrations::POSTGRES;

macro_rules! for_update {
    () => {
        " FOR UPDATE"
    };
}
macro_rules! for_share {
    () => {
        " FOR SHARE"
    };
}

async fn begin_write(conn: &mut PgConnection) -> Result<sqlx::Transaction<'_, Db>, StoreError> {
    Ok(conn.begin().await?)
}

const CHANNEL: &str = "einsora_changes";
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a query waits for a connection before the store answers `Unavailable`: while
/// Postgres is down the API says 503 within this, rather than hanging.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(1);
const MAX_CONNECTIONS: u32 = 32;

#[derive(Debug)]
pub struct PostgresStore {
    pool: PgPool,
    steps: HeldConnection,
    changes: Arc<ChangeSender>,
    listener: JoinHandle<()>,
}

impl PostgresStore {
    pub(crate) async fn open(url: &DatabaseUrl) -> Result<Self, StoreError> {
        let options = connect_options(url)?;
        // One connection first, so the error is the real one (refused, unknown host, bad
        // password) rather than the pool's time-out.
        connect_one(url).await?.close().await?;
        // No ping per acquire (a round trip per transaction): a broken connection fails its
        // query, which surfaces as `Unavailable`, and the pool replaces it.
        let pool = PgPoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .test_before_acquire(false)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_with(options)
            .await
            .map_err(|e| unreachable(url, e))?;
        let changes = Arc::new(ChangeSender::new());
        let mut listen = PgListener::connect_with(&pool).await?;
        listen.listen(CHANNEL).await?;
        let listener = tokio::spawn(forward_notifications(listen, Arc::clone(&changes)));
        let store = PostgresStore {
            pool,
            steps: HeldConnection::default(),
            changes,
            listener,
        };
        Ok(store)
    }

    async fn writer(&self) -> Result<PoolConnection<Postgres>, StoreError> {
        Ok(self.pool.acquire().await?)
    }

    /// Where the controller's lifecycle steps write (crate::held_connection).
    async fn step_writer(&self) -> Result<StepConnection<'_>, StoreError> {
        self.steps.take(&self.pool).await
    }

    fn reader(&self) -> &PgPool {
        &self.pool
    }

    /// Triggers notify every listener, this process's included.
    fn committed(&self) {}
}

#[async_trait::async_trait]
impl crate::Backend for PostgresStore {
    fn migrator(&self) -> &'static sqlx::migrate::Migrator {
        MIGRATOR
    }

    async fn applied_version(&self) -> Result<Option<i64>, StoreError> {
        let exists: bool = sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
            .fetch_one(&self.pool)
            .await?;
        if !exists {
            return Ok(None);
        }
        Ok(
            sqlx::query_scalar("SELECT MAX(version) FROM _sqlx_migrations WHERE success")
                .fetch_one(&self.pool)
                .await?,
        )
    }
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

/// Each notification wakes waiters; so does a lost connection, since notifications may have been
/// missed while it was down (the listener reconnects by itself).
async fn forward_notifications(mut listen: PgListener, changes: Arc<ChangeSender>) {
    loop {
        match listen.try_recv().await {
            Ok(_) => changes.bump(),
            Err(e) => {
                tracing::warn!(error = %e, "lost the Postgres change listener; reconnecting");
                changes.bump();
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// The queries both engines share, compiled here against Postgres.
mod shared {
    use super::{Db, MIGRATOR, ThisStore, begin_write};
    include!("shared/prelude.rs");
}

/// The connection options `url` names; sqlx's parse errors may quote the URL, password and
/// all, so the error says only that it is invalid.
fn connect_options(url: &DatabaseUrl) -> Result<PgConnectOptions, StoreError> {
    let DatabaseUrl::Postgres { url: raw, .. } = url else {
        return Err(StoreError::Config {
            setting: crate::DATABASE_URL_SETTING,
            problem: format!("{url} is not a Postgres URL"),
        });
    };
    let (raw, password_file) = without_password_file(raw);
    let options = PgConnectOptions::from_str(&raw).map_err(|_| StoreError::Config {
        setting: crate::DATABASE_URL_SETTING,
        problem: format!("{url} is not a valid Postgres URL"),
    })?;
    let Some(path) = password_file else {
        return Ok(options);
    };
    let password = std::fs::read_to_string(&path).map_err(|e| StoreError::Config {
        setting: crate::DATABASE_URL_SETTING,
        problem: format!("can't read its password_file {path}: {e}"),
    })?;
    Ok(options.password(password.trim_end_matches(['\r', '\n'])))
}

/// The URL without its `password_file` parameter (Einsora's own, not libpq's: the file holds
/// the password alone, as a compose or Kubernetes secret does), and that file's path.
fn without_password_file(raw: &str) -> (String, Option<String>) {
    let Some((base, query)) = raw.split_once('?') else {
        return (raw.to_owned(), None);
    };
    let mut file = None;
    let kept: Vec<&str> = query
        .split('&')
        .filter(|param| match param.strip_prefix("password_file=") {
            Some(path) => {
                file = Some(path.to_owned());
                false
            }
            None => true,
        })
        .collect();
    let raw = match kept.is_empty() {
        true => base.to_owned(),
        false => format!("{base}?{}", kept.join("&")),
    };
    (raw, file)
}

/// One connection to `url`, its error the real one (refused, unknown host, bad password).
pub(crate) async fn connect_one(url: &DatabaseUrl) -> Result<PgConnection, StoreError> {
    let options = connect_options(url)?;
    tokio::time::timeout(CONNECT_TIMEOUT, PgConnection::connect_with(&options))
        .await
        .map_err(|_| unreachable(url, format!("no answer within {CONNECT_TIMEOUT:?}")))?
        .map_err(|e| unreachable(url, e))
}

fn unreachable(url: &DatabaseUrl, problem: impl std::fmt::Display) -> StoreError {
    StoreError::Config {
        setting: crate::DATABASE_URL_SETTING,
        problem: format!("can't reach Postgres at {url}: {problem}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_file_is_read_and_never_reaches_libpq_parameters() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("db-password");
        std::fs::write(&secret, "s3cret\n").unwrap();
        let raw = format!(
            "postgres://einsora@db:5432/einsora?sslmode=disable&password_file={}",
            secret.display()
        );
        let url = DatabaseUrl::parse(&raw).unwrap();
        assert!(!url.to_string().contains("db-password"), "{url}");
        let options = connect_options(&url).unwrap();
        assert_eq!(options.get_host(), "db");
        let (rest, file) = without_password_file(&raw);
        assert_eq!(rest, "postgres://einsora@db:5432/einsora?sslmode=disable");
        assert_eq!(file.as_deref(), secret.to_str());
        let missing =
            DatabaseUrl::parse("postgres://einsora@db/einsora?password_file=/nope").unwrap();
        let why = connect_options(&missing).unwrap_err().to_string();
        assert!(why.contains("can't read its password_file /nope"), "{why}");
    }
}
