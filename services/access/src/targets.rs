//! Where workloads listen, as the controller last said, kept for a moment: without it every
//! request through the proxy is also a gRPC call to the controller (half the proxy's CPU per
//! small request in the access bench). An entry lives `ttl` (1 s), and goes at once when its
//! socket refuses a connection, so a stopped workload's socket isn't tried again; a restarted
//! one serves the old token for at most `ttl`, which its server refuses. Sessions are opened
//! against a fresh answer (`open.rs`), never a kept one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use uuid::Uuid;

use crate::errors::RequestId;
use crate::upstream::{LookupError, Target, Upstream};

#[derive(Debug)]
pub(crate) struct Targets {
    ttl: Duration,
    /// By workload: what was last resolved, shared with the requests that use it.
    kept: Mutex<HashMap<Uuid, Resolved>>,
}

/// What the controller said of a workload, when, to which tenant.
#[derive(Debug)]
struct Resolved {
    at: Instant,
    tenant: String,
    target: Arc<Target>,
}

impl Targets {
    /// A zero `ttl` keeps nothing.
    pub(crate) fn new(ttl: Duration) -> Self {
        Targets {
            ttl,
            kept: Mutex::default(),
        }
    }

    /// The workload's target for `tenant`, from a recent answer or a new one.
    pub(crate) async fn resolve(
        &self,
        upstream: &Upstream,
        workload: Uuid,
        tenant: &str,
        id: &RequestId,
    ) -> Result<Arc<Target>, LookupError> {
        if let Some(kept) = self.lock().get(&workload)
            && kept.tenant == tenant
            && kept.at.elapsed() < self.ttl
        {
            return Ok(Arc::clone(&kept.target));
        }
        let target = Arc::new(upstream.resolve(workload, tenant, id).await?);
        if !self.ttl.is_zero() {
            let mut kept = self.lock();
            kept.retain(|_, resolved| resolved.at.elapsed() < self.ttl);
            let resolved = Resolved {
                at: Instant::now(),
                tenant: tenant.to_owned(),
                target: Arc::clone(&target),
            };
            kept.insert(workload, resolved);
        }
        Ok(target)
    }

    /// Forgets the workload's target: its socket refused us.
    pub(crate) fn forget(&self, workload: Uuid) {
        self.lock().remove(&workload);
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Uuid, Resolved>> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
