// `IdempotencyStore`, shared by both engines (included). A row's `status` 0 is a request in
// progress; otherwise its answer's HTTP status, with its JSON body in `response`, or '' when
// the answer wasn't kept (migration 0016).

mod idempotency_sql {
    use super::*;

    use crate::idempotency::{Claimed, IdempotencyClaim, IdempotencyTimes};

    const IN_PROGRESS: i64 = 0;

    #[async_trait::async_trait]
    impl crate::IdempotencyStore for ThisStore {
        #[tracing::instrument(level = "debug", name = "store.claim_idempotency_key", skip_all)]
        async fn claim_idempotency_key(
            &self,
            claim: &IdempotencyClaim,
            times: IdempotencyTimes,
        ) -> Result<Claimed, StoreError> {
            let now = now_ms();
            let mut conn = self.writer().await?;
            let mut tx = begin_write(&mut conn).await?;
            // Every user's expired keys, so the table holds a day's keys at most.
            sqlx::query("DELETE FROM idempotency_keys WHERE created_at <= $1")
                .bind(now.saturating_sub(duration_ms(times.ttl)))
                .execute(&mut *tx)
                .await?;
            let inserted = sqlx::query(
                "INSERT INTO idempotency_keys (user_id, key, request_hash, status, response, \
                 created_at) VALUES ($1, $2, $3, $4, '', $5) \
                 ON CONFLICT (user_id, key) DO NOTHING",
            )
            .bind(claim.user.as_uuid())
            .bind(&claim.key)
            .bind(&claim.request_hash[..])
            .bind(IN_PROGRESS)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            if inserted.rows_affected() == 1 {
                tx.commit().await?;
                return Ok(Claimed::Started);
            }
            // Another claim committed first (on Postgres the insert waited for it).
            let row = sqlx::query(concat!(
                "SELECT request_hash, status, response, created_at FROM idempotency_keys \
                 WHERE user_id = $1 AND key = $2",
                for_update!()
            ))
            .bind(claim.user.as_uuid())
            .bind(&claim.key)
            .fetch_one(&mut *tx)
            .await?;
            let hash: Vec<u8> = row.try_get("request_hash")?;
            let status: i64 = row.try_get("status")?;
            let claimed = if hash != claim.request_hash {
                Claimed::Mismatch
            } else if status != IN_PROGRESS {
                let response: String = row.try_get("response")?;
                Claimed::Done {
                    status: u16::try_from(status)
                        .map_err(|_| StoreError::corrupt("an idempotency key's status", status))?,
                    body: (!response.is_empty()).then_some(response),
                }
            } else if row.try_get::<i64, _>("created_at")?
                <= now.saturating_sub(duration_ms(times.abandoned_after))
            {
                sqlx::query(
                    "UPDATE idempotency_keys SET created_at = $1 WHERE user_id = $2 AND key = $3",
                )
                .bind(now)
                .bind(claim.user.as_uuid())
                .bind(&claim.key)
                .execute(&mut *tx)
                .await?;
                Claimed::Started
            } else {
                Claimed::InProgress
            };
            tx.commit().await?;
            Ok(claimed)
        }

        #[tracing::instrument(level = "debug", name = "store.finish_idempotency_key", skip_all)]
        async fn finish_idempotency_key(
            &self,
            claim: &IdempotencyClaim,
            status: u16,
            body: Option<&str>,
        ) -> Result<bool, StoreError> {
            let done = sqlx::query(
                "UPDATE idempotency_keys SET status = $1, response = $2 \
                 WHERE user_id = $3 AND key = $4 AND request_hash = $5 AND status = $6",
            )
            .bind(i64::from(status))
            .bind(body.unwrap_or_default())
            .bind(claim.user.as_uuid())
            .bind(&claim.key)
            .bind(&claim.request_hash[..])
            .bind(IN_PROGRESS)
            .execute(&mut *self.writer().await?)
            .await?;
            Ok(done.rows_affected() > 0)
        }

        #[tracing::instrument(level = "debug", name = "store.release_idempotency_key", skip_all)]
        async fn release_idempotency_key(
            &self,
            claim: &IdempotencyClaim,
        ) -> Result<bool, StoreError> {
            let done = sqlx::query(
                "DELETE FROM idempotency_keys \
                 WHERE user_id = $1 AND key = $2 AND request_hash = $3 AND status = $4",
            )
            .bind(claim.user.as_uuid())
            .bind(&claim.key)
            .bind(&claim.request_hash[..])
            .bind(IN_PROGRESS)
            .execute(&mut *self.writer().await?)
            .await?;
            Ok(done.rows_affected() > 0)
        }
    }
}
