//! Accounts: tenants' users, password credentials, dashboard sessions, API tokens, quotas and
//! one-time access tickets. Secrets are stored only as hashes: the callers hash them (SHA-256 for
//! sessions, CSRF tokens, API tokens and tickets; argon2id PHC strings for passwords), so no
//! secret ever reaches the store.

use async_trait::async_trait;
use einsora_core::ids::{TenantId, TokenId, UserId, WorkloadId};
use einsora_core::reasons::SessionClient;
use einsora_core::role::Role;
use time::OffsetDateTime;

use crate::StoreError;

/// A SHA-256 digest of a secret.
pub type SecretHash = [u8; 32];

/// The hash a secret (a token, a ticket, a session ID) is stored and looked up by.
pub fn secret_hash(secret: &str) -> SecretHash {
    use sha2::Digest;
    sha2::Sha256::digest(secret.as_bytes()).into()
}

#[derive(Debug, Clone)]
pub struct NewUser {
    pub id: UserId,
    pub tenant_id: TenantId,
    /// Already normalised by the caller (trimmed, lowercase); unique across the installation.
    pub email: String,
    pub display_name: String,
    pub role: Role,
    /// The password as an argon2id PHC string.
    pub phc: String,
}

/// A user with their tenant's name, as every authenticated request sees them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub id: UserId,
    pub tenant_id: TenantId,
    pub tenant_name: String,
    pub email: String,
    pub role: Role,
}

/// What a login checks: the user and their password's PHC string.
#[derive(Debug, Clone)]
pub struct PasswordLogin {
    pub user: User,
    pub phc: String,
}

#[derive(Debug, Clone)]
pub struct NewSession {
    pub id_hash: SecretHash,
    pub user_id: UserId,
    pub csrf_hash: SecretHash,
    /// The client's address at login, for the operator.
    pub address: String,
    pub client: SessionClient,
    pub expires_at: OffsetDateTime,
}

/// A live session, found by the hash of its ID.
#[derive(Debug, Clone)]
pub struct SessionRecord {
    pub user: User,
    pub csrf_hash: SecretHash,
    pub client: SessionClient,
    pub expires_at: OffsetDateTime,
}

#[derive(Debug, Clone)]
pub struct NewApiToken {
    pub id: TokenId,
    pub user_id: UserId,
    pub tenant_id: TenantId,
    pub name: String,
    /// The token's first characters (`tsk_Ab3x`): not a secret.
    pub prefix: String,
    pub token_hash: SecretHash,
    pub expires_at: Option<OffsetDateTime>,
}

/// An API token without its secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiTokenRecord {
    pub id: TokenId,
    pub user_id: UserId,
    pub name: String,
    pub prefix: String,
    pub created_at: OffsetDateTime,
    pub expires_at: Option<OffsetDateTime>,
    pub revoked_at: Option<OffsetDateTime>,
    pub last_used_at: Option<OffsetDateTime>,
}

#[derive(Debug, Clone)]
pub struct NewTicket {
    pub ticket_hash: SecretHash,
    pub workload_id: WorkloadId,
    pub tenant_id: TenantId,
    pub user_id: UserId,
    pub expires_at: OffsetDateTime,
    pub granted_by: Grant,
}

/// The credential that asked for a ticket: what the notebook sessions it opens live as long
/// as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Grant {
    /// A browser session, by its ID's hash.
    Session(SecretHash),
    /// An API token, by its ID.
    Token(TokenId),
}

/// Who a redeemed ticket was issued to, and on whose credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedeemedTicket {
    pub workload_id: WorkloadId,
    pub user: User,
    pub granted_by: Grant,
}

#[async_trait]
pub trait AccountStore: Send + Sync {
    /// The tenant with this slug, if any.
    async fn tenant_by_slug(&self, slug: &str) -> Result<Option<TenantId>, StoreError>;

    /// The tenant's first user (its founder), if it has any.
    async fn tenant_founder(&self, tenant: TenantId) -> Result<Option<UserId>, StoreError>;

    /// A user with their password. `Taken(Email)` if the email is taken.
    async fn create_user(&self, user: &NewUser) -> Result<(), StoreError>;

    /// The enabled user with this email, and their password.
    async fn password_login(&self, email: &str) -> Result<Option<PasswordLogin>, StoreError>;

    /// Replaces the user's password; `NotFound` for an unknown user.
    async fn set_password(&self, user: UserId, phc: &str) -> Result<(), StoreError>;

    /// Records a session, and forgets the installation's expired ones.
    async fn create_session(&self, session: &NewSession) -> Result<(), StoreError>;

    /// The session whose ID hashes to `id_hash`, unless it has expired.
    async fn session(&self, id_hash: &SecretHash) -> Result<Option<SessionRecord>, StoreError>;

    /// Ends one session; false if there was none.
    async fn delete_session(&self, id_hash: &SecretHash) -> Result<bool, StoreError>;

    /// Ends every session of the user but `keep` (after a password change).
    async fn delete_other_sessions(
        &self,
        user: UserId,
        keep: Option<&SecretHash>,
    ) -> Result<u64, StoreError>;

    /// `InvalidInput` if the user already has an unrevoked token of that name.
    async fn create_api_token(&self, token: &NewApiToken) -> Result<ApiTokenRecord, StoreError>;

    /// The unrevoked, unexpired token whose secret hashes to `token_hash`, with its owner;
    /// notes its use (at most once a minute, to spare the writer).
    async fn api_token(
        &self,
        token_hash: &SecretHash,
    ) -> Result<Option<(User, ApiTokenRecord)>, StoreError>;

    /// The user's tokens, revoked and expired ones included, oldest first.
    async fn api_tokens(&self, user: UserId) -> Result<Vec<ApiTokenRecord>, StoreError>;

    /// Revokes the user's token (again: no change); `None` if the user has no such token.
    async fn revoke_api_token(
        &self,
        user: UserId,
        id: TokenId,
    ) -> Result<Option<ApiTokenRecord>, StoreError>;

    /// Records a ticket, and forgets the installation's expired ones.
    async fn create_ticket(&self, ticket: &NewTicket) -> Result<(), StoreError>;

    /// Takes a ticket for `workload` once, atomically: `None` if it is unknown, for another
    /// workload, expired or already taken.
    async fn redeem_ticket(
        &self,
        ticket_hash: &SecretHash,
        workload: WorkloadId,
    ) -> Result<Option<RedeemedTicket>, StoreError>;

    /// Which of `grants` still stand, in order: a session that exists and hasn't expired, a
    /// token neither revoked nor expired.
    async fn grants_live(&self, grants: &[Grant]) -> Result<Vec<bool>, StoreError>;
}
