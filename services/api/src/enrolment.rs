//! `EnrolmentTokenService`: the single-use tokens with which a tenant lets another machine join
//! (the machine presents one, once, to the agents' Enroll RPC, and belongs to the token's
//! tenant and region). The secret is shown once, in the create response, and stored only as its
//! SHA-256.
//!
//! Only a signed-in session may create one: an enrolled machine runs the tenant's workloads and
//! sees their data, so a leaked API token (a script's, a CI runner's) must not be enough to bring
//! in a machine of the attacker's. API tokens may list and revoke.

use std::sync::Arc;

use einsora_core::catalog::Catalog;
use einsora_core::ids::{EnrolmentTokenId, TenantId, UserId};
use einsora_core::region::Region;
use einsora_proto::convert::optional_time;
use einsora_proto::enrolment::v1 as pb;
use einsora_proto::enrolment::v1::enrolment_token_service_server::EnrolmentTokenService;
use einsora_store::{EnrolmentTokenRecord, NewEnrolmentToken, Store, StoreError};
use time::{Duration, OffsetDateTime};
use tonic::{Request, Response, Status};

use crate::accounts::{check_name, secrets};
use crate::caller::{Access, Auth};
use crate::status::{self, Precondition};
use crate::{scoped, wire};

/// Without `expires_at`: long enough to walk to the machine and run the join command, short
/// enough that a token left in a terminal's scrollback soon stops mattering.
pub const DEFAULT_LIFETIME: Duration = Duration::hours(1);
/// The longest `expires_at` may ask for: a day of setting up a lab's machines.
pub const MAX_LIFETIME: Duration = Duration::hours(24);
/// `einsora up` redeems the local machine's token at once.
const LOCAL_LIFETIME: Duration = Duration::minutes(5);

#[derive(Debug, Clone)]
pub struct EnrolmentApi {
    store: Arc<dyn Store>,
    auth: Arc<Auth>,
    catalog: Arc<Catalog>,
    /// The installation CA's SHA-256, as hex: every token carries it.
    ca_pin: String,
}

impl EnrolmentApi {
    pub fn new(
        store: Arc<dyn Store>,
        auth: Arc<Auth>,
        catalog: Arc<Catalog>,
        ca_fingerprint: [u8; 32],
    ) -> Self {
        EnrolmentApi {
            store,
            auth,
            catalog,
            ca_pin: secrets::hex(&ca_fingerprint),
        }
    }

    /// The requested catalog region, or the catalog's first.
    fn region(&self, requested: Option<&str>) -> Result<Region, Status> {
        let Some(name) = requested else {
            return Ok(self.catalog.default_region().clone());
        };
        self.catalog.region(name).cloned().ok_or_else(|| {
            let known: Vec<&str> = self.catalog.regions().iter().map(Region::as_str).collect();
            Status::invalid_argument(format!(
                "region: use one of this installation's regions: {}",
                known.join(", ")
            ))
        })
    }
}

/// What a new token is for.
struct Draft {
    tenant: TenantId,
    created_by: UserId,
    name: String,
    region: Region,
    expires_at: OffsetDateTime,
}

/// Records a new token and returns it: the fresh `secret`, then the CA's fingerprint, so the
/// joining agent can pin the controller with nothing but the token (as kubeadm's discovery
/// hash).
async fn mint(
    store: &dyn Store,
    draft: Draft,
    secret: String,
    ca_pin: &str,
) -> Result<(String, EnrolmentTokenRecord), StoreError> {
    let token = format!("{secret}.{ca_pin}");
    let new = NewEnrolmentToken {
        id: EnrolmentTokenId::new(),
        tenant_id: draft.tenant,
        name: draft.name,
        region: draft.region,
        prefix: secrets::display_prefix(&token),
        token_hash: secrets::sha256(&token),
        created_by: draft.created_by,
        expires_at: draft.expires_at,
    };
    let record = store.create_enrolment_token(&new).await?;
    Ok((token, record))
}

/// A token with which `einsora up` enrols the machine it runs on, as any other machine joins:
/// owned by the tenant `owner` (a slug), in the controller's `region`, good for a few minutes.
/// `None` while that tenant has no user (in dev mode, until the api has seeded it).
pub async fn local_machine_token(
    store: &dyn Store,
    owner: &str,
    region: Region,
    ca_fingerprint: [u8; 32],
) -> anyhow::Result<Option<String>> {
    let Some(tenant) = store.tenant_by_slug(owner).await? else {
        return Ok(None);
    };
    let Some(created_by) = store.tenant_founder(tenant).await? else {
        return Ok(None);
    };
    let draft = Draft {
        tenant,
        created_by,
        name: "this machine".into(),
        region,
        expires_at: OffsetDateTime::now_utc() + LOCAL_LIFETIME,
    };
    let secret = secrets::new_enrolment_token()?;
    let (token, _) = mint(store, draft, secret, &secrets::hex(&ca_fingerprint)).await?;
    Ok(Some(token))
}

