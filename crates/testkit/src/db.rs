//! The throwaway database every test uses: a migrated store on SQLite in a temporary directory,
//! or on a fresh database of the process's shared throwaway Postgres ([`TempPostgres`]), and SQL
//! run behind the store's back with the engine's own client.
//!
//! The store's own unit tests can't use this (they would see a second copy of the store's
//! types); its integration tests and every other crate's tests do.

use std::sync::Arc;

use einsora_store::{DatabaseUrl, Store};

use crate::TempPostgres;

/// A migrated store on a database of its own; `url` opens it again.
pub struct TestDb {
    pub store: Arc<dyn Store>,
    pub url: DatabaseUrl,
    _dir: Option<tempfile::TempDir>,
}

impl std::fmt::Debug for TestDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestDb").field("url", &self.url).finish()
    }
}

impl TestDb {
    /// SQLite, in a directory removed with the `TestDb`.
    pub async fn sqlite() -> TestDb {
        let dir = tempfile::tempdir().unwrap();
        let url = DatabaseUrl::Sqlite {
            path: dir.path().join("einsora.db"),
        };
        TestDb::open(url, Some(dir)).await
    }

    /// A fresh database on the shared throwaway Postgres.
    pub async fn postgres() -> TestDb {
        let url = TempPostgres::shared().fresh_database().unwrap();
        TestDb::open(DatabaseUrl::parse(&url).unwrap(), None).await
    }

    async fn open(url: DatabaseUrl, dir: Option<tempfile::TempDir>) -> TestDb {
        let (store, _) = einsora_store::migrate(&url).await.unwrap();
        TestDb {
            store,
            url,
            _dir: dir,
        }
    }

    /// The same database opened again, as another process (a restarted one, the api beside
    /// the controller) would.
    pub async fn open_again(&self) -> Arc<dyn Store> {
        einsora_store::open(&self.url).await.unwrap()
    }

    /// Runs SQL behind the store's back (see [`execute`]).
    pub fn execute(&self, sql: &str) {
        execute(&self.url, sql);
    }
}

/// Runs SQL on `url` with the engine's own client (`sqlite3`, `psql`), to set up states no
/// store method makes, or that only another einsora would. Panics if it fails.
pub fn execute(url: &DatabaseUrl, sql: &str) {
    let out = client(url, sql).output().unwrap();
    assert!(
        out.status.success(),
        "{sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The rows `sql` reads on `url`, as the engine's client prints them unaligned: one line per
/// row, columns separated by `|`.
pub fn query(url: &DatabaseUrl, sql: &str) -> String {
    let out = client(url, sql).output().unwrap();
    assert!(
        out.status.success(),
        "{sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn client(url: &DatabaseUrl, sql: &str) -> std::process::Command {
    match url {
        DatabaseUrl::Sqlite { path } => {
            let mut c = std::process::Command::new("sqlite3");
            c.arg(path).arg(sql);
            c
        }
        DatabaseUrl::Postgres { url, .. } => {
            let mut c = std::process::Command::new("psql");
            c.args([
                url.as_str(),
                "-q",
                "-At",
                "-v",
                "ON_ERROR_STOP=1",
                "-c",
                sql,
            ]);
            c
        }
    }
}

/// Declares each case once per engine, `sqlite::<case>` and `postgres::<case>`, each given a
/// fresh [`TestDb`]: `on_both_engines! { module::case, … }`.
#[macro_export]
macro_rules! on_both_engines {
    ($($module:ident :: $case:ident),+ $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $case() {
                    super::$module::$case($crate::db::TestDb::sqlite().await).await;
                }
            )+
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $case() {
                    super::$module::$case($crate::db::TestDb::postgres().await).await;
                }
            )+
        }
    };
}
