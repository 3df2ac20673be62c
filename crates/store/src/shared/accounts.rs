// `AccountStore`, shared by both engines (included). A module of its own, so its imports can't
// collide with the other included files'.

mod accounts_sql {
    use super::*;

    use einsora_core::ids::{TokenId, UserId};
    use einsora_core::reasons::SessionClient;

    use crate::accounts::{
        ApiTokenRecord, Grant, NewApiToken, NewSession, NewTicket, NewUser, PasswordLogin,
        RedeemedTicket, SecretHash, SessionRecord, User,
    };
    use crate::time_ms::to_ms;

    /// A token's use is noted at most this often, so authenticating isn't a write per request.
    const LAST_USED_GRANULARITY_MS: i64 = 60_000;

    include!("account_rows.rs");
    include!("account_tickets.rs");

    #[async_trait::async_trait]
    impl crate::AccountStore for ThisStore {
        #[tracing::instrument(level = "debug", name = "store.tenant_by_slug", skip_all)]
        async fn tenant_by_slug(&self, slug: &str) -> Result<Option<TenantId>, StoreError> {
            let id: Option<Uuid> = sqlx::query_scalar("SELECT id FROM tenants WHERE slug = $1")
                .bind(slug)
                .fetch_optional(self.reader())
                .await?;
            Ok(id.map(TenantId::from_uuid))
        }

        #[tracing::instrument(level = "debug", name = "store.tenant_founder", skip_all)]
        async fn tenant_founder(&self, tenant: TenantId) -> Result<Option<UserId>, StoreError> {
            let id: Option<Uuid> = sqlx::query_scalar(
                "SELECT id FROM users WHERE tenant_id = $1 ORDER BY created_at, id LIMIT 1",
            )
            .bind(tenant.as_uuid())
            .fetch_optional(self.reader())
            .await?;
            Ok(id.map(UserId::from_uuid))
        }

        #[tracing::instrument(level = "debug", name = "store.create_user", skip_all)]
        async fn create_user(&self, user: &NewUser) -> Result<(), StoreError> {
            let mut conn = self.writer().await?;
            let mut tx = begin_write(&mut conn).await?;
            insert_user(&mut tx, user, now_ms()).await?;
            tx.commit().await?;
            Ok(())
        }

        #[tracing::instrument(level = "debug", name = "store.password_login", skip_all)]
        async fn password_login(&self, email: &str) -> Result<Option<PasswordLogin>, StoreError> {
            let row = sqlx::query(sqlx::AssertSqlSafe(LOGIN_BY_EMAIL.as_str()))
                .bind(email)
                .fetch_optional(self.reader())
                .await?;
            row.map(|row| {
                Ok(PasswordLogin {
                    user: user_from_row(&row)?,
                    phc: row.try_get("phc")?,
                })
            })
            .transpose()
        }

        #[tracing::instrument(level = "debug", name = "store.set_password", skip_all)]
        async fn set_password(&self, user: UserId, phc: &str) -> Result<(), StoreError> {
            let mut conn = self.writer().await?;
            let mut tx = begin_write(&mut conn).await?;
            let done = sqlx::query(
                "UPDATE password_credentials SET phc = $1, updated_at = $2 WHERE user_id = $3",
            )
            .bind(phc)
            .bind(now_ms())
            .bind(user.as_uuid())
            .execute(&mut *tx)
            .await?;
            if done.rows_affected() == 0 {
                return Err(StoreError::NotFound);
            }
            commit_action(tx, Some(ActivityObject::of(user))).await
        }