/// When a token created at `now` expires: `DEFAULT_LIFETIME` later, unless the request asks for
/// a time, which must be in the future and at most `MAX_LIFETIME` away.
fn expiry(
    now: OffsetDateTime,
    requested: Option<OffsetDateTime>,
) -> Result<OffsetDateTime, Status> {
    match requested {
        None => Ok(now + DEFAULT_LIFETIME),
        Some(at) if at <= now => Err(Status::invalid_argument("expires_at must be in the future")),
        Some(at) if at > now + MAX_LIFETIME => Err(Status::invalid_argument(
            "expires_at: an enrolment token lives at most 24 hours",
        )),
        Some(at) => Ok(at),
    }
}

#[tonic::async_trait]
impl EnrolmentTokenService for EnrolmentApi {
    async fn create_enrolment_token(
        &self,
        request: Request<pb::CreateEnrolmentTokenRequest>,
    ) -> Result<Response<pb::CreateEnrolmentTokenResponse>, Status> {
        let caller = self.auth.caller(request.metadata(), Access::Write).await?;
        caller.must_administer("bring in machines")?;
        if caller.via_token {
            return Err(Status::permission_denied(
                "an API token can't create enrolment tokens: sign in",
            ));
        }
        let req = request.into_inner();
        check_name(&req.name)?;
        let region = self.region(req.region.as_deref())?;
        let requested =
            optional_time("expires_at", req.expires_at.as_ref()).map_err(status::invalid)?;
        let expires_at = expiry(OffsetDateTime::now_utc(), requested)?;
        let draft = Draft {
            tenant: caller.tenant,
            created_by: caller.user,
            name: req.name,
            region,
            expires_at,
        };
        let secret = secrets::new_enrolment_token().map_err(status::internal)?;
        let (token, record) = mint(&*self.store, draft, secret, &self.ca_pin)
            .await
            .map_err(status::store)?;
        // The prefix only: it names the token without giving it away.
        tracing::info!(id = %record.id, prefix = %record.prefix, region = %record.region, "enrolment token created");
        Ok(Response::new(pb::CreateEnrolmentTokenResponse {
            token,
            enrolment_token: Some(wire::enrolment_token(&record)),
        }))
    }

    async fn list_enrolment_tokens(
        &self,
        request: Request<pb::ListEnrolmentTokensRequest>,
    ) -> Result<Response<pb::ListEnrolmentTokensResponse>, Status> {
        let caller = self.auth.caller(request.metadata(), Access::Read).await?;
        caller.must_administer("see enrolment tokens")?;
        let tokens = self
            .store
            .enrolment_tokens(caller.tenant)
            .await
            .map_err(status::store)?;
        Ok(Response::new(pb::ListEnrolmentTokensResponse {
            enrolment_tokens: tokens.iter().map(wire::enrolment_token).collect(),
        }))
    }

    async fn revoke_enrolment_token(
        &self,
        request: Request<pb::RevokeEnrolmentTokenRequest>,
    ) -> Result<Response<pb::EnrolmentToken>, Status> {
        let caller = self.auth.caller(request.metadata(), Access::Write).await?;
        caller.must_administer("revoke enrolment tokens")?;
        let id: EnrolmentTokenId = scoped::id(&request.get_ref().id)?;
        let record = self
            .store
            .revoke_enrolment_token(caller.tenant, id)
            .await
            .map_err(status::store)?
            .ok_or_else(status::not_found)?;
        // A used token can't be revoked: it has nothing left to give; its machine can be.
        if record.revoked_at.is_none() {
            return Err(status::failed(
                Precondition::Conflict,
                "this token has already enrolled its machine: revoke the machine instead",
            ));
        }
        Ok(Response::new(wire::enrolment_token(&record)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_defaults_to_an_hour_and_is_at_most_a_day_ahead() {
        let now = OffsetDateTime::now_utc();
        assert_eq!(expiry(now, None).unwrap(), now + Duration::hours(1));
        let soon = now + Duration::minutes(5);
        assert_eq!(expiry(now, Some(soon)).unwrap(), soon);
        let last = now + MAX_LIFETIME;
        assert_eq!(expiry(now, Some(last)).unwrap(), last);
        for refused in [now, now - Duration::seconds(1), last + Duration::seconds(1)] {
            let status = expiry(now, Some(refused)).unwrap_err();
            assert_eq!(status.code(), tonic::Code::InvalidArgument, "{refused}");
            assert!(status.message().starts_with("expires_at"), "{status:?}");
        }
    }
}
