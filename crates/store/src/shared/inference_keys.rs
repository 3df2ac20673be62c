// `InferenceKeyStore`, shared by both engines (included). A module of its own, so its imports
// can't collide with the other included files'.

mod inference_keys_sql {
    use super::*;

    use einsora_core::ids::{InferenceKeyId, UserId};

    use crate::accounts::{SecretHash, User};
    use crate::inference_keys::{InferenceKeyRecord, InferenceLimits, KeyScope, NewInferenceKey};

    type DbRow = <Db as sqlx::Database>::Row;

    /// A key's use is noted at most this often, so authenticating isn't a write per request.
    const LAST_USED_GRANULARITY_MS: i64 = 60_000;

    const KEY_COLUMNS: &str = "k.id, k.tenant_id, k.user_id, u.email AS owner, k.name, k.prefix, \
         k.endpoints, k.requests_per_minute, k.tokens_per_minute, k.tokens_per_day, \
         k.created_at, k.revoked_at, k.last_used_at";

    /// A key with its owner, and the owner's tenant's name for `User`.
    static KEY_BY_HASH: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!(
            "SELECT {KEY_COLUMNS}, t.name AS tenant_name, u.role AS user_role \
             FROM inference_keys k JOIN users u ON u.id = k.user_id AND u.disabled_at IS NULL \
             JOIN tenants t ON t.id = u.tenant_id \
             WHERE k.key_hash = $1 AND k.revoked_at IS NULL"
        )
    });
    static KEYS_OF_TENANT: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!(
            "SELECT {KEY_COLUMNS} FROM inference_keys k JOIN users u ON u.id = k.user_id \
             WHERE k.tenant_id = $1 AND ($2 OR k.user_id = $3) ORDER BY k.id"
        )
    });
    static KEY_BY_ID: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!(
            "SELECT {KEY_COLUMNS} FROM inference_keys k JOIN users u ON u.id = k.user_id \
             WHERE k.id = $1"
        )
    });

    fn limit_value(row: &DbRow, column: &str) -> Result<Option<u32>, StoreError> {
        row.try_get::<Option<i64>, _>(column)?
            .map(|l| to_u32("inference limit", l))
            .transpose()
    }

    fn limits_from_row(row: &DbRow) -> Result<InferenceLimits, StoreError> {
        Ok(InferenceLimits {
            requests_per_minute: limit_value(row, "requests_per_minute")?,
            tokens_per_minute: limit_value(row, "tokens_per_minute")?,
            tokens_per_day: limit_value(row, "tokens_per_day")?,
        })
    }

    fn scope_text(scope: &KeyScope) -> Option<String> {
        match scope {
            KeyScope::AllEndpoints => None,
            KeyScope::Endpoints(ids) => {
                let ids: Vec<String> = ids.iter().map(ToString::to_string).collect();
                Some(serde_json::Value::from(ids).to_string())
            }
        }
    }

    fn scope_from(text: Option<String>) -> Result<KeyScope, StoreError> {
        let Some(text) = text else {
            return Ok(KeyScope::AllEndpoints);
        };
        let ids: Vec<String> =
            serde_json::from_str(&text).map_err(|_| StoreError::corrupt("key scope", &text))?;
        let ids = ids
            .iter()
            .map(|id| id.parse().map_err(|_| StoreError::corrupt("key scope", id)))
            .collect::<Result<_, _>>()?;
        Ok(KeyScope::Endpoints(ids))
    }

    fn key_from_row(row: &DbRow) -> Result<InferenceKeyRecord, StoreError> {
        let time = |column: &str| -> Result<Option<time::OffsetDateTime>, StoreError> {
            row.try_get::<Option<i64>, _>(column)?
                .map(from_ms)
                .transpose()
        };
        Ok(InferenceKeyRecord {
            id: InferenceKeyId::from_uuid(row.try_get("id")?),
            tenant_id: TenantId::from_uuid(row.try_get("tenant_id")?),
            user_id: UserId::from_uuid(row.try_get("user_id")?),
            owner: row.try_get("owner")?,
            name: row.try_get("name")?,
            prefix: row.try_get("prefix")?,
            scope: scope_from(row.try_get("endpoints")?)?,
            limits: limits_from_row(row)?,
            created_at: from_ms(row.try_get("created_at")?)?,
            revoked_at: time("revoked_at")?,
            last_used_at: time("last_used_at")?,
        })
    }

    fn owner_from_row(row: &DbRow, key: &InferenceKeyRecord) -> Result<User, StoreError> {
        Ok(User {
            id: key.user_id,
            tenant_id: key.tenant_id,
            tenant_name: row.try_get("tenant_name")?,
            email: key.owner.clone(),
            role: parse_word("role", &row.try_get::<String, _>("user_role")?)?,
        })
    }

    #[async_trait::async_trait]
    impl crate::InferenceKeyStore for ThisStore {
        #[tracing::instrument(level = "debug", name = "store.create_inference_key", skip_all)]
        async fn create_inference_key(
            &self,
            k: &NewInferenceKey,
        ) -> Result<InferenceKeyRecord, StoreError> {
            let now = now_ms();
            let mut conn = self.writer().await?;
            let mut tx = begin_write(&mut conn).await?;
            // The user's row is locked, so two creates of one name can't both pass the check.
            let owner: Option<String> = sqlx::query_scalar(concat!(
                "SELECT email FROM users WHERE id = $1 AND tenant_id = $2",
                for_update!()
            ))
            .bind(k.user_id.as_uuid())
            .bind(k.tenant_id.as_uuid())
            .fetch_optional(&mut *tx)
            .await?;
            let Some(owner) = owner else {
                return Err(StoreError::NotFound);
            };
            let taken: Option<i32> = sqlx::query_scalar(
                "SELECT 1 FROM inference_keys WHERE user_id = $1 AND name = $2 \
                 AND revoked_at IS NULL",
            )
            .bind(k.user_id.as_uuid())
            .bind(&k.name)
            .fetch_optional(&mut *tx)
            .await?;
            if taken.is_some() {
                return Err(StoreError::Taken(crate::Taken::InferenceKeyName(
                    k.name.clone(),
                )));
            }
            let limit = |l: Option<u32>| l.map(i64::from);
            sqlx::query(
                "INSERT INTO inference_keys (id, tenant_id, user_id, name, prefix, key_hash, \
                 endpoints, requests_per_minute, tokens_per_minute, tokens_per_day, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
            )
            .bind(k.id.as_uuid())
            .bind(k.tenant_id.as_uuid())
            .bind(k.user_id.as_uuid())
            .bind(&k.name)
            .bind(&k.prefix)
            .bind(&k.key_hash[..])
            .bind(scope_text(&k.scope))
            .bind(limit(k.limits.requests_per_minute))
            .bind(limit(k.limits.tokens_per_minute))
            .bind(limit(k.limits.tokens_per_day))
            .bind(now)
            .execute(&mut *tx)
            .await?;
            commit_action(tx, Some(ActivityObject::of(k.id))).await?;
            Ok(InferenceKeyRecord {
                id: k.id,
                tenant_id: k.tenant_id,
                user_id: k.user_id,
                owner,
                name: k.name.clone(),
                prefix: k.prefix.clone(),
                scope: k.scope.clone(),
                limits: k.limits,
                created_at: from_ms(now)?,
                revoked_at: None,
                last_used_at: None,
            })
        }

        #[tracing::instrument(level = "debug", name = "store.inference_key", skip_all)]
        async fn inference_key(
            &self,
            key_hash: &SecretHash,
        ) -> Result<Option<(User, InferenceKeyRecord)>, StoreError> {
            let now = now_ms();
            let Some(row) = sqlx::query(sqlx::AssertSqlSafe(KEY_BY_HASH.as_str()))
                .bind(&key_hash[..])
                .fetch_optional(self.reader())
                .await?
            else {
                return Ok(None);
            };
            let key = key_from_row(&row)?;
            let user = owner_from_row(&row, &key)?;
            let last: Option<i64> = row.try_get("last_used_at")?;
            if last.is_none_or(|l| l <= now - LAST_USED_GRANULARITY_MS) {
                sqlx::query("UPDATE inference_keys SET last_used_at = $1 WHERE id = $2")
                    .bind(now)
                    .bind(key.id.as_uuid())
                    .execute(&mut *self.writer().await?)
                    .await?;
            }
            Ok(Some((user, key)))
        }

        #[tracing::instrument(level = "debug", name = "store.inference_keys", skip_all)]
        async fn inference_keys(
            &self,
            tenant: TenantId,
            owner: Option<UserId>,
        ) -> Result<Vec<InferenceKeyRecord>, StoreError> {
            let rows = sqlx::query(sqlx::AssertSqlSafe(KEYS_OF_TENANT.as_str()))
                .bind(tenant.as_uuid())
                .bind(owner.is_none())
                .bind(owner.map(|o| *o.as_uuid()))
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(key_from_row).collect()
        }

        #[tracing::instrument(level = "debug", name = "store.revoke_inference_key", skip_all)]
        async fn revoke_inference_key(
            &self,
            tenant: TenantId,
            owner: Option<UserId>,
            id: InferenceKeyId,
        ) -> Result<Option<InferenceKeyRecord>, StoreError> {
            let mut conn = self.writer().await?;
            let mut tx = begin_write(&mut conn).await?;
            let done = sqlx::query(
                "UPDATE inference_keys SET revoked_at = COALESCE(revoked_at, $1) \
                 WHERE id = $2 AND tenant_id = $3 AND ($4 OR user_id = $5)",
            )
            .bind(now_ms())
            .bind(id.as_uuid())
            .bind(tenant.as_uuid())
            .bind(owner.is_none())
            .bind(owner.map(|o| *o.as_uuid()))
            .execute(&mut *tx)
            .await?;
            if done.rows_affected() == 0 {
                return Ok(None);
            }
            let row = sqlx::query(sqlx::AssertSqlSafe(KEY_BY_ID.as_str()))
                .bind(id.as_uuid())
                .fetch_one(&mut *tx)
                .await?;
            let key = key_from_row(&row)?;
            commit_action(tx, Some(ActivityObject::of(id))).await?;
            Ok(Some(key))
        }

        #[tracing::instrument(level = "debug", name = "store.inference_limits", skip_all)]
        async fn inference_limits(&self, tenant: TenantId) -> Result<InferenceLimits, StoreError> {
            let row = sqlx::query(
                "SELECT requests_per_minute, tokens_per_minute, tokens_per_day \
                 FROM inference_limits WHERE tenant_id = $1",
            )
            .bind(tenant.as_uuid())
            .fetch_optional(self.reader())
            .await?;
            row.map_or(Ok(InferenceLimits::default()), |row| limits_from_row(&row))
        }

        #[tracing::instrument(level = "debug", name = "store.set_inference_limits", skip_all)]
        async fn set_inference_limits(
            &self,
            tenant: TenantId,
            limits: &InferenceLimits,
        ) -> Result<(), StoreError> {
            let limit = |l: Option<u32>| l.map(i64::from);
            let mut conn = self.writer().await?;
            let mut tx = begin_write(&mut conn).await?;
            if limits.is_empty() {
                sqlx::query("DELETE FROM inference_limits WHERE tenant_id = $1")
                    .bind(tenant.as_uuid())
                    .execute(&mut *tx)
                    .await?;
            } else {
                sqlx::query(
                    "INSERT INTO inference_limits (tenant_id, requests_per_minute, \
                     tokens_per_minute, tokens_per_day, updated_at) VALUES ($1, $2, $3, $4, $5) \
                     ON CONFLICT (tenant_id) DO UPDATE SET \
                     requests_per_minute = excluded.requests_per_minute, \
                     tokens_per_minute = excluded.tokens_per_minute, \
                     tokens_per_day = excluded.tokens_per_day, updated_at = excluded.updated_at",
                )
                .bind(tenant.as_uuid())
                .bind(limit(limits.requests_per_minute))
                .bind(limit(limits.tokens_per_minute))
                .bind(limit(limits.tokens_per_day))
                .bind(now_ms())
                .execute(&mut *tx)
                .await?;
            }
            commit_action(tx, Some(ActivityObject::of(tenant))).await
        }
    }
}
