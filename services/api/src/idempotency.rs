//! `IdempotencyService`, the gateway's: Idempotency-Key claims for the authenticated caller
//! (docs/api.md, "Idempotency-Key"; ADR 0016). The gateway hashes the request and keeps the
//! HTTP answer; the api names the user and owns the store.

use std::sync::Arc;
use std::time::Duration;

use einsora_core::ids::UserId;
use einsora_proto::internal::v1 as pb;
use einsora_proto::internal::v1::IdempotencyOutcome;
use einsora_proto::internal::v1::idempotency_service_server::IdempotencyService;
use einsora_store::{Claimed, IdempotencyClaim, IdempotencyTimes};
use tonic::{Request, Response, Status};

use crate::caller::{Access, Auth};
use crate::status;

/// `EINSORA_IDEMPOTENCY_TTL`: how long a key is kept from its first request.
pub const TTL: &str = "EINSORA_IDEMPOTENCY_TTL";
pub const DEFAULT_TTL: &str = "24h";

/// A request in progress this long is abandoned (its gateway stopped between claiming and
/// finishing: it waits 30 s for an answer, and finishes at once): a retry runs it.
const ABANDONED_AFTER: Duration = Duration::from_secs(120);

/// The longest key and hash a claim takes.
const MAX_KEY: usize = 255;
const HASH_BYTES: usize = 32;

#[derive(Debug)]
pub struct Idempotency {
    auth: Arc<Auth>,
    times: IdempotencyTimes,
}

impl Idempotency {
    pub fn new(auth: Arc<Auth>, ttl: Duration) -> Self {
        Idempotency {
            auth,
            times: IdempotencyTimes {
                ttl,
                abandoned_after: ABANDONED_AFTER.min(ttl),
            },
        }
    }
}

/// The claim a request names; the gateway checked the key already, so a bad one is its bug.
fn claim(user: UserId, key: String, request_hash: Vec<u8>) -> Result<IdempotencyClaim, Status> {
    let printable = |b: u8| (b' '..=b'~').contains(&b);
    if key.is_empty() || key.len() > MAX_KEY || !key.bytes().all(printable) {
        return Err(Status::invalid_argument(
            "the Idempotency-Key header must be 1-255 printable ASCII characters",
        ));
    }
    if request_hash.len() != HASH_BYTES {
        return Err(Status::invalid_argument("request_hash must be a SHA-256"));
    }
    Ok(IdempotencyClaim {
        user,
        key,
        request_hash,
    })
}

fn user(id: &str) -> Result<UserId, Status> {
    id.parse()
        .map_err(|_| Status::invalid_argument("user_id must be a user's ID"))
}

fn status_code(status: u32) -> Result<u16, Status> {
    u16::try_from(status)
        .ok()
        .filter(|s| (200..300).contains(s))
        .ok_or_else(|| Status::invalid_argument("only a 2xx answer is kept"))
}

#[tonic::async_trait]
impl IdempotencyService for Idempotency {
    async fn claim_idempotency_key(
        &self,
        request: Request<pb::ClaimIdempotencyKeyRequest>,
    ) -> Result<Response<pb::ClaimIdempotencyKeyResponse>, Status> {
        let caller = self.auth.caller(request.metadata(), Access::Write).await?;
        let req = request.into_inner();
        let claim = claim(caller.user, req.key, req.request_hash)?;
        let claimed = self
            .auth
            .store()
            .claim_idempotency_key(&claim, self.times)
            .await
            .map_err(status::store)?;
        let mut answer = pb::ClaimIdempotencyKeyResponse {
            user_id: caller.user.to_string(),
            ..Default::default()
        };
        let outcome = match claimed {
            Claimed::Started => IdempotencyOutcome::Started,
            Claimed::InProgress => IdempotencyOutcome::InProgress,
            Claimed::Mismatch => IdempotencyOutcome::Mismatch,
            Claimed::Done { status, body } => {
                answer.status = u32::from(status);
                answer.body = body;
                IdempotencyOutcome::Done
            }
        };
        answer.set_outcome(outcome);
        Ok(Response::new(answer))
    }

    async fn finish_idempotency_key(
        &self,
        request: Request<pb::FinishIdempotencyKeyRequest>,
    ) -> Result<Response<pb::FinishIdempotencyKeyResponse>, Status> {
        let req = request.into_inner();
        let claim = claim(user(&req.user_id)?, req.key, req.request_hash)?;
        let status = status_code(req.status)?;
        self.auth
            .store()
            .finish_idempotency_key(&claim, status, req.body.as_deref())
            .await
            .map_err(status::store)?;
        Ok(Response::new(pb::FinishIdempotencyKeyResponse {}))
    }

    async fn release_idempotency_key(
        &self,
        request: Request<pb::ReleaseIdempotencyKeyRequest>,
    ) -> Result<Response<pb::ReleaseIdempotencyKeyResponse>, Status> {
        let req = request.into_inner();
        let claim = claim(user(&req.user_id)?, req.key, req.request_hash)?;
        self.auth
            .store()
            .release_idempotency_key(&claim)
            .await
            .map_err(status::store)?;
        Ok(Response::new(pb::ReleaseIdempotencyKeyResponse {}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_take_printable_keys_and_sha256_hashes() {
        let me = UserId::new();
        for good in ["a", "order-42 retry", &"k".repeat(255), "~!\"#$"] {
            assert!(claim(me, good.into(), vec![0; 32]).is_ok(), "{good:?}");
        }
        for bad in ["", &"k".repeat(256), "tab\there", "ünï", "nl\n"] {
            assert!(claim(me, bad.into(), vec![0; 32]).is_err(), "{bad:?}");
        }
        assert!(claim(me, "k".into(), vec![0; 31]).is_err());
    }

    #[test]
    fn only_successes_are_kept() {
        assert_eq!(status_code(202).unwrap(), 202);
        for refused in [0, 199, 300, 409, 503, 70_000] {
            assert!(status_code(refused).is_err(), "{refused}");
        }
    }
}
