// `TokenUsageStore`, shared by both engines (included). A module of its own, so its imports
// can't collide with the other included files'.

mod token_usage_sql {
    use super::*;

    use einsora_core::ids::{InferenceKeyId, UserId};

    use crate::token_usage::{
        BATCH_MEMORY, TokenCount, TokenUsage, TokenUsagePage, TokensOf, TokensUsed,
    };

    type DbRow = <Db as sqlx::Database>::Row;

    /// Adds to the row of a count with a key, or to the one without (each has its own unique
    /// index, as NULLs are never equal).
    const ADD_KEYED: &str = "INSERT INTO token_usage (id, tenant_id, endpoint_id, key_id, \
         user_id, hour_start, requests, prompt_tokens, completion_tokens) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
         ON CONFLICT (tenant_id, hour_start, endpoint_id, user_id, key_id) \
         WHERE key_id IS NOT NULL DO UPDATE SET \
         requests = token_usage.requests + excluded.requests, \
         prompt_tokens = token_usage.prompt_tokens + excluded.prompt_tokens, \
         completion_tokens = token_usage.completion_tokens + excluded.completion_tokens";
    const ADD_UNKEYED: &str = "INSERT INTO token_usage (id, tenant_id, endpoint_id, key_id, \
         user_id, hour_start, requests, prompt_tokens, completion_tokens) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
         ON CONFLICT (tenant_id, hour_start, endpoint_id, user_id) \
         WHERE key_id IS NULL DO UPDATE SET \
         requests = token_usage.requests + excluded.requests, \
         prompt_tokens = token_usage.prompt_tokens + excluded.prompt_tokens, \
         completion_tokens = token_usage.completion_tokens + excluded.completion_tokens";

    const ROW_COLUMNS: &str = "id, tenant_id, endpoint_id, key_id, user_id, hour_start, \
         requests, prompt_tokens, completion_tokens";
    /// Postgres' SUM of a BIGINT is NUMERIC: cast back.
    const SUMMED_COLUMNS: &str = "NULL AS id, tenant_id, endpoint_id, key_id, user_id, \
         NULL AS hour_start, CAST(SUM(requests) AS BIGINT) AS requests, \
         CAST(SUM(prompt_tokens) AS BIGINT) AS prompt_tokens, \
         CAST(SUM(completion_tokens) AS BIGINT) AS completion_tokens";

    /// A row's place: the same hour, endpoint, key and user is one row.
    type Place = (i64, Uuid, Option<Uuid>, Uuid, Uuid);

    fn stored(what: &'static str, n: u64) -> Result<i64, StoreError> {
        i64::try_from(n).map_err(|_| StoreError::corrupt(what, n))
    }

    fn counted(row: &DbRow, what: &'static str) -> Result<u64, StoreError> {
        let n: i64 = row.try_get(what)?;
        u64::try_from(n).map_err(|_| StoreError::corrupt(what, n))
    }

    fn token_row(row: &DbRow) -> Result<TokenUsage, StoreError> {
        Ok(TokenUsage {
            id: row.try_get("id")?,
            tenant: TenantId::from_uuid(row.try_get("tenant_id")?),
            endpoint: WorkloadId::from_uuid(row.try_get("endpoint_id")?),
            key: row
                .try_get::<Option<Uuid>, _>("key_id")?
                .map(InferenceKeyId::from_uuid),
            user: UserId::from_uuid(row.try_get("user_id")?),
            hour_start: row
                .try_get::<Option<i64>, _>("hour_start")?
                .map(from_ms)
                .transpose()?,
            requests: counted(row, "requests")?,
            prompt_tokens: counted(row, "prompt_tokens")?,
            completion_tokens: counted(row, "completion_tokens")?,
        })
    }

    /// The tenant's rows in the page's period (and user's, if it names one).
    fn period(select: &str, tenant: TenantId, page: &TokenUsagePage) -> sqlx::QueryBuilder<Db> {
        let mut q = sqlx::QueryBuilder::<Db>::new(format!(
            "SELECT {select} FROM token_usage WHERE tenant_id = "
        ));
        q.push_bind(*tenant.as_uuid())
            .push(" AND hour_start >= ")
            .push_bind(crate::time_ms::to_ms(page.from))
            .push(" AND hour_start < ")
            .push_bind(crate::time_ms::to_ms(page.to));
        if let Some(user) = page.user {
            q.push(" AND user_id = ").push_bind(*user.as_uuid());
        }
        q
    }

