//! `UserService`: a tenant's users, their roles, invites and password resets (docs/api.md
//! "Users and roles"). Who may do what is `Role`'s (einsora_core::role); the invariants that
//! need the tenant's rows (one enabled owner left; nothing left owned) are the store's.
//!
//! Invites and resets are one-time secrets shown once to the admin who makes them, stored only
//! as their SHA-256; accepting one needs no other credential.

use std::sync::Arc;

use einsora_core::ids::{AccountLinkId, UserId};
use einsora_core::role::Role;
use einsora_proto::accounts::v1 as pb;
use einsora_proto::accounts::v1::user_service_server::UserService;
use einsora_proto::convert::{ProtoEnum, optional_time, timestamp};
use einsora_store::{AccountLinkRecord, Invitee, LinkKind, NewAccountLink, UserChange, UserRecord};
use time::{Duration, OffsetDateTime};
use tonic::{Request, Response, Status};

use super::passwords::{self, Passwords};
use super::{check_email, check_name, normalize_email, secrets};
use crate::caller::{Access, Auth, Caller};
use crate::{scoped, status};

/// Without `expires_at`: a week to find the e-mail and follow it.
pub const INVITE_LIFETIME: Duration = Duration::days(7);
/// The longest an invite may be asked to last.
pub const MAX_INVITE_LIFETIME: Duration = Duration::days(30);
/// A password reset is for now, not for later.
pub const RESET_LIFETIME: Duration = Duration::hours(24);

/// Unknown, used, revoked and expired secrets all answer this (UNAUTHENTICATED: the secret is
/// the request's credential).
const LINK_GONE: &str = "this link is unknown, used, revoked or expired: ask for a new one";

/// `UserService`.
#[derive(Debug)]
pub struct Users {
    auth: Arc<Auth>,
    passwords: Arc<Passwords>,
}

impl Users {
    pub fn new(auth: Arc<Auth>, passwords: Arc<Passwords>) -> Self {
        Users { auth, passwords }
    }

    /// The caller, an owner or admin, and the user of their tenant they name, whose role they
    /// may manage; themselves only if `self_too`.
    async fn managed(
        &self,
        metadata: &tonic::metadata::MetadataMap,
        raw_id: &str,
        what: &str,
        self_too: bool,
    ) -> Result<(Caller, UserRecord), Status> {
        let caller = self.auth.caller(metadata, Access::Write).await?;
        caller.must_administer(what)?;
        let id: UserId = scoped::id(raw_id)?;
        if id == caller.user && !self_too {
            return Err(status::failed(
                status::Precondition::Conflict,
                format!("you can't {what} for yourself: ask another owner or admin"),
            ));
        }
        let target = self
            .auth
            .store()
            .user_of(caller.tenant, id)
            .await
            .map_err(status::store)?
            .ok_or_else(status::not_found)?;
        if id != caller.user {
            may_manage(&caller, target.role)?;
        }
        Ok((caller, target))
    }
}

/// An admin manages members only; an owner anyone.
fn may_manage(caller: &Caller, role: Role) -> Result<(), Status> {
    if caller.role.may_manage(role) {
        return Ok(());
    }
    Err(Status::permission_denied(format!(
        "an admin manages members only: only an owner may manage or make an {role}"
    )))
}

/// Secrets only a signed-in person may be shown (a leaked script's token mustn't mint them).
fn session_only(caller: &Caller, what: &str) -> Result<(), Status> {
    if caller.via_token {
        return Err(Status::permission_denied(format!(
            "an API token can't {what}: sign in"
        )));
    }
    Ok(())
}

fn user(u: &UserRecord) -> pb::User {
    pb::User {
        id: u.id.to_string(),
        email: u.email.clone(),
        display_name: u.display_name.clone(),
        role: u.role.to_field(),
        created_at: Some(timestamp(u.created_at)),
        disabled_at: u.disabled_at.map(timestamp),
        team_id: u.team_id.map(|t| t.to_string()).unwrap_or_default(),
    }
}

fn link(l: &AccountLinkRecord) -> pb::Invite {
    pb::Invite {
        id: l.id.to_string(),
        email: l.email.clone(),
        role: l.role.to_field(),
        user_id: l.user_id.map(|u| u.to_string()).unwrap_or_default(),
        created_by: l.created_by.to_string(),
        created_at: Some(timestamp(l.created_at)),
        expires_at: Some(timestamp(l.expires_at)),
        used_at: l.used_at.map(timestamp),
        revoked_at: l.revoked_at.map(timestamp),
    }
}

/// When an invite asked to last until `requested` expires: within the bounds, in the future.
fn invite_expiry(
    now: OffsetDateTime,
    requested: Option<OffsetDateTime>,
) -> Result<OffsetDateTime, Status> {
    match requested {
        None => Ok(now + INVITE_LIFETIME),
        Some(at) if at <= now => Err(Status::invalid_argument("expires_at must be in the future")),
        Some(at) if at > now + MAX_INVITE_LIFETIME => Err(Status::invalid_argument(
            "expires_at: an invite lasts at most 30 days",
        )),
        Some(at) => Ok(at),
    }
}

