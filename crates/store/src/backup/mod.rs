//! The store's rows for `einsora backup` and `einsora restore`, portable between SQLite and
//! Postgres either way round (moving a Solo install up to a Lab).
//!
//! A dump reads every table of [`TABLES`] in one read-only snapshot (SQLite: one read
//! transaction on the WAL; Postgres: `REPEATABLE READ`), so it is consistent while the
//! installation runs. Values travel engine-neutral ([`Value`]): an ID is its 16 bytes, a boolean
//! 0 or 1; the target's own column types decide how each is written. A load migrates an empty
//! target to the dump's schema version, writes every row in one transaction, and only then
//! migrates it on to this einsora's: an older dump restores into a newer einsora, never the
//! reverse.

mod postgres;
mod sqlite;
mod value;

use std::collections::BTreeMap;

use crate::{DatabaseUrl, StoreError};

pub use value::Value;

/// Every table an installation's state lives in, parents before children (the order rows
/// are written in, so every reference finds its row).
pub const TABLES: &[&str] = &[
    "tenants",
    "teams",
    "users",
    "team_quotas",
    "user_quotas",
    "password_credentials",
    "sessions",
    "api_tokens",
    "account_links",
    "inference_keys",
    "inference_limits",
    "quotas",
    "machines",
    "machine_certificates",
    "enrolment_tokens",
    "workloads",
    "workload_events",
    "usage_records",
    "token_usage",
    "token_usage_batches",
    "access_tickets",
    "idempotency_keys",
    "pending_removals",
    "workload_output",
    "workload_output_heads",
    "workload_output_totals",
    "activity",
];

/// Tables left out: which controller leads which region belongs to the installation that
/// runs, not to its data (a restored one starts with no leader), and sqlx's own bookkeeping.
pub const LEFT_OUT: &[&str] = &["leases", "_sqlx_migrations"];

/// What a dump yields, in order: each table's head, then its rows.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Table { name: String, columns: Vec<String> },
    Row(Vec<Value>),
}

/// Rows per table, as dumped or loaded.
pub type Counts = BTreeMap<String, u64>;

#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The target already holds an installation's data.
    #[error(
        "the target database isn't empty: {table} has {rows} rows (restore only into a new, empty database)"
    )]
    NotEmpty { table: String, rows: i64 },
    /// The dump's schema is newer than this einsora's.
    #[error(
        "the backup is at schema version {found}, newer than this einsora knows (up to {known}): restore it with a newer einsora"
    )]
    Newer { found: i64, known: i64 },
    /// The target was migrated past the dump's schema version already.
    #[error(
        "the target database is at schema version {found}, newer than the backup's {schema}: restore into a new, empty database"
    )]
    NewerTarget { found: i64, schema: i64 },
    /// The source isn't at this einsora's schema version.
    #[error(
        "the database is at schema version {found}, this einsora's is {known}: back it up with the einsora that runs it"
    )]
    Mismatch { found: i64, known: i64 },
    /// The dump doesn't fit the target's schema: it names the table, the column and why.
    #[error("{table}: {problem}")]
    Shape { table: String, problem: String },
    /// The rows came to an end the dump's order doesn't allow.
    #[error("{0}")]
    Order(String),
}

impl BackupError {
    fn shape(table: &str, problem: impl Into<String>) -> BackupError {
        BackupError::Shape {
            table: table.to_owned(),
            problem: problem.into(),
        }
    }
}

/// This einsora's schema version for `url`'s engine.
pub fn schema_version(url: &DatabaseUrl) -> i64 {
    crate::migrations::latest(migrator(url))
}

fn migrator(url: &DatabaseUrl) -> &'static sqlx::migrate::Migrator {
    match url {
        DatabaseUrl::Sqlite { .. } => &crate::migrations::SQLITE,
        DatabaseUrl::Postgres { .. } => &crate::migrations::POSTGRES,
    }
}

/// Reads every table of [`TABLES`] from one consistent snapshot of `url`'s database, which
/// must be at this einsora's schema version, handing each item to `each` as it is read (a
/// failed `each` stops the dump with its error).
pub async fn dump(
    url: &DatabaseUrl,
    each: &mut (dyn FnMut(Item) -> Result<(), BackupError> + Send),
) -> Result<Counts, BackupError> {
    match url {
        DatabaseUrl::Sqlite { .. } => sqlite::dump(url, each).await,
        DatabaseUrl::Postgres { .. } => postgres::dump(url, each).await,
    }
}

