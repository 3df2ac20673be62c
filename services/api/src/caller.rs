//! Who is calling. Every RPC but `Login` authenticates from the metadata the gateway forwards
//! (docs/api.md): a bearer API token first, else a session, whose state-changing calls also
//! need its CSRF token. Credential values are secrets: they are hashed at once and never logged.

use std::net::IpAddr;
use std::sync::Arc;

use einsora_core::ids::{TenantId, UserId};
use einsora_core::reasons::{Actor, Credential, SessionClient};
use einsora_core::role::Role;
use einsora_store::{ApiTokenRecord, SecretHash, Store, User};
use time::OffsetDateTime;
use tonic::Status;
use tonic::metadata::MetadataMap;

use crate::accounts::secrets;
use crate::{context, status};

pub use einsora_proto::metadata::CLIENT_ADDR as CLIENT_ADDR_HEADER;
pub use einsora_proto::metadata::CSRF as CSRF_HEADER;
pub use einsora_proto::metadata::SESSION as SESSION_HEADER;

/// Every credential that doesn't work (missing, malformed, unknown, expired, revoked) gets this
/// one answer, so none can be told from another.
const UNAUTHENTICATED: &str = "sign in, or send a valid API token";

/// An authenticated caller, as the services see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub tenant: TenantId,
    pub user: UserId,
    pub role: Role,
    /// Subject (email) and credential, for timeline reasons.
    pub actor: Actor,
    pub via_token: bool,
}

impl Caller {
    /// Refuses, naming `what`, a call that only a tenant's owners and admins may make.
    pub fn must_administer(&self, what: &str) -> Result<(), Status> {
        if self.role.administers() {
            return Ok(());
        }
        Err(Status::permission_denied(format!(
            "only an owner or admin of your tenant may {what}; you are a {}",
            self.role
        )))
    }

    /// The workloads this caller sees: the tenant's, or a member's own.
    pub fn scope(&self) -> crate::scoped::Scope {
        crate::scoped::Scope {
            tenant: self.tenant,
            owner: (!self.role.sees_every_workload()).then_some(self.user),
        }
    }
}

/// Whether a call changes state: a session's state-changing calls need its CSRF token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// The caller and what they presented, for the accounts services.
#[derive(Debug, Clone)]
pub(crate) struct Authenticated {
    pub caller: Caller,
    pub user: User,
    pub credential: Presented,
}

#[derive(Debug, Clone)]
pub(crate) enum Presented {
    Session {
        id_hash: SecretHash,
        client: SessionClient,
        expires_at: OffsetDateTime,
    },
    Token(ApiTokenRecord),
}

impl Authenticated {
    pub fn expires_at(&self) -> Option<OffsetDateTime> {
        match &self.credential {
            Presented::Session { expires_at, .. } => Some(*expires_at),
            Presented::Token(t) => t.expires_at,
        }
    }
}

/// Reads credentials against the store.
#[derive(Debug)]
pub struct Auth {
    store: Arc<dyn Store>,
}