    #[async_trait::async_trait]
    impl crate::TokenUsageStore for ThisStore {
        #[tracing::instrument(level = "debug", name = "store.record_token_usage", skip_all)]
        async fn record_token_usage(
            &self,
            batch: Uuid,
            counts: &[TokenCount],
        ) -> Result<bool, StoreError> {
            // Counts of one row added here first: a statement adds to a row once.
            let mut rows: BTreeMap<Place, [u64; 3]> = BTreeMap::new();
            for c in counts {
                let place = (
                    crate::time_ms::to_ms(c.hour_start),
                    *c.tenant.as_uuid(),
                    c.key.map(|k| *k.as_uuid()),
                    *c.user.as_uuid(),
                    *c.endpoint.as_uuid(),
                );
                let sums = rows.entry(place).or_default();
                for (sum, n) in
                    sums.iter_mut()
                        .zip([c.requests, c.prompt_tokens, c.completion_tokens])
                {
                    *sum = sum.saturating_add(n);
                }
            }
            let now = now_ms();
            let mut conn = self.writer().await?;
            let mut tx = begin_write(&mut conn).await?;
            sqlx::query("DELETE FROM token_usage_batches WHERE received_at <= $1")
                .bind(now.saturating_sub(duration_ms(BATCH_MEMORY)))
                .execute(&mut *tx)
                .await?;
            let first = sqlx::query(
                "INSERT INTO token_usage_batches (id, received_at) VALUES ($1, $2) \
                 ON CONFLICT (id) DO NOTHING",
            )
            .bind(batch)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            if first.rows_affected() == 0 {
                return Ok(false);
            }
            for ((hour, tenant, key, user, endpoint), [requests, prompt, completion]) in rows {
                let add = if key.is_some() {
                    ADD_KEYED
                } else {
                    ADD_UNKEYED
                };
                sqlx::query(add)
                    .bind(Uuid::now_v7())
                    .bind(tenant)
                    .bind(endpoint)
                    .bind(key)
                    .bind(user)
                    .bind(hour)
                    .bind(stored("requests", requests)?)
                    .bind(stored("prompt tokens", prompt)?)
                    .bind(stored("completion tokens", completion)?)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            Ok(true)
        }

        #[tracing::instrument(level = "debug", name = "store.token_usage_of", skip_all)]
        async fn token_usage_of(
            &self,
            tenant: TenantId,
            page: &TokenUsagePage,
        ) -> Result<Vec<TokenUsage>, StoreError> {
            let mut q = period(ROW_COLUMNS, tenant, page);
            if let Some((hour, id)) = page.after {
                let hour = crate::time_ms::to_ms(hour);
                q.push(" AND (hour_start > ")
                    .push_bind(hour)
                    .push(" OR (hour_start = ")
                    .push_bind(hour)
                    .push(" AND id > ")
                    .push_bind(id)
                    .push("))");
            }
            q.push(" ORDER BY hour_start, id LIMIT ")
                .push_bind(i64::from(page.limit));
            let rows = q.build().fetch_all(self.reader()).await?;
            rows.iter().map(token_row).collect()
        }

        #[tracing::instrument(level = "debug", name = "store.token_usage_summed", skip_all)]
        async fn token_usage_summed(
            &self,
            tenant: TenantId,
            page: &TokenUsagePage,
        ) -> Result<Vec<TokenUsage>, StoreError> {
            let mut q = period(SUMMED_COLUMNS, tenant, page);
            q.push(
                " GROUP BY tenant_id, endpoint_id, user_id, key_id \
                 ORDER BY endpoint_id, user_id, key_id LIMIT ",
            )
            .push_bind(i64::from(page.limit));
            let rows = q.build().fetch_all(self.reader()).await?;
            rows.iter().map(token_row).collect()
        }

        #[tracing::instrument(level = "debug", name = "store.tokens_used", skip_all)]
        async fn tokens_used(
            &self,
            tenant: TenantId,
            of: TokensOf,
            since: time::OffsetDateTime,
        ) -> Result<TokensUsed, StoreError> {
            let mut q = sqlx::QueryBuilder::<Db>::new(
                "SELECT CAST(COALESCE(SUM(requests), 0) AS BIGINT) AS requests, \
                 CAST(COALESCE(SUM(prompt_tokens), 0) AS BIGINT) AS prompt_tokens, \
                 CAST(COALESCE(SUM(completion_tokens), 0) AS BIGINT) AS completion_tokens \
                 FROM token_usage WHERE tenant_id = ",
            );
            q.push_bind(*tenant.as_uuid())
                .push(" AND hour_start >= ")
                .push_bind(crate::time_ms::to_ms(since));
            if let TokensOf::Key(key) = of {
                q.push(" AND key_id = ").push_bind(*key.as_uuid());
            }
            let row = q.build().fetch_one(self.reader()).await?;
            Ok(TokensUsed {
                requests: counted(&row, "requests")?,
                prompt_tokens: counted(&row, "prompt_tokens")?,
                completion_tokens: counted(&row, "completion_tokens")?,
            })
        }
    }
}