        #[tracing::instrument(level = "debug", name = "store.create_session", skip_all)]
        async fn create_session(&self, s: &NewSession) -> Result<(), StoreError> {
            let now = now_ms();
            let mut conn = self.writer().await?;
            let mut tx = begin_write(&mut conn).await?;
            sqlx::query("DELETE FROM sessions WHERE expires_at <= $1")
                .bind(now)
                .execute(&mut *tx)
                .await?;
            sqlx::query(
                "INSERT INTO sessions (id_hash, user_id, csrf_hash, address, client, created_at, \
                 expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .bind(&s.id_hash[..])
            .bind(s.user_id.as_uuid())
            .bind(&s.csrf_hash[..])
            .bind(&s.address)
            .bind(s.client.word())
            .bind(now)
            .bind(to_ms(s.expires_at))
            .execute(&mut *tx)
            .await?;
            commit_action(tx, Some(ActivityObject::of(s.user_id))).await
        }

        #[tracing::instrument(level = "debug", name = "store.session", skip_all)]
        async fn session(&self, id_hash: &SecretHash) -> Result<Option<SessionRecord>, StoreError> {
            let row = sqlx::query(sqlx::AssertSqlSafe(SESSION_BY_HASH.as_str()))
                .bind(&id_hash[..])
                .bind(now_ms())
                .fetch_optional(self.reader())
                .await?;
            row.map(|row| {
                Ok(SessionRecord {
                    user: user_from_row(&row)?,
                    csrf_hash: hash_from("CSRF hash", row.try_get("csrf_hash")?)?,
                    client: {
                        let word: String = row.try_get("client")?;
                        SessionClient::from_word(&word)
                            .ok_or_else(|| StoreError::corrupt("session client", &word))?
                    },
                    expires_at: from_ms(row.try_get("expires_at")?)?,
                })
            })
            .transpose()
        }

        #[tracing::instrument(level = "debug", name = "store.delete_session", skip_all)]
        async fn delete_session(&self, id_hash: &SecretHash) -> Result<bool, StoreError> {
            let mut conn = self.writer().await?;
            let mut tx = begin_write(&mut conn).await?;
            let done = sqlx::query("DELETE FROM sessions WHERE id_hash = $1")
                .bind(&id_hash[..])
                .execute(&mut *tx)
                .await?;
            commit_action(tx, None).await?;
            Ok(done.rows_affected() > 0)
        }

        #[tracing::instrument(level = "debug", name = "store.delete_other_sessions", skip_all)]
        async fn delete_other_sessions(
            &self,
            user: UserId,
            keep: Option<&SecretHash>,
        ) -> Result<u64, StoreError> {
            // No session's hash is empty, so without `keep` every session goes.
            let keep: &[u8] = keep.map_or(&[], |k| &k[..]);
            let done = sqlx::query("DELETE FROM sessions WHERE user_id = $1 AND id_hash <> $2")
                .bind(user.as_uuid())
                .bind(keep)
                .execute(&mut *self.writer().await?)
                .await?;
            Ok(done.rows_affected())
        }

        #[tracing::instrument(level = "debug", name = "store.create_api_token", skip_all)]
        async fn create_api_token(&self, t: &NewApiToken) -> Result<ApiTokenRecord, StoreError> {
            let now = now_ms();
            let mut conn = self.writer().await?;
            let mut tx = begin_write(&mut conn).await?;
            // The user's row is locked, so two creates of one name can't both pass the check.
            let owner: Option<Uuid> =
                sqlx::query_scalar(concat!("SELECT id FROM users WHERE id = $1", for_update!()))
                    .bind(t.user_id.as_uuid())
                    .fetch_optional(&mut *tx)
                    .await?;
            if owner.is_none() {
                return Err(StoreError::NotFound);
            }
            let taken: Option<i32> = sqlx::query_scalar(
                "SELECT 1 FROM api_tokens WHERE user_id = $1 AND name = $2 \
                 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $3)",
            )
            .bind(t.user_id.as_uuid())
            .bind(&t.name)
            .bind(now)
            .fetch_optional(&mut *tx)
            .await?;
            if taken.is_some() {
                return Err(StoreError::Taken(crate::Taken::TokenName(t.name.clone())));
            }
            sqlx::query(
                "INSERT INTO api_tokens (id, user_id, tenant_id, name, prefix, token_hash, \
                 created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            )
            .bind(t.id.as_uuid())
            .bind(t.user_id.as_uuid())
            .bind(t.tenant_id.as_uuid())
            .bind(&t.name)
            .bind(&t.prefix)
            .bind(&t.token_hash[..])
            .bind(now)
            .bind(t.expires_at.map(to_ms))
            .execute(&mut *tx)
            .await?;
            commit_action(tx, Some(ActivityObject::of(t.id))).await?;
            Ok(ApiTokenRecord {
                id: t.id,
                user_id: t.user_id,
                name: t.name.clone(),
                prefix: t.prefix.clone(),
                created_at: from_ms(now)?,
                expires_at: t.expires_at.map(to_ms).map(from_ms).transpose()?,
                revoked_at: None,
                last_used_at: None,
            })
        }

        #[tracing::instrument(level = "debug", name = "store.api_token", skip_all)]
        async fn api_token(
            &self,
            token_hash: &SecretHash,
        ) -> Result<Option<(User, ApiTokenRecord)>, StoreError> {
            let now = now_ms();
            let Some(row) = sqlx::query(sqlx::AssertSqlSafe(TOKEN_BY_HASH.as_str()))
                .bind(&token_hash[..])
                .bind(now)
                .fetch_optional(self.reader())
                .await?
            else {
                return Ok(None);
            };
            let (user, token) = (user_from_row(&row)?, token_from_row(&row)?);
            let last: Option<i64> = row.try_get("last_used_at")?;
            if last.is_none_or(|l| l <= now - LAST_USED_GRANULARITY_MS) {
                sqlx::query("UPDATE api_tokens SET last_used_at = $1 WHERE id = $2")
                    .bind(now)
                    .bind(token.id.as_uuid())
                    .execute(&mut *self.writer().await?)
                    .await?;
            }
            Ok(Some((user, token)))
        }

        #[tracing::instrument(level = "debug", name = "store.api_tokens", skip_all)]
        async fn api_tokens(&self, user: UserId) -> Result<Vec<ApiTokenRecord>, StoreError> {
            let rows = sqlx::query(sqlx::AssertSqlSafe(TOKENS_OF_USER.as_str()))
                .bind(user.as_uuid())
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(token_from_row).collect()
        }

        #[tracing::instrument(level = "debug", name = "store.revoke_api_token", skip_all)]
        async fn revoke_api_token(
            &self,
            user: UserId,
            id: TokenId,
        ) -> Result<Option<ApiTokenRecord>, StoreError> {
            let mut conn = self.writer().await?;
            let mut tx = begin_write(&mut conn).await?;
            let done = sqlx::query(
                "UPDATE api_tokens SET revoked_at = COALESCE(revoked_at, $1) \
                 WHERE id = $2 AND user_id = $3",
            )
            .bind(now_ms())
            .bind(id.as_uuid())
            .bind(user.as_uuid())
            .execute(&mut *tx)
            .await?;
            if done.rows_affected() == 0 {
                return Ok(None);
            }
            let row = sqlx::query(sqlx::AssertSqlSafe(TOKEN_BY_ID.as_str()))
                .bind(id.as_uuid())
                .fetch_one(&mut *tx)
                .await?;
            let token = token_from_row(&row)?;
            commit_action(tx, Some(ActivityObject::of(id))).await?;
            Ok(Some(token))
        }

        #[tracing::instrument(level = "debug", name = "store.create_ticket", skip_all)]
        async fn create_ticket(&self, ticket: &NewTicket) -> Result<(), StoreError> {
            insert_ticket(self, ticket).await
        }

        #[tracing::instrument(level = "debug", name = "store.redeem_ticket", skip_all)]
        async fn redeem_ticket(
            &self,
            ticket_hash: &SecretHash,
            workload: WorkloadId,
        ) -> Result<Option<RedeemedTicket>, StoreError> {
            take_ticket(self, ticket_hash, workload).await
        }

        #[tracing::instrument(level = "debug", name = "store.grants_live", skip_all)]
        async fn grants_live(&self, grants: &[Grant]) -> Result<Vec<bool>, StoreError> {
            live_grants(self, grants).await
        }
    }
}
