// `EnrolmentStore`, shared by both engines (included). A module of its own, so its imports
// can't collide with the other included files'.

mod enrolment_sql {
    use super::*;

    use einsora_core::ids::{EnrolmentTokenId, UserId};

    use crate::SecretHash;
    use crate::enrolment::{EnrolledMachine, EnrolmentTokenRecord, NewEnrolmentToken, Redemption};
    use crate::time_ms::to_ms;

    const COLUMNS: &str = "id, tenant_id, name, region, prefix, created_by, created_at, \
         expires_at, used_at, machine_id, revoked_at";

    static OF_TENANT: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!("SELECT {COLUMNS} FROM enrolment_tokens WHERE tenant_id = $1 ORDER BY id")
    });
    static BY_ID: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!("SELECT {COLUMNS} FROM enrolment_tokens WHERE id = $1 AND tenant_id = $2")
    });

    fn token_from_row(
        row: &<Db as sqlx::Database>::Row,
    ) -> Result<EnrolmentTokenRecord, StoreError> {
        let region: String = row.try_get("region")?;
        Ok(EnrolmentTokenRecord {
            id: EnrolmentTokenId::from_uuid(row.try_get("id")?),
            tenant_id: TenantId::from_uuid(row.try_get("tenant_id")?),
            name: row.try_get("name")?,
            region: Region::new(&region).map_err(|_| StoreError::corrupt("region", &region))?,
            prefix: row.try_get("prefix")?,
            created_by: UserId::from_uuid(row.try_get("created_by")?),
            created_at: from_ms(row.try_get("created_at")?)?,
            expires_at: from_ms(row.try_get("expires_at")?)?,
            used_at: optional_ms(row.try_get("used_at")?)?,
            machine_id: row
                .try_get::<Option<Uuid>, _>("machine_id")?
                .map(MachineId::from_uuid),
            revoked_at: optional_ms(row.try_get("revoked_at")?)?,
        })
    }

    #[async_trait::async_trait]
    impl crate::EnrolmentStore for ThisStore {
        #[tracing::instrument(level = "debug", name = "store.create_enrolment_token", skip_all)]
        async fn create_enrolment_token(
            &self,
            t: &NewEnrolmentToken,
        ) -> Result<EnrolmentTokenRecord, StoreError> {
            let now = now_ms();
            let mut conn = self.writer().await?;
            let mut tx = begin_write(&mut conn).await?;
            // One statement: the creator must be a user of the token's tenant.
            let done = sqlx::query(
                "INSERT INTO enrolment_tokens (id, tenant_id, name, region, prefix, token_hash, \
                 created_by, created_at, expires_at) \
                 SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9 FROM users \
                 WHERE id = $7 AND tenant_id = $2",
            )
            .bind(t.id.as_uuid())
            .bind(t.tenant_id.as_uuid())
            .bind(&t.name)
            .bind(t.region.as_str())
            .bind(&t.prefix)
            .bind(&t.token_hash[..])
            .bind(t.created_by.as_uuid())
            .bind(now)
            .bind(to_ms(t.expires_at))
            .execute(&mut *tx)
            .await?;
            if done.rows_affected() == 0 {
                return Err(StoreError::NotFound);
            }
            commit_action(tx, Some(ActivityObject::of(t.id))).await?;
            Ok(EnrolmentTokenRecord {
                id: t.id,
                tenant_id: t.tenant_id,
                name: t.name.clone(),
                region: t.region.clone(),
                prefix: t.prefix.clone(),
                created_by: t.created_by,
                created_at: from_ms(now)?,
                expires_at: from_ms(to_ms(t.expires_at))?,
                used_at: None,
                machine_id: None,
                revoked_at: None,
            })
        }

        #[tracing::instrument(level = "debug", name = "store.enrolment_tokens", skip_all)]
        async fn enrolment_tokens(
            &self,
            tenant: TenantId,
        ) -> Result<Vec<EnrolmentTokenRecord>, StoreError> {
            let rows = sqlx::query(sqlx::AssertSqlSafe(OF_TENANT.as_str()))
                .bind(tenant.as_uuid())
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(token_from_row).collect()
        }

        #[tracing::instrument(level = "debug", name = "store.enrolment_token_redeemable", skip_all)]
        async fn enrolment_token_redeemable(
            &self,
            token_hash: &SecretHash,
        ) -> Result<bool, StoreError> {
            let found: Option<i64> = sqlx::query_scalar(
                "SELECT CAST(1 AS BIGINT) FROM enrolment_tokens WHERE token_hash = $1 \
                 AND used_at IS NULL AND revoked_at IS NULL AND expires_at > $2",
            )
            .bind(&token_hash[..])
            .bind(now_ms())
            .fetch_optional(self.reader())
            .await?;
            Ok(found.is_some())
        }

        #[tracing::instrument(level = "debug", name = "store.redeem_enrolment_token", skip_all)]
        async fn redeem_enrolment_token(
            &self,
            r: &Redemption,
        ) -> Result<Option<EnrolledMachine>, StoreError> {
            let mut conn = self.writer().await?;
            let mut tx = begin_write(&mut conn).await?;
            let now = now_ms();
            // The redemption is the first write, conditional on the token being unused: of
            // concurrent redemptions exactly one changes the row (on Postgres the others wait
            // for its lock, then see it used).
            let token: Option<(Uuid, Uuid, String, Uuid)> = sqlx::query_as(
                "UPDATE enrolment_tokens SET used_at = $1 WHERE token_hash = $2 \
                 AND used_at IS NULL AND revoked_at IS NULL AND expires_at > $1 \
                 RETURNING id, tenant_id, region, created_by",
            )
            .bind(now)
            .bind(&r.token_hash[..])
            .fetch_optional(&mut *tx)
            .await?;
            let Some((token_id, tenant, region, created_by)) = token else {
                return Ok(None);
            };
            let label: String = r
                .label
                .chars()
                .filter(|c| !c.is_control())
                .take(64)
                .collect();
            sqlx::query(
                "INSERT INTO machines (id, owner_id, name, region, os, arch, cpus, memory_bytes, \
                 created_at, owner_user_id) \
                 VALUES ($1, $2, $3, $4, 'unknown', 'unknown', 0, 0, $5, $6)",
            )
            .bind(r.machine_id.as_uuid())
            .bind(tenant)
            .bind(if label.trim().is_empty() {
                "machine".to_owned()
            } else {
                label
            })
            .bind(&region)
            .bind(now)
            .bind(created_by)
            .execute(&mut *tx)
            .await?;
            sqlx::query("UPDATE enrolment_tokens SET machine_id = $1 WHERE id = $2")
                .bind(r.machine_id.as_uuid())
                .bind(token_id)
                .execute(&mut *tx)
                .await?;
            let cert = &r.certificate;
            sqlx::query(
                "INSERT INTO machine_certificates (serial, machine_id, fingerprint, not_before, \
                 not_after, created_at) VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(&cert.serial)
            .bind(r.machine_id.as_uuid())
            .bind(&cert.fingerprint[..])
            .bind(to_ms(cert.not_before))
            .bind(to_ms(cert.not_after))
            .bind(now)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            drop(conn);
            self.committed();
            Ok(Some(EnrolledMachine {
                machine_id: r.machine_id,
                owner: TenantId::from_uuid(tenant),
                region: Region::new(&region).map_err(|_| StoreError::corrupt("region", &region))?,
            }))
        }

        #[tracing::instrument(level = "debug", name = "store.revoke_enrolment_token", skip_all)]
        async fn revoke_enrolment_token(
            &self,
            tenant: TenantId,
            id: EnrolmentTokenId,
        ) -> Result<Option<EnrolmentTokenRecord>, StoreError> {
            let mut conn = self.writer().await?;
            let mut tx = begin_write(&mut conn).await?;
            // `used_at IS NULL` in the same statement as the write: of a revoke and an
            // enrolment racing for one token, exactly one takes effect.
            let done = sqlx::query(
                "UPDATE enrolment_tokens SET revoked_at = COALESCE(revoked_at, $1) \
                 WHERE id = $2 AND tenant_id = $3 AND used_at IS NULL",
            )
            .bind(now_ms())
            .bind(id.as_uuid())
            .bind(tenant.as_uuid())
            .execute(&mut *tx)
            .await?;
            let row = sqlx::query(sqlx::AssertSqlSafe(BY_ID.as_str()))
                .bind(id.as_uuid())
                .bind(tenant.as_uuid())
                .fetch_optional(&mut *tx)
                .await?;
            let token = row.as_ref().map(token_from_row).transpose()?;
            if done.rows_affected() > 0 {
                commit_action(tx, Some(ActivityObject::of(id))).await?;
            } else {
                tx.commit().await?;
            }
            Ok(token)
        }
    }
}
