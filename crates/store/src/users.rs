//! A tenant's users as its admins manage them: roles, disabling, removal, and the one-time
//! links (invites, password resets) an admin passes on by hand. Secrets are stored only as
//! their SHA-256 (the callers hash them).

use async_trait::async_trait;
use einsora_core::ids::{AccountLinkId, TeamId, TenantId, UserId};
use einsora_core::role::Role;
use time::OffsetDateTime;

use crate::accounts::{SecretHash, User};
use crate::{StoreError, Taken};

/// A user as their tenant's user list shows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserRecord {
    pub id: UserId,
    pub email: String,
    pub display_name: String,
    pub role: Role,
    /// Their team, if they are in one.
    pub team_id: Option<TeamId>,
    pub created_at: OffsetDateTime,
    /// Set while they may not sign in.
    pub disabled_at: Option<OffsetDateTime>,
}

/// What an admin changes of a user; `None` leaves it as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserChange {
    pub role: Option<Role>,
    /// `Some(true)` disables (ending every session and revoking every token at once),
    /// `Some(false)` enables again.
    pub disabled: Option<bool>,
}

/// Why a change to a user was refused although the caller may make it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UserRefusal {
    #[error("the tenant would have no owner left who can sign in: make another owner first")]
    LastOwner,
    #[error(
        "they still own {workloads} workload(s) and {machines} machine(s): delete those (or \
         revoke the machines) first, or disable the user instead"
    )]
    StillOwns { workloads: u64, machines: u64 },
}

/// An invite or a password reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkKind {
    Invite,
    PasswordReset,
}

impl LinkKind {
    pub(crate) fn word(self) -> &'static str {
        match self {
            LinkKind::Invite => "invite",
            LinkKind::PasswordReset => "password_reset",
        }
    }

    pub(crate) fn from_word(word: &str) -> Option<LinkKind> {
        match word {
            "invite" => Some(LinkKind::Invite),
            "password_reset" => Some(LinkKind::PasswordReset),
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct NewAccountLink {
    pub id: AccountLinkId,
    pub kind: LinkKind,
    pub tenant_id: TenantId,
    /// An invite: the invitee's address (normalised by the caller). A reset: ignored, the
    /// user's own is recorded.
    pub email: String,
    /// An invite: the role the new user gets. A reset: ignored.
    pub role: Role,
    /// A reset: whose password it sets. An invite: `None`.
    pub user_id: Option<UserId>,
    pub secret_hash: SecretHash,
    pub created_by: UserId,
    pub expires_at: OffsetDateTime,
}

/// A link without its secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountLinkRecord {
    pub id: AccountLinkId,
    pub kind: LinkKind,
    pub email: String,
    pub role: Role,
    pub user_id: Option<UserId>,
    pub created_by: UserId,
    pub created_at: OffsetDateTime,
    pub expires_at: OffsetDateTime,
    pub used_at: Option<OffsetDateTime>,
    pub revoked_at: Option<OffsetDateTime>,
}

/// Who accepts an invite: the new user's ID, name and password (argon2id PHC).
#[derive(Debug, Clone)]
pub struct Invitee {
    pub id: UserId,
    pub display_name: String,
    pub phc: String,
}

#[async_trait]
pub trait UserStore: Send + Sync {
    /// The tenant's users, oldest first.
    async fn users(&self, tenant: TenantId) -> Result<Vec<UserRecord>, StoreError>;

    /// One of the tenant's users.
    async fn user_of(&self, tenant: TenantId, id: UserId)
    -> Result<Option<UserRecord>, StoreError>;

    /// Changes a user of the tenant, in one transaction with the tenant's users locked:
    /// disabling ends their sessions and revokes their tokens; `Refused(LastOwner)` if no
    /// enabled owner would be left. `None` for no such user.
    async fn update_user(
        &self,
        tenant: TenantId,
        id: UserId,
        change: &UserChange,
    ) -> Result<Option<UserRecord>, StoreError>;

    /// Removes a user of the tenant with their sessions, tokens and enrolment tokens;
    /// `Refused` while they are the last owner or own live workloads or machines. False for
    /// no such user.
    async fn remove_user(&self, tenant: TenantId, id: UserId) -> Result<bool, StoreError>;

    /// Records a link. An invite for an address that already has an account is
    /// `Taken(Email)`; a reset for a user not of the tenant is `NotFound`.
    async fn create_account_link(
        &self,
        link: &NewAccountLink,
    ) -> Result<AccountLinkRecord, StoreError>;

    /// The tenant's links of a kind, newest first, used and revoked ones included.
    async fn account_links(
        &self,
        tenant: TenantId,
        kind: LinkKind,
    ) -> Result<Vec<AccountLinkRecord>, StoreError>;

    /// Revokes an unused link of the tenant; `None` if there is no such link.
    async fn revoke_account_link(
        &self,
        tenant: TenantId,
        id: AccountLinkId,
    ) -> Result<Option<AccountLinkRecord>, StoreError>;

    /// Takes an invite once, atomically, and makes its user: `None` if the secret is unknown,
    /// not an invite, used, revoked or expired. `Taken(Email)` (the link left unused) if the
    /// address got an account meanwhile.
    async fn accept_invite(
        &self,
        secret_hash: &SecretHash,
        invitee: &Invitee,
    ) -> Result<Option<User>, StoreError>;

    /// Takes a password reset once and sets the password, ending the user's sessions: `None`
    /// if the secret is unknown, not a reset, used, revoked or expired, or its user disabled.
    async fn reset_password(
        &self,
        secret_hash: &SecretHash,
        phc: &str,
    ) -> Result<Option<User>, StoreError>;
}

impl From<UserRefusal> for StoreError {
    fn from(refusal: UserRefusal) -> Self {
        StoreError::Refused(refusal)
    }
}

/// An invite for an address that has an account.
pub(crate) fn email_taken(email: &str) -> StoreError {
    StoreError::Taken(Taken::Email(email.to_owned()))
}
