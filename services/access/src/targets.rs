//! Where workloads listen, as the controller last said, kept for a moment: without it every
//! request through the proxy is also a gRPC call to the controller (half the proxy's CPU per
//! small request in the access bench). An entry lives `ttl` (1 s), and goes at once when its
//! socket refuses a connection, so a stopped workload's socket isn't tried again; a restarted
//! one serves the old token for at most `ttl`, which its server refuses. Sessions are opened
//! against a fresh answer (`open.rs`), never a kept one.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use uuid::Uuid;

use crate::errors::RequestId;
use crate::upstream::{LookupError, Target, Upstream};

#[derive(Debug)]
pub(crate) struct Targets {
    ttl: Duration,
    kept: Mutex<HashMap<(Uuid, String), (Instant, Target)>>,
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
    ) -> Result<Target, LookupError> {
        let key = (workload, tenant.to_owned());
        if let Some((at, target)) = self.lock().get(&key)
            && at.elapsed() < self.ttl
        {
            return Ok(target.clone());
        }
        let target = upstream.resolve(workload, tenant, id).await?;
        if !self.ttl.is_zero() {
            let mut kept = self.lock();
            kept.retain(|_, (at, _)| at.elapsed() < self.ttl);
            kept.insert(key, (Instant::now(), target.clone()));
        }
        Ok(target)
    }

    /// Forgets the workload's targets: its socket refused us.
    pub(crate) fn forget(&self, workload: Uuid) {
        self.lock().retain(|(w, _), _| *w != workload);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(Uuid, String), (Instant, Target)>> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