fn new_password(password: &str) -> Result<(), Status> {
    passwords::check_new(password)
        .map_err(|rule| Status::invalid_argument(format!("password: {rule}")))
}

/// A secret as the client sends it: 64 hex digits, or the same answer as an unknown one.
fn link_secret(secret: &str) -> Result<einsora_store::SecretHash, Status> {
    if !secrets::looks_like_secret(secret) {
        return Err(Status::unauthenticated(LINK_GONE));
    }
    Ok(secrets::sha256(secret))
}

#[tonic::async_trait]
impl UserService for Users {
    async fn list_users(
        &self,
        request: Request<pb::ListUsersRequest>,
    ) -> Result<Response<pb::ListUsersResponse>, Status> {
        let caller = self.auth.caller(request.metadata(), Access::Read).await?;
        let users = self
            .auth
            .store()
            .users(caller.tenant)
            .await
            .map_err(status::store)?;
        Ok(Response::new(pb::ListUsersResponse {
            users: users.iter().map(user).collect(),
        }))
    }

    async fn update_user(
        &self,
        request: Request<pb::UpdateUserRequest>,
    ) -> Result<Response<pb::User>, Status> {
        // An owner or admin may move themselves between teams; nothing else of their own.
        let only_team = {
            let req = request.get_ref();
            req.role == 0 && req.disabled.is_none() && req.team_id.is_some()
        };
        let (caller, target) = self
            .managed(
                request.metadata(),
                &request.get_ref().id,
                "change a user",
                only_team,
            )
            .await?;
        let req = request.into_inner();
        let role = match req.role {
            0 => None,
            raw => Some(Role::from_field("role", raw).map_err(status::invalid)?),
        };
        if let Some(role) = role {
            may_manage(&caller, role)?;
        }
        let team = match req.team_id.as_deref() {
            None => None,
            Some("") => Some(None),
            Some(raw) => Some(Some(
                einsora_proto::convert::parse_id::<einsora_core::ids::TeamId>("team_id", raw)
                    .map_err(status::invalid)?,
            )),
        };
        let change = UserChange {
            role,
            disabled: req.disabled,
        };
        let store = self.auth.store();
        let mut updated = store
            .update_user(caller.tenant, target.id, &change)
            .await
            .map_err(status::store)?
            .ok_or_else(status::not_found)?;
        if let Some(team) = team {
            store
                .set_user_team(caller.tenant, target.id, team)
                .await
                .map_err(|e| match e {
                    einsora_store::StoreError::NotFound => {
                        Status::invalid_argument("team_id: your tenant has no such team")
                    }
                    other => status::store(other),
                })?;
            updated = store
                .user_of(caller.tenant, target.id)
                .await
                .map_err(status::store)?
                .ok_or_else(status::not_found)?;
        }
        tracing::info!(user = %updated.id, role = %updated.role, disabled = updated.disabled_at.is_some(), "user changed");
        Ok(Response::new(user(&updated)))
    }

    async fn remove_user(
        &self,
        request: Request<pb::RemoveUserRequest>,
    ) -> Result<Response<pb::RemoveUserResponse>, Status> {
        let (caller, target) = self
            .managed(
                request.metadata(),
                &request.get_ref().id,
                "remove a user",
                false,
            )
            .await?;
        let removed = self
            .auth
            .store()
            .remove_user(caller.tenant, target.id)
            .await
            .map_err(status::store)?;
        if !removed {
            return Err(status::not_found());
        }
        tracing::info!(user = %target.id, "user removed");
        Ok(Response::new(pb::RemoveUserResponse {}))
    }

    async fn create_password_reset(
        &self,
        request: Request<pb::CreatePasswordResetRequest>,
    ) -> Result<Response<pb::CreatePasswordResetResponse>, Status> {
        let (caller, target) = self
            .managed(
                request.metadata(),
                &request.get_ref().id,
                "reset a password",
                false,
            )
            .await?;
        session_only(&caller, "make password resets")?;
        let secret = secrets::new_secret().map_err(status::internal)?;
        let new = NewAccountLink {
            id: AccountLinkId::new(),
            kind: LinkKind::PasswordReset,
            tenant_id: caller.tenant,
            email: target.email.clone(),
            role: target.role,
            user_id: Some(target.id),
            secret_hash: secrets::sha256(&secret),
            created_by: caller.user,
            expires_at: OffsetDateTime::now_utc() + RESET_LIFETIME,
        };
        let record = self
            .auth
            .store()
            .create_account_link(&new)
            .await
            .map_err(status::store)?;
        Ok(Response::new(pb::CreatePasswordResetResponse {
            secret,
            reset: Some(link(&record)),
        }))
    }

