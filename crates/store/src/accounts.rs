//! Accounts: tenants' users, password credentials, dashboard sessions, API tokens, quotas and
//! one-time access tickets. Secrets are stored only as hashes.

use async_trait::async_trait;

#[async_trait]
pub trait AccountStore: Send + Sync {}
