//! Each tenant's served models (`ListServedModels`), as the controller last said, kept for a
//! moment like workloads' targets (`targets.rs`): without it every request to the one base URL
//! is also a gRPC call. A tenant's list lives `ttl` (1 s), and goes at once when one of its
//! replicas refuses a connection. Also kept here: what each engine said its context length is
//! (asked once per run, `models.rs`), and the turn that spreads requests over idle replicas.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use uuid::Uuid;

use crate::errors::RequestId;
use crate::upstream::{LookupError, Served, Upstream};

/// The most runs whose context length is remembered: past it, the memory starts afresh.
const MAX_CONTEXTS: usize = 4096;

/// A tenant's list, and when it was asked for.
type Listed = (Instant, Arc<[Served]>);

#[derive(Debug)]
pub(crate) struct ServedModels {
    ttl: Duration,
    /// By tenant: what was last listed, shared with the requests that use it.
    kept: Mutex<HashMap<String, Listed>>,
    /// By run (workload, attempt): the context length its engine said, `None` if it said none.
    contexts: Mutex<HashMap<(Uuid, u32), Option<u64>>>,
    turn: AtomicUsize,
}

impl ServedModels {
    /// A zero `ttl` keeps no list.
    pub(crate) fn new(ttl: Duration) -> Self {
        ServedModels {
            ttl,
            kept: Mutex::default(),
            contexts: Mutex::default(),
            turn: AtomicUsize::new(0),
        }
    }

    /// The tenant's served models, from a recent answer or a new one.
    pub(crate) async fn list(
        &self,
        upstream: &Upstream,
        tenant: &str,
        id: &RequestId,
    ) -> Result<Arc<[Served]>, LookupError> {
        if let Some((at, served)) = lock(&self.kept).get(tenant)
            && at.elapsed() < self.ttl
        {
            return Ok(Arc::clone(served));
        }
        let served: Arc<[Served]> = upstream.served(tenant, id).await?.into();
        if !self.ttl.is_zero() {
            let mut kept = lock(&self.kept);
            kept.retain(|_, (at, _)| at.elapsed() < self.ttl);
            kept.insert(tenant.to_owned(), (Instant::now(), Arc::clone(&served)));
        }
        Ok(served)
    }

    /// Forgets the tenant's list: one of its replicas refused us.
    pub(crate) fn forget(&self, tenant: &str) {
        lock(&self.kept).remove(tenant);
    }

    /// The next request's turn, for ties among equally loaded replicas.
    pub(crate) fn turn(&self) -> usize {
        self.turn.fetch_add(1, Ordering::Relaxed)
    }

    /// What the run's engine said of its context length, if it was asked.
    pub(crate) fn context(&self, run: (Uuid, u32)) -> Option<Option<u64>> {
        lock(&self.contexts).get(&run).copied()
    }

    pub(crate) fn remember_context(&self, run: (Uuid, u32), length: Option<u64>) {
        let mut contexts = lock(&self.contexts);
        if contexts.len() >= MAX_CONTEXTS {
            contexts.clear();
        }
        contexts.insert(run, length);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
