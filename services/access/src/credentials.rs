//! Who a bearer credential (an API token or an inference key) belongs to, as the api last
//! said, kept for a moment: without it every inference request, and every stream each
//! [`RECHECK`](crate::endpoint::RECHECK) while it lasts, is also an `Authenticate` call to the
//! api over mutual TLS (half the proxy's CPU per small request in the gateway bench). An answer
//! lives `ttl` (1 s), so a revoked token or key is refused within a second, and a stream on it
//! ends within `RECHECK` and that second (docs/security.md).
//!
//! Only credentials the api accepted are kept, each under its SHA-256 (the map never holds a
//! secret): one that it refused is asked again every time, so a stream of made-up tokens keeps
//! nothing here. A failed lookup (the api unavailable) keeps nothing either.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::errors::RequestId;
use crate::upstream::{Caller, LookupError, Upstream};

type Key = [u8; 32];

#[derive(Debug)]
pub(crate) struct Credentials {
    ttl: Duration,
    kept: Mutex<HashMap<Key, (Instant, Caller)>>,
}

impl Credentials {
    /// A zero `ttl` keeps nothing.
    pub(crate) fn new(ttl: Duration) -> Self {
        Credentials {
            ttl,
            kept: Mutex::default(),
        }
    }

    /// Who `bearer` belongs to, from a recent answer or a new one.
    pub(crate) async fn authenticate(
        &self,
        upstream: &Upstream,
        bearer: &str,
        id: &RequestId,
    ) -> Result<Caller, LookupError> {
        let key: Key = Sha256::digest(bearer.as_bytes()).into();
        if let Some((at, caller)) = self.lock().get(&key)
            && at.elapsed() < self.ttl
        {
            return Ok(caller.clone());
        }
        let caller = upstream.authenticate(bearer, id).await?;
        if !self.ttl.is_zero() {
            let mut kept = self.lock();
            kept.retain(|_, (at, _)| at.elapsed() < self.ttl);
            kept.insert(key, (Instant::now(), caller.clone()));
        }
        Ok(caller)
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Key, (Instant, Caller)>> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