/// Writes a dump made at schema version `schema` into `url`'s database (created if a SQLite
/// file is missing), which must hold no rows of any table, then migrates it to this einsora's
/// version. All rows or none: a failure leaves the target as empty as it was.
pub async fn load(
    url: &DatabaseUrl,
    schema: i64,
    items: &mut (dyn Iterator<Item = Result<Item, BackupError>> + Send),
) -> Result<Counts, BackupError> {
    let known = schema_version(url);
    if schema > known {
        return Err(BackupError::Newer {
            found: schema,
            known,
        });
    }
    match url {
        DatabaseUrl::Sqlite { .. } => sqlite::load(url, schema, items).await,
        DatabaseUrl::Postgres { .. } => postgres::load(url, schema, items).await,
    }
}

/// The tables of a dump, checked as they come: each one known and in [`TABLES`]' order, its
/// columns exactly the target's, each row as wide.
struct Expect {
    next: usize,
    current: Option<(String, usize)>,
    counts: Counts,
}

impl Expect {
    fn new() -> Expect {
        Expect {
            next: 0,
            current: None,
            counts: Counts::new(),
        }
    }

    /// A table's head: where in [`TABLES`] it is, checked against the order.
    fn table(
        &mut self,
        name: &str,
        columns: &[String],
        target: &[String],
    ) -> Result<(), BackupError> {
        let Some(at) = TABLES.iter().position(|t| *t == name) else {
            return Err(BackupError::shape(
                name,
                "is not a table of this einsora's store",
            ));
        };
        if at < self.next {
            return Err(BackupError::Order(format!(
                "{name} comes after a table that must follow it, or twice"
            )));
        }
        let mut theirs: Vec<&String> = columns.iter().collect();
        let mut ours: Vec<&String> = target.iter().collect();
        theirs.sort();
        ours.sort();
        if theirs != ours {
            return Err(BackupError::shape(
                name,
                format!("the backup's columns {columns:?} aren't the target's {target:?}"),
            ));
        }
        self.next = at + 1;
        self.counts.insert(name.to_owned(), 0);
        self.current = Some((name.to_owned(), columns.len()));
        Ok(())
    }

    /// A row of the current table.
    fn row(&mut self, width: usize) -> Result<&str, BackupError> {
        let Some((name, columns)) = &self.current else {
            return Err(BackupError::Order("a row before any table".into()));
        };
        if width != *columns {
            return Err(BackupError::shape(
                name,
                format!("a row of {width} values for {columns} columns"),
            ));
        }
        *self.counts.get_mut(name).expect("counted from its head") += 1;
        Ok(name)
    }

    /// Every table of [`TABLES`] was there.
    fn finish(self) -> Result<Counts, BackupError> {
        match TABLES.iter().find(|t| !self.counts.contains_key(**t)) {
            Some(missing) => Err(BackupError::Order(format!(
                "the backup ends without the table {missing}: it is incomplete"
            ))),
            None => Ok(self.counts),
        }
    }
}

/// What a target column holds, as its engine declares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Int8,
    Int4,
    Int2,
    Bool,
    Text,
    Bytes,
    Uuid,
}

/// The kind of each of the dump's `columns` in the target.
fn kinds(
    table: &str,
    columns: &[String],
    target: &[(String, Option<Kind>)],
) -> Result<Vec<Kind>, BackupError> {
    columns
        .iter()
        .map(|c| {
            target
                .iter()
                .find(|(name, _)| name == c)
                .and_then(|(_, kind)| *kind)
                .ok_or_else(|| BackupError::shape(table, format!("{c} has a type no dump writes")))
        })
        .collect()
}

/// Why `value` can't be written into a column of `kind`.
fn misfit(kind: Kind, value: &Value) -> String {
    format!("{} can't go into a {kind:?} column", value.kind())
}

/// `INSERT INTO <table> (<columns>) VALUES ($1, …)`, names quoted (checked against the
/// target's schema before they get here).
fn insert_sql(table: &str, columns: &[String], overriding: bool) -> String {
    let names: Vec<String> = columns.iter().map(|c| format!("\"{c}\"")).collect();
    let params: Vec<String> = (1..=columns.len()).map(|i| format!("${i}")).collect();
    let overriding = if overriding {
        " OVERRIDING SYSTEM VALUE"
    } else {
        ""
    };
    format!(
        "INSERT INTO \"{table}\" ({}){overriding} VALUES ({})",
        names.join(", "),
        params.join(", ")
    )
}

/// The workloads' insert trigger appends a "created" event per row: the dump has the real
/// timeline, so those are removed before it is written.
const AFTER_WORKLOADS: &str = "DELETE FROM workload_events";

#[cfg(test)]
mod tests;