    async fn create_invite(
        &self,
        request: Request<pb::CreateInviteRequest>,
    ) -> Result<Response<pb::CreateInviteResponse>, Status> {
        let caller = self.auth.caller(request.metadata(), Access::Write).await?;
        caller.must_administer("invite people")?;
        session_only(&caller, "invite people")?;
        let req = request.into_inner();
        let email = normalize_email(&req.email);
        check_email(&email).map_err(|e| Status::invalid_argument(format!("email: {e}")))?;
        let role = match req.role {
            0 => Role::Member,
            raw => Role::from_field("role", raw).map_err(status::invalid)?,
        };
        may_manage(&caller, role)?;
        let requested =
            optional_time("expires_at", req.expires_at.as_ref()).map_err(status::invalid)?;
        let expires_at = invite_expiry(OffsetDateTime::now_utc(), requested)?;
        let secret = secrets::new_secret().map_err(status::internal)?;
        let new = NewAccountLink {
            id: AccountLinkId::new(),
            kind: LinkKind::Invite,
            tenant_id: caller.tenant,
            email,
            role,
            user_id: None,
            secret_hash: secrets::sha256(&secret),
            created_by: caller.user,
            expires_at,
        };
        let record = self
            .auth
            .store()
            .create_account_link(&new)
            .await
            .map_err(status::store)?;
        tracing::info!(invite = %record.id, role = %record.role, "invite created");
        Ok(Response::new(pb::CreateInviteResponse {
            secret,
            invite: Some(link(&record)),
        }))
    }

    async fn list_invites(
        &self,
        request: Request<pb::ListInvitesRequest>,
    ) -> Result<Response<pb::ListInvitesResponse>, Status> {
        let caller = self.auth.caller(request.metadata(), Access::Read).await?;
        caller.must_administer("see invites")?;
        let invites = self
            .auth
            .store()
            .account_links(caller.tenant, LinkKind::Invite)
            .await
            .map_err(status::store)?;
        Ok(Response::new(pb::ListInvitesResponse {
            invites: invites.iter().map(link).collect(),
        }))
    }

    async fn revoke_invite(
        &self,
        request: Request<pb::RevokeInviteRequest>,
    ) -> Result<Response<pb::Invite>, Status> {
        let caller = self.auth.caller(request.metadata(), Access::Write).await?;
        caller.must_administer("revoke invites")?;
        let id: AccountLinkId = scoped::id(&request.get_ref().id)?;
        let revoked = self
            .auth
            .store()
            .revoke_account_link(caller.tenant, id)
            .await
            .map_err(status::store)?
            .filter(|l| l.kind == LinkKind::Invite)
            .ok_or_else(status::not_found)?;
        Ok(Response::new(link(&revoked)))
    }

    async fn accept_invite(
        &self,
        request: Request<pb::AcceptInviteRequest>,
    ) -> Result<Response<pb::AcceptInviteResponse>, Status> {
        let req = request.into_inner();
        let secret_hash = link_secret(&req.secret)?;
        new_password(&req.password)?;
        let display_name = req.display_name.trim().to_owned();
        if !display_name.is_empty() {
            check_name(&display_name).map_err(|_| {
                Status::invalid_argument("display_name: use 1-64 printable characters")
            })?;
        }
        let invitee = Invitee {
            id: UserId::new(),
            display_name,
            phc: self.passwords.hash(req.password).await?,
        };
        let accepted = self
            .auth
            .store()
            .accept_invite(&secret_hash, &invitee)
            .await
            .map_err(status::store)?
            .ok_or_else(|| Status::unauthenticated(LINK_GONE))?;
        let record = self
            .auth
            .store()
            .user_of(accepted.tenant_id, accepted.id)
            .await
            .map_err(status::store)?
            .ok_or_else(status::not_found)?;
        tracing::info!(user = %accepted.id, tenant = %accepted.tenant_id, "invite accepted");
        Ok(Response::new(pb::AcceptInviteResponse {
            user: Some(user(&record)),
            tenant_name: accepted.tenant_name,
        }))
    }

    async fn reset_password(
        &self,
        request: Request<pb::ResetPasswordRequest>,
    ) -> Result<Response<pb::ResetPasswordResponse>, Status> {
        let req = request.into_inner();
        let secret_hash = link_secret(&req.secret)?;
        new_password(&req.password)?;
        let phc = self.passwords.hash(req.password).await?;
        let reset = self
            .auth
            .store()
            .reset_password(&secret_hash, &phc)
            .await
            .map_err(status::store)?
            .ok_or_else(|| Status::unauthenticated(LINK_GONE))?;
        tracing::info!(user = %reset.id, "password reset");
        Ok(Response::new(pb::ResetPasswordResponse {
            email: reset.email,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invites_last_a_week_unless_asked_within_thirty_days() {
        let now = OffsetDateTime::now_utc();
        assert_eq!(invite_expiry(now, None).unwrap(), now + INVITE_LIFETIME);
        let day = now + Duration::days(1);
        assert_eq!(invite_expiry(now, Some(day)).unwrap(), day);
        assert!(invite_expiry(now, Some(now)).is_err());
        assert!(invite_expiry(now, Some(now + Duration::days(31))).is_err());
    }

    #[test]
    fn a_malformed_secret_answers_as_an_unknown_one() {
        let bad = link_secret("nope").unwrap_err();
        assert_eq!(bad.code(), tonic::Code::Unauthenticated);
        assert_eq!(bad.message(), LINK_GONE);
        assert!(link_secret(&"ab".repeat(32)).is_ok());
    }
}
