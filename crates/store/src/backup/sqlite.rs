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

pub(super) async fn dump(
    url: &DatabaseUrl,
    each: &mut (dyn FnMut(Item) -> Result<(), BackupError> + Send),
) -> Result<Counts, BackupError> {
    let mut conn = connect(url, Purpose::Use).await?;
    // A deferred read transaction: every table from the one snapshot its first read takes,
    // while writers go on in the WAL.
    let mut tx = conn.begin().await.map_err(StoreError::from)?;
    let (found, known) = (applied(&mut tx).await?, super::schema_version(url));
    if found != known {
        return Err(BackupError::Mismatch { found, known });
    }
    let mut counts = Counts::new();
    for table in TABLES {
        let columns: Vec<String> = columns(&mut tx, table)
            .await?
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        each(Item::Table {
            name: (*table).to_owned(),
            columns: columns.clone(),
        })?;
        let names: Vec<String> = columns.iter().map(|c| format!("\"{c}\"")).collect();
        let sql = format!("SELECT {} FROM \"{table}\"", names.join(", "));
        let mut rows = sqlx::query(sqlx::AssertSqlSafe(sql)).fetch(&mut *tx);
        let mut n = 0;
        while let Some(row) = rows.try_next().await.map_err(StoreError::from)? {
            let values = (0..columns.len())
                .map(|i| value(&row, i, table, &columns[i]))
                .collect::<Result<Vec<_>, _>>()?;
            each(Item::Row(values))?;
            n += 1;
        }
        counts.insert((*table).to_owned(), n);
    }
    Ok(counts)
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

pub(super) async fn load(
    url: &DatabaseUrl,
    schema: i64,
    items: &mut (dyn Iterator<Item = Result<Item, BackupError>> + Send),
) -> Result<Counts, BackupError> {
    let mut conn = connect(url, Purpose::Migrate).await?;
    let migrator = &crate::migrations::SQLITE;
    let found = applied(&mut conn).await?;
    if found > schema {
        return Err(BackupError::NewerTarget { found, schema });
    }
    migrator
        .run_to(schema, &mut conn)
        .await
        .map_err(|e| crate::migrations::map_error(migrator, e))?;
    for table in TABLES {
        let sql = format!("SELECT COUNT(*) FROM \"{table}\"");
        let rows: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .fetch_one(&mut conn)
            .await
            .map_err(StoreError::from)?;
        if rows > 0 {
            return Err(BackupError::NotEmpty {
                table: (*table).to_owned(),
                rows,
            });
        }
    }
    let counts = {
        let mut tx = conn
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(StoreError::from)?;
        let mut expect = Expect::new();
        let mut insert: Option<(String, Vec<Kind>, Vec<String>)> = None;
        for item in items {
            match item? {
                Item::Table { name, columns } => {
                    let target = self::columns(&mut tx, &name).await?;
                    let names: Vec<String> = target.iter().map(|(n, _)| n.clone()).collect();
                    expect.table(&name, &columns, &names)?;
                    let kinds = super::kinds(&name, &columns, &target)?;
                    if name == "workload_events" {
                        sqlx::query(AFTER_WORKLOADS)
                            .execute(&mut *tx)
                            .await
                            .map_err(StoreError::from)?;
                    }
                    insert = Some((super::insert_sql(&name, &columns, false), kinds, columns));
                }
                Item::Row(values) => {
                    let table = expect.row(values.len())?.to_owned();
                    let (sql, kinds, columns) = insert.as_ref().expect("a row follows its table");
                    let mut query: Query<'_> = sqlx::query(sqlx::AssertSqlSafe(sql.clone()));
                    for ((value, kind), column) in values.into_iter().zip(kinds).zip(columns) {
                        query = bind(query, *kind, value).map_err(|why| {
                            BackupError::shape(&table, format!("{column}: {why}"))
                        })?;
                    }
                    query
                        .execute(&mut *tx)
                        .await
                        .map_err(|e| BackupError::shape(&table, e.to_string()))?;
                }
            }
        }
        let counts = expect.finish()?;
        tx.commit().await.map_err(StoreError::from)?;
        counts
    };
    migrator
        .run(&mut conn)
        .await
        .map_err(|e| crate::migrations::map_error(migrator, e))?;
    Ok(counts)
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
