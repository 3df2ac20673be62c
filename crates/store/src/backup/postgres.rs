//! A dump read from, and a load written into, Postgres. Values are read by their columns'
//! types; the target's `information_schema` decides how each is written (an ID's 16 bytes
//! into a `uuid`, 0 or 1 into a `boolean`).

use futures::TryStreamExt as _;
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::{Column, Connection, PgConnection, Postgres, Row, TypeInfo};
use uuid::Uuid;

use super::{AFTER_WORKLOADS, BackupError, Counts, Expect, Item, Kind, TABLES, Value};
use crate::postgres::connect_one;
use crate::{DatabaseUrl, Purpose, StoreError};

type Query<'q> = sqlx::query::Query<'q, Postgres, PgArguments>;

static MIGRATOR: &sqlx::migrate::Migrator = &crate::migrations::POSTGRES;
/// One snapshot for every table, while the installation writes on.
const SNAPSHOT: &str = "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY";
const WRITE: &str = "BEGIN";
/// The one column whose values Postgres generates (`GENERATED ALWAYS AS IDENTITY`): written
/// as dumped, then its sequence moved past them.
const IDENTITY: Option<(&str, &str)> = Some(("workload_events", "seq"));
const AFTER_LOAD: Option<&str> = Some(
    "SELECT setval(pg_get_serial_sequence('workload_events', 'seq'), \
     COALESCE((SELECT MAX(seq) FROM workload_events), 0) + 1, false)",
);

/// One connection; Postgres has nothing to create.
async fn connect(url: &DatabaseUrl, _: Purpose) -> Result<PgConnection, StoreError> {
    connect_one(url).await
}

include!("shared.rs");

async fn applied(conn: &mut PgConnection) -> Result<i64, StoreError> {
    let exists: Option<String> = sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations')::text")
        .fetch_one(&mut *conn)
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

/// The table's columns, in order, with their kinds.
async fn columns(
    conn: &mut PgConnection,
    table: &str,
) -> Result<Vec<(String, Option<Kind>)>, StoreError> {
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SELECT column_name::text, data_type::text FROM information_schema.columns \
         WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position",
    )
    .bind(table)
    .fetch_all(&mut *conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(name, data_type)| {
            let kind = match data_type.as_str() {
                "bigint" => Some(Kind::Int8),
                "integer" => Some(Kind::Int4),
                "smallint" => Some(Kind::Int2),
                "boolean" => Some(Kind::Bool),
                "text" | "character varying" => Some(Kind::Text),
                "bytea" => Some(Kind::Bytes),
                "uuid" => Some(Kind::Uuid),
                _ => None,
            };
            (name, kind)
        })
        .collect())
}

fn value(row: &PgRow, i: usize, table: &str, _: &str) -> Result<Value, BackupError> {
    let column = &row.columns()[i];
    let read = |e: sqlx::Error| BackupError::from(StoreError::from(e));
    let value = match column.type_info().name() {
        "UUID" => row
            .try_get::<Option<Uuid>, _>(i)
            .map_err(read)?
            .map(|u| Value::Bytes(u.as_bytes().to_vec())),
        "INT8" => row
            .try_get::<Option<i64>, _>(i)
            .map_err(read)?
            .map(Value::Int),
        "INT4" => row
            .try_get::<Option<i32>, _>(i)
            .map_err(read)?
            .map(|v| Value::Int(v.into())),
        "INT2" => row
            .try_get::<Option<i16>, _>(i)
            .map_err(read)?
            .map(|v| Value::Int(v.into())),
        "BOOL" => row
            .try_get::<Option<bool>, _>(i)
            .map_err(read)?
            .map(|v| Value::Int(v.into())),
        "TEXT" | "VARCHAR" => row
            .try_get::<Option<String>, _>(i)
            .map_err(read)?
            .map(Value::Text),
        "BYTEA" => row
            .try_get::<Option<Vec<u8>>, _>(i)
            .map_err(read)?
            .map(Value::Bytes),
        other => {
            return Err(BackupError::shape(
                table,
                format!(
                    "{} is of type {other}, which no column of the store is",
                    column.name()
                ),
            ));
        }
    };
    Ok(value.unwrap_or(Value::Null))
}

fn bind(query: Query<'_>, kind: Kind, value: Value) -> Result<Query<'_>, String> {
    let misfit = |value: &Value| super::misfit(kind, value);
    Ok(match (kind, value) {
        // Postgres types its parameters: a null is bound as its column's type.
        (Kind::Int8, Value::Null) => query.bind(None::<i64>),
        (Kind::Int4, Value::Null) => query.bind(None::<i32>),
        (Kind::Int2, Value::Null) => query.bind(None::<i16>),
        (Kind::Bool, Value::Null) => query.bind(None::<bool>),
        (Kind::Text, Value::Null) => query.bind(None::<String>),
        (Kind::Bytes, Value::Null) => query.bind(None::<Vec<u8>>),
        (Kind::Uuid, Value::Null) => query.bind(None::<Uuid>),
        (Kind::Int8, Value::Int(i)) => query.bind(i),
        (Kind::Int4, Value::Int(i)) => {
            query.bind(i32::try_from(i).map_err(|_| format!("{i} is out of range for integer"))?)
        }
        (Kind::Int2, Value::Int(i)) => {
            query.bind(i16::try_from(i).map_err(|_| format!("{i} is out of range for smallint"))?)
        }
        (Kind::Bool, Value::Int(i @ (0 | 1))) => query.bind(i == 1),
        (Kind::Text, Value::Text(s)) => query.bind(s),
        (Kind::Bytes, Value::Bytes(b)) => query.bind(b),
        (Kind::Uuid, Value::Bytes(b)) => match Uuid::from_slice(&b) {
            Ok(id) => query.bind(id),
            Err(_) => return Err(format!("{} bytes aren't an ID's 16", b.len())),
        },
        (_, value) => return Err(misfit(&value)),
    })
}
