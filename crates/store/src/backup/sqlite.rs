//! A dump read from, and a load written into, a SQLite file. Values are read by what each one
//! holds (SQLite's types are per value); the target's declared column types check what is
//! written.

use futures::TryStreamExt as _;
use sqlx::sqlite::{SqliteArguments, SqliteRow};
use sqlx::{Connection, Row, Sqlite, SqliteConnection, TypeInfo, ValueRef};

use super::{AFTER_WORKLOADS, BackupError, Counts, Expect, Item, Kind, TABLES, Value};
use crate::sqlite::{connect_options, open_error};
use crate::{DatabaseUrl, Purpose, StoreError};

type Query<'q> = sqlx::query::Query<'q, Sqlite, SqliteArguments>;

static MIGRATOR: &sqlx::migrate::Migrator = &crate::migrations::SQLITE;
/// A deferred read transaction: every table from the one snapshot its first read takes, while
/// writers go on in the WAL.
const SNAPSHOT: &str = "BEGIN";
const WRITE: &str = "BEGIN IMMEDIATE";
/// SQLite generates no column a dump writes (`seq` is the rowid, written as dumped).
const IDENTITY: Option<(&str, &str)> = None;
const AFTER_LOAD: Option<&str> = None;

include!("shared.rs");

async fn connect(url: &DatabaseUrl, purpose: Purpose) -> Result<SqliteConnection, StoreError> {
    let DatabaseUrl::Sqlite { path } = url else {
        unreachable!("dispatched by engine");
    };
    if purpose == Purpose::Use && !path.exists() {
        return Err(StoreError::Config {
            setting: crate::DATABASE_URL_SETTING,
            problem: format!("there is no database at {}", path.display()),
        });
    }
    SqliteConnection::connect_with(&connect_options(path, purpose))
        .await
        .map_err(|e| open_error(url, e))
}

async fn applied(conn: &mut SqliteConnection) -> Result<i64, StoreError> {
    let exists: Option<i64> = sqlx::query_scalar(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'",
    )
    .fetch_optional(&mut *conn)
    .await?;
    if exists.is_none() {
        return Ok(0);
    }
    let version: Option<i64> =
        sqlx::query_scalar("SELECT MAX(version) FROM _sqlx_migrations WHERE success")
            .fetch_one(&mut *conn)
            .await?;
    Ok(version.unwrap_or(0))
}

/// The table's columns, in order, with their declared kinds.
async fn columns(
    conn: &mut SqliteConnection,
    table: &str,
) -> Result<Vec<(String, Option<Kind>)>, StoreError> {
    let rows: Vec<(String, String)> =
        sqlx::query_as("SELECT name, type FROM pragma_table_info($1) ORDER BY cid")
            .bind(table)
            .fetch_all(&mut *conn)
            .await?;
    Ok(rows
        .into_iter()
        .map(|(name, declared)| {
            let declared = declared.to_ascii_uppercase();
            let kind = if declared.contains("INT") {
                Some(Kind::Int8)
            } else if declared.contains("BOOL") {
                Some(Kind::Bool)
            } else if declared.contains("TEXT") || declared.contains("CHAR") {
                Some(Kind::Text)
            } else if declared.contains("BLOB") {
                Some(Kind::Bytes)
            } else {
                None
            };
            (name, kind)
        })
        .collect())
}

fn value(row: &SqliteRow, i: usize, table: &str, column: &str) -> Result<Value, BackupError> {
    let raw = row.try_get_raw(i).map_err(StoreError::from)?;
    if raw.is_null() {
        return Ok(Value::Null);
    }
    let kind = raw.type_info().name().to_owned();
    let read = |e: sqlx::Error| BackupError::from(StoreError::from(e));
    Ok(match kind.as_str() {
        "INTEGER" => Value::Int(row.try_get_unchecked(i).map_err(read)?),
        "TEXT" => Value::Text(row.try_get_unchecked(i).map_err(read)?),
        "BLOB" => Value::Bytes(row.try_get_unchecked(i).map_err(read)?),
        other => {
            return Err(BackupError::shape(
                table,
                format!("{column} holds a {other} value, which no column of the store holds"),
            ));
        }
    })
}

fn bind(query: Query<'_>, kind: Kind, value: Value) -> Result<Query<'_>, String> {
    Ok(match (kind, value) {
        (_, Value::Null) => query.bind(None::<i64>),
        (Kind::Int8 | Kind::Int4 | Kind::Int2, Value::Int(i)) => query.bind(i),
        (Kind::Bool, Value::Int(i @ (0 | 1))) => query.bind(i),
        (Kind::Text, Value::Text(s)) => query.bind(s),
        (Kind::Bytes | Kind::Uuid, Value::Bytes(b)) => query.bind(b),
        (kind, value) => return Err(super::misfit(kind, &value)),
    })
}