impl Auth {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Auth { store }
    }

    pub(crate) fn store(&self) -> &dyn Store {
        &*self.store
    }

    /// The caller of an RPC, from its metadata.
    pub async fn caller(&self, metadata: &MetadataMap, access: Access) -> Result<Caller, Status> {
        self.authenticate(metadata, access).await.map(|a| a.caller)
    }

    /// The caller, also named on the request's log lines and response (`context`).
    pub(crate) async fn authenticate(
        &self,
        metadata: &MetadataMap,
        access: Access,
    ) -> Result<Authenticated, Status> {
        let authenticated = self.identify(metadata, access).await?;
        let caller = &authenticated.caller;
        context::authenticated(context::Who {
            tenant: caller.tenant,
            user: caller.user,
            subject: &caller.actor.subject,
            actor: caller.actor.to_string(),
            write: access == Access::Write,
        });
        Ok(authenticated)
    }

    async fn identify(
        &self,
        metadata: &MetadataMap,
        access: Access,
    ) -> Result<Authenticated, Status> {
        // Two credentials of one kind are ambiguous: refuse rather than pick one.
        let ambiguous = ["authorization", SESSION_HEADER, CSRF_HEADER]
            .iter()
            .any(|key| metadata.get_all(*key).iter().count() > 1);
        if ambiguous {
            return Err(unauthenticated());
        }
        if let Some(value) = metadata.get("authorization") {
            let token = value
                .to_str()
                .ok()
                .and_then(bearer)
                .ok_or_else(unauthenticated)?;
            return self.by_token(token).await;
        }
        let session = metadata
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(unauthenticated)?;
        let csrf = metadata.get(CSRF_HEADER).and_then(|v| v.to_str().ok());
        self.by_session(session, access, csrf).await
    }

    /// The owner of a live API token.
    pub(crate) async fn by_token(&self, token: &str) -> Result<Authenticated, Status> {
        if !secrets::looks_like_token(token) {
            return Err(unauthenticated());
        }
        let (user, record) = self
            .store
            .api_token(&secrets::sha256(token))
            .await
            .map_err(status::store)?
            .ok_or_else(unauthenticated)?;
        let credential = Credential::ApiToken {
            name: record.name.clone(),
            prefix: record.prefix.clone(),
        };
        Ok(Authenticated {
            caller: caller(&user, credential),
            user,
            credential: Presented::Token(record),
        })
    }

    /// The holder of a live session; a state-changing call also needs its CSRF token.
    pub(crate) async fn by_session(
        &self,
        session_id: &str,
        access: Access,
        csrf: Option<&str>,
    ) -> Result<Authenticated, Status> {
        if !secrets::looks_like_secret(session_id) {
            return Err(unauthenticated());
        }
        let id_hash = secrets::sha256(session_id);
        let session = self
            .store
            .session(&id_hash)
            .await
            .map_err(status::store)?
            .ok_or_else(unauthenticated)?;
        if access == Access::Write {
            let matches =
                csrf.is_some_and(|c| secrets::same_hash(&secrets::sha256(c), &session.csrf_hash));
            if !matches {
                // A live session's write without its token: a cross-site attempt, the log's
                // business (its tenant's entry names the session as the actor).
                let would_be = caller(&session.user, session.client.credential());
                context::attempted(context::Who {
                    tenant: would_be.tenant,
                    user: would_be.user,
                    subject: &would_be.actor.subject,
                    actor: would_be.actor.to_string(),
                    write: true,
                });
                return Err(Status::permission_denied(
                    "this request needs its session's CSRF token (the X-CSRF-Token header)",
                ));
            }
        }
        Ok(Authenticated {
            caller: caller(&session.user, session.client.credential()),
            user: session.user,
            credential: Presented::Session {
                id_hash,
                client: session.client,
                expires_at: session.expires_at,
            },
        })
    }

    /// The client's address as the gateway saw it (docs/api.md), for the login limiter.
    pub fn client_addr(metadata: &MetadataMap) -> Option<IpAddr> {
        metadata
            .get(CLIENT_ADDR_HEADER)?
            .to_str()
            .ok()?
            .trim()
            .parse()
            .ok()
    }
}

fn caller(user: &User, credential: Credential) -> Caller {
    Caller {
        tenant: user.tenant_id,
        user: user.id,
        role: user.role,
        via_token: matches!(credential, Credential::ApiToken { .. }),
        actor: Actor {
            subject: user.email.clone(),
            credential,
        },
    }
}

/// The token of an `Authorization: Bearer …` value (the scheme is case-insensitive).
fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

pub(crate) fn unauthenticated() -> Status {
    Status::unauthenticated(UNAUTHENTICATED)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_scheme_is_case_insensitive_and_required() {
        assert_eq!(bearer("Bearer tsk_x"), Some("tsk_x"));
        assert_eq!(bearer("bearer  tsk_x"), Some("tsk_x"));
        assert_eq!(bearer("Basic dXNlcg=="), None);
        assert_eq!(bearer("tsk_x"), None);
    }

    #[test]
    fn client_addr_is_an_ip_or_nothing() {
        let mut md = MetadataMap::new();
        assert_eq!(Auth::client_addr(&md), None);
        md.insert(CLIENT_ADDR_HEADER, "203.0.113.7".parse().unwrap());
        assert_eq!(Auth::client_addr(&md), Some("203.0.113.7".parse().unwrap()));
        md.insert(CLIENT_ADDR_HEADER, "not an address".parse().unwrap());
        assert_eq!(Auth::client_addr(&md), None);
    }
}
