// `EnrolmentStore`, shared by both engines (included). A module of its own, so its imports
// can't collide with the other included files'.

mod enrolment_sql {
    use super::*;

    use einsora_core::ids::{EnrolmentTokenId, UserId};

    use crate::enrolment::{EnrolmentTokenRecord, NewEnrolmentToken};
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
        async fn create_enrolment_token(
            &self,
            t: &NewEnrolmentToken,
        ) -> Result<EnrolmentTokenRecord, StoreError> {
            let now = now_ms();
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
            .execute(&mut *self.writer().await?)
            .await?;
            if done.rows_affected() == 0 {
                return Err(StoreError::NotFound);
            }
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

        async fn revoke_enrolment_token(
            &self,
            tenant: TenantId,
            id: EnrolmentTokenId,
        ) -> Result<Option<EnrolmentTokenRecord>, StoreError> {
            let mut conn = self.writer().await?;
            // `used_at IS NULL` in the same statement as the write: of a revoke and an
            // enrolment racing for one token, exactly one takes effect.
            sqlx::query(
                "UPDATE enrolment_tokens SET revoked_at = COALESCE(revoked_at, $1) \
                 WHERE id = $2 AND tenant_id = $3 AND used_at IS NULL",
            )
            .bind(now_ms())
            .bind(id.as_uuid())
            .bind(tenant.as_uuid())
            .execute(&mut *conn)
            .await?;
            let row = sqlx::query(sqlx::AssertSqlSafe(BY_ID.as_str()))
                .bind(id.as_uuid())
                .bind(tenant.as_uuid())
                .fetch_optional(&mut *conn)
                .await?;
            row.as_ref().map(token_from_row).transpose()
        }
    }
}
