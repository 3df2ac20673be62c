//! Idempotency keys (docs/api.md, "Idempotency-Key"; ADR 0016): per user, a key claims one
//! request (by its hash) while it runs, then keeps its answer until the key expires. Expired
//! keys are swept as new ones are claimed.

use std::time::Duration;

use async_trait::async_trait;
use einsora_core::ids::UserId;

use crate::StoreError;

/// A claim on a key: whose, which key, and the hash of the request it stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyClaim {
    pub user: UserId,
    pub key: String,
    /// The request's SHA-256 (method, path, canonical body), computed by the gateway.
    pub request_hash: Vec<u8>,
}

/// The lifetimes a claim is judged by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdempotencyTimes {
    /// How long a key is kept from its first request (24 hours).
    pub ttl: Duration,
    /// How long a request in progress may go unfinished before it counts as abandoned (its
    /// gateway went away) and a retry may run it again.
    pub abandoned_after: Duration,
}

/// What a claim found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claimed {
    /// The key is this request's now: run it, then finish or release the claim.
    Started,
    /// The same key and request, still running.
    InProgress,
    /// The key was used for another request (method, path or body).
    Mismatch,
    /// The same request was answered: `status` and, when it was kept, the JSON `body`.
    Done { status: u16, body: Option<String> },
}

#[async_trait]
pub trait IdempotencyStore: Send + Sync {
    /// Claims `claim.key` for `claim.user`'s request, atomically (of concurrent claims with
    /// one key exactly one starts), sweeping every key older than `times.ttl` first. A key
    /// still in progress past `times.abandoned_after` is taken over by the same request.
    async fn claim_idempotency_key(
        &self,
        claim: &IdempotencyClaim,
        times: IdempotencyTimes,
    ) -> Result<Claimed, StoreError>;

    /// Keeps the answer of a started claim: its HTTP `status` (2xx) and JSON `body`, or `None`
    /// when the answer isn't kept (it carried a secret). False if the claim wasn't in progress.
    async fn finish_idempotency_key(
        &self,
        claim: &IdempotencyClaim,
        status: u16,
        body: Option<&str>,
    ) -> Result<bool, StoreError>;

    /// Lets go of a started claim (its request was refused or failed), so a retry runs again.
    /// False if the claim wasn't in progress.
    async fn release_idempotency_key(&self, claim: &IdempotencyClaim) -> Result<bool, StoreError>;
}
