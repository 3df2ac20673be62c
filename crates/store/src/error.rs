//! The store's one error type. Messages name what is wrong and never carry a password.

use std::sync::atomic::{AtomicU64, Ordering};

use einsora_core::lifecycle::{State, TransitionError};

/// Whose quota refused a create or start, as its message names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuotaHolder {
    Tenant,
    /// A team, by name.
    Team(String),
    /// A user, by email.
    User(String),
}

impl std::fmt::Display for QuotaHolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QuotaHolder::Tenant => f.write_str("the tenant's"),
            QuotaHolder::Team(name) => write!(f, "team {name:?}'s"),
            QuotaHolder::User(email) => write!(f, "{email}'s"),
        }
    }
}

/// What a quota's refused limit counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuotaMeasure {
    /// The class's units: GPUs for a GPU class, workloads for a CPU class.
    Units,
    /// CPUs (a CPU class's).
    Cpus,
    /// GiB of memory (a CPU class's).
    MemoryGib,
}

impl std::fmt::Display for QuotaMeasure {
    /// What follows a held amount in a refusal: nothing for units ("2 held"), " CPUs" or
    /// " GiB of memory".
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            QuotaMeasure::Units => "",
            QuotaMeasure::Cpus => " CPUs",
            QuotaMeasure::MemoryGib => " GiB of memory",
        })
    }
}

/// Which unique name is taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Taken {
    #[error("a workload called {0:?} already exists")]
    WorkloadName(String),
    #[error("an account for {0} already exists")]
    Email(String),
    #[error("a token called {0:?} already exists")]
    TokenName(String),
    #[error("a team called {0:?} already exists")]
    TeamName(String),
    #[error("an inference key called {0:?} already exists")]
    InferenceKeyName(String),
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// EINSORA_DATABASE_URL is malformed or names an engine Einsora doesn't support.
    #[error("{setting}: {problem}")]
    Config {
        setting: &'static str,
        problem: String,
    },

    /// The database can't be reached or answered with an error; retrying may help.
    #[error("the database is unavailable: {0}")]
    Unavailable(String),

    #[error(
        "the database has migration {found}, newer than this einsora knows (up to {known}): \
         upgrade einsora before using this database"
    )]
    DatabaseNewer { found: i64, known: i64 },

    #[error(
        "the database is at migration {found}, this einsora needs {known}: run `einsora migrate`"
    )]
    DatabaseOlder { found: i64, known: i64 },

    #[error("migrating the database failed: {0}")]
    Migration(String),

    #[error("not found")]
    NotFound,

    /// The row changed since it was read (another writer won the compare-and-swap).
    #[error("it changed meanwhile (now {current})")]
    Conflict { current: State },

    #[error(transparent)]
    InvalidTransition(#[from] TransitionError),

    #[error(
        "{holder} quota for {class} exceeded: {held}{measure} held, {requested} requested, \
         limit {limit}"
    )]
    QuotaExceeded {
        /// Whose quota it is: the tenant's, a team's or a user's.
        holder: QuotaHolder,
        class: String,
        /// What `held`, `requested` and `limit` count.
        measure: QuotaMeasure,
        held: u64,
        requested: u64,
        limit: u64,
    },

    /// A name that must be unique is taken: callers branch on this, never on a message.
    #[error("{0}")]
    Taken(Taken),

    #[error("{0}")]
    InvalidInput(String),
    /// A change to a user that the tenant's invariants refuse: callers branch on the variant.
    #[error(transparent)]
    Refused(crate::users::UserRefusal),

    /// The lease this write was fenced by is no longer held by this holder at this epoch.
    #[error("the lease {0:?} is no longer held")]
    LeaseLost(String),

    /// A stored value doesn't parse: the database was edited by hand or by a newer einsora.
    #[error("the database holds an invalid {what}: {value}")]
    Corrupt { what: &'static str, value: String },
}

impl StoreError {
    pub(crate) fn corrupt(what: &'static str, value: impl std::fmt::Display) -> Self {
        let value: String = value.to_string().chars().take(80).collect();
        StoreError::Corrupt { what, value }
    }

    /// Whether the caller may retry the same call later.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            StoreError::Unavailable(_) | StoreError::Conflict { .. }
        )
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(err: sqlx::Error) -> Self {
        match err {
            sqlx::Error::RowNotFound => StoreError::NotFound,
            sqlx::Error::ColumnDecode { index, source } => {
                StoreError::corrupt("column", format!("{index}: {source}"))
            }
            sqlx::Error::Database(db) => match db.kind() {
                // Constraint violations are bad input, not an outage: retrying won't help.
                sqlx::error::ErrorKind::ForeignKeyViolation => {
                    StoreError::InvalidInput("it refers to something that doesn't exist".into())
                }
                sqlx::error::ErrorKind::UniqueViolation => {
                    StoreError::InvalidInput("it already exists".into())
                }
                // The database's own words stay in the log: they name its tables and columns.
                sqlx::error::ErrorKind::CheckViolation
                | sqlx::error::ErrorKind::NotNullViolation => {
                    tracing::warn!(error = %db, "the database refused a value");
                    StoreError::InvalidInput("the database refused a value as invalid".into())
                }
                _ => {
                    connection_failed();
                    StoreError::Unavailable(db.to_string())
                }
            },
            // sqlx's own messages name the host and the problem but never the password.
            other => {
                connection_failed();
                StoreError::Unavailable(other.to_string())
            }
        }
    }
}

/// How many times a connection of this process failed: whoever holds a connection outside the
/// pool (crate::held_connection) replaces it when this moved.
static CONNECTION_FAILURES: AtomicU64 = AtomicU64::new(0);

fn connection_failed() {
    CONNECTION_FAILURES.fetch_add(1, Ordering::Relaxed);
}

pub(crate) fn connection_failures() -> u64 {
    CONNECTION_FAILURES.load(Ordering::Relaxed)
}
