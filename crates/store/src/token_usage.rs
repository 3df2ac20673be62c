//! Token usage: the tokens endpoints' answers used, as their engines counted them, per hour,
//! tenant, endpoint, inference key (none for an API token) and user (migration 0020). The
//! access proxy sends them in batches (`RecordTokenUsage`), each added once; `GET /v1/usage`
//! reads them per hour or summed, and an inference key's daily limit reads what it used since
//! the start of the day.

use async_trait::async_trait;
use einsora_core::ids::{InferenceKeyId, TenantId, UserId, WorkloadId};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::StoreError;

/// How long a batch's ID is remembered, so one sent again adds nothing.
pub const BATCH_MEMORY: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

#[async_trait]
pub trait TokenUsageStore: Send + Sync {
    /// Adds each count to its row (made at zero if there is none), all in one transaction,
    /// unless a batch of this ID was added in the last [`BATCH_MEMORY`]: `false` then, and
    /// nothing changes. Counts that name the same row are added together.
    async fn record_token_usage(
        &self,
        batch: Uuid,
        counts: &[TokenCount],
    ) -> Result<bool, StoreError>;

    /// One page of the tenant's token rows whose hour starts in `[from, to)`, oldest hour
    /// first, then by row ID.
    async fn token_usage_of(
        &self,
        tenant: TenantId,
        page: &TokenUsagePage,
    ) -> Result<Vec<TokenUsage>, StoreError>;

    /// The tenant's token rows whose hour starts in `[from, to)`, summed per endpoint, key
    /// and user (`id` and `hour_start` are `None`); at most `limit`, by endpoint, user, key.
    async fn token_usage_summed(
        &self,
        tenant: TenantId,
        page: &TokenUsagePage,
    ) -> Result<Vec<TokenUsage>, StoreError>;

    /// What a key, or the whole tenant (every key and API token), used in the hours that
    /// start at or after `since` (the start of today, for a daily limit).
    async fn tokens_used(
        &self,
        tenant: TenantId,
        of: TokensOf,
        since: OffsetDateTime,
    ) -> Result<TokensUsed, StoreError>;
}

/// Tokens one answer (or several) used, to add to the row of its hour.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenCount {
    pub tenant: TenantId,
    pub endpoint: WorkloadId,
    /// The inference key the requests came with; `None` for an API token.
    pub key: Option<InferenceKeyId>,
    pub user: UserId,
    /// On the hour, UTC.
    pub hour_start: OffsetDateTime,
    pub requests: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// A row of token usage: one hour's, or summed over a period (no ID, no hour).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenUsage {
    pub id: Option<Uuid>,
    pub tenant: TenantId,
    pub endpoint: WorkloadId,
    pub key: Option<InferenceKeyId>,
    pub user: UserId,
    pub hour_start: Option<OffsetDateTime>,
    pub requests: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// Which token rows are read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenUsagePage {
    pub from: OffsetDateTime,
    pub to: OffsetDateTime,
    /// Only this user's (a member's view).
    pub user: Option<UserId>,
    /// Only rows after this one (hour, then ID): the last of the previous page.
    pub after: Option<(OffsetDateTime, Uuid)>,
    pub limit: u32,
}

/// Whose tokens `tokens_used` sums.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokensOf {
    /// Every request of the tenant's, with a key or an API token.
    Tenant,
    /// Those made with this inference key.
    Key(InferenceKeyId),
}

/// Summed counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokensUsed {
    pub requests: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

impl TokensUsed {
    /// Prompt and completion tokens together (what a tokens-per-day limit counts).
    pub fn total(&self) -> u64 {
        self.prompt_tokens.saturating_add(self.completion_tokens)
    }
}
