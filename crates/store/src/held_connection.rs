//! The Postgres connection the controller's lifecycle steps write on while no other step of
//! this process holds it. Taking a connection from sqlx's pool costs little, but giving it back
//! costs a spawned task and a ping (a round trip), more than a step's one `UPDATE` itself: the
//! transitions bench's one writer ran at 0.65× pgbench that way. Steps that find it busy take
//! the pool's, so concurrent writers still write side by side.
//!
//! It is detached from the pool (the pool may open one more in its place), and replaced after
//! any connection of this process failed (`crate::error::connection_failures`): sqlx can't say
//! whether one is still open, and a broken one must not fail every later step.

use std::ops::{Deref, DerefMut};

use sqlx::pool::PoolConnection;
use sqlx::{PgConnection, PgPool, Postgres};
use tokio::sync::{MappedMutexGuard, Mutex, MutexGuard};

use crate::StoreError;

#[derive(Debug, Default)]
pub(crate) struct HeldConnection {
    slot: Mutex<Slot>,
}

#[derive(Debug, Default)]
struct Slot {
    conn: Option<PgConnection>,
    /// `connection_failures()` when `conn` was taken.
    failures: u64,
}

/// A connection to write a step on: the held one, or the pool's while another step has it.
#[derive(Debug)]
pub(crate) enum StepConnection<'a> {
    Held(MappedMutexGuard<'a, PgConnection>),
    Pooled(PoolConnection<Postgres>),
}

impl HeldConnection {
    pub(crate) async fn take<'a>(
        &'a self,
        pool: &PgPool,
    ) -> Result<StepConnection<'a>, StoreError> {
        let Ok(mut slot) = self.slot.try_lock() else {
            return Ok(StepConnection::Pooled(pool.acquire().await?));
        };
        let failures = crate::error::connection_failures();
        if slot.conn.is_none() || slot.failures != failures {
            slot.conn = None;
            slot.conn = Some(pool.acquire().await?.detach());
            slot.failures = failures;
        }
        match MutexGuard::try_map(slot, |s| s.conn.as_mut()) {
            Ok(conn) => Ok(StepConnection::Held(conn)),
            Err(_) => Ok(StepConnection::Pooled(pool.acquire().await?)),
        }
    }
}

impl Deref for StepConnection<'_> {
    type Target = PgConnection;

    fn deref(&self) -> &PgConnection {
        match self {
            StepConnection::Held(c) => c,
            StepConnection::Pooled(c) => c,
        }
    }
}

impl DerefMut for StepConnection<'_> {
    fn deref_mut(&mut self) -> &mut PgConnection {
        match self {
            StepConnection::Held(c) => c,
            StepConnection::Pooled(c) => c,
        }
    }
}
