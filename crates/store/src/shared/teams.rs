// `TeamStore`, shared by both engines (included). A module of its own, so its imports can't
// collide with the other included files'.

mod teams_sql {
    use super::*;

    use einsora_core::ids::{TeamId, UserId};

    use crate::teams::{QuotaLimits, QuotaRecord, QuotaSubject, TeamRecord};

    type DbRow = <Db as sqlx::Database>::Row;

    const TEAM_COLUMNS: &str = "t.id, t.name, t.created_at, \
         (SELECT COUNT(*) FROM users u WHERE u.team_id = t.id) AS members";

    fn team_record(row: &DbRow) -> Result<TeamRecord, StoreError> {
        Ok(TeamRecord {
            id: TeamId::from_uuid(row.try_get("id")?),
            name: row.try_get("name")?,
            created_at: from_ms(row.try_get("created_at")?)?,
            members: to_u32("team members", row.try_get("members")?)?,
        })
    }

    fn quota_class(key: String) -> QuotaClass {
        if key == QuotaClass::DEFAULT_KEY {
            QuotaClass::Default
        } else {
            QuotaClass::Class(key)
        }
    }

    fn limits(row: &DbRow) -> Result<QuotaLimits, StoreError> {
        let limit = |column: &str| -> Result<Option<u32>, StoreError> {
            row.try_get::<Option<i64>, _>(column)?
                .map(|l| to_u32("quota limit", l))
                .transpose()
        };
        Ok(QuotaLimits {
            units: limit("limit_units")?,
            cpus: limit("limit_cpus")?,
            memory_gib: limit("limit_memory_gib")?,
        })
    }

    fn held(row: &DbRow) -> Result<u64, StoreError> {
        Ok(row.try_get::<i64, _>("held")?.max(0).unsigned_abs())
    }

    const LIMIT_COLUMNS: &str = "q.limit_units, q.limit_cpus, q.limit_memory_gib";

    /// Each kind of quota row of a tenant (`$1`), with what it holds now.
    static TENANT_QUOTAS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!(
            "SELECT q.gpu_class, {LIMIT_COLUMNS}, (SELECT CAST(COALESCE(SUM(w.units), 0) AS BIGINT) \
             FROM workloads w WHERE w.tenant_id = q.tenant_id AND w.gpu_class = q.gpu_class \
             AND w.state IN ({})) AS held FROM quotas q WHERE q.tenant_id = $1 \
             ORDER BY q.gpu_class",
            *crate::state_sql::HOLDS_QUOTA
        )
    });
    static TEAM_QUOTAS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!(
            "SELECT q.team_id, t.name, q.gpu_class, {LIMIT_COLUMNS}, \
             (SELECT CAST(COALESCE(SUM(w.units), 0) AS BIGINT) FROM workloads w \
             JOIN users m ON m.id = w.owner_id WHERE m.team_id = q.team_id \
             AND w.gpu_class = q.gpu_class AND w.state IN ({})) AS held \
             FROM team_quotas q JOIN teams t ON t.id = q.team_id WHERE t.tenant_id = $1 \
             ORDER BY t.name, q.gpu_class",
            *crate::state_sql::HOLDS_QUOTA
        )
    });
    static USER_QUOTAS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!(
            "SELECT q.user_id, u.email, q.gpu_class, {LIMIT_COLUMNS}, \
             (SELECT CAST(COALESCE(SUM(w.units), 0) AS BIGINT) FROM workloads w \
             WHERE w.owner_id = q.user_id AND w.gpu_class = q.gpu_class \
             AND w.state IN ({})) AS held \
             FROM user_quotas q JOIN users u ON u.id = q.user_id WHERE u.tenant_id = $1 \
             ORDER BY u.email, q.gpu_class",
            *crate::state_sql::HOLDS_QUOTA
        )
    });

    /// Whether the tenant has the team (or user).
    async fn owns(
        tx: &mut Tx<'_>,
        table: &'static str,
        tenant: TenantId,
        id: &Uuid,
    ) -> Result<bool, StoreError> {
        let sql = format!("SELECT 1 FROM {table} WHERE id = $1 AND tenant_id = $2");
        let found: Option<i32> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .bind(tenant.as_uuid())
            .fetch_optional(&mut **tx)
            .await?;
        Ok(found.is_some())
    }

    #[async_trait::async_trait]
    impl crate::TeamStore for ThisStore {
        #[tracing::instrument(level = "debug", name = "store.create_team", skip_all)]
        async fn create_team(
            &self,
            tenant: TenantId,
            id: TeamId,
            name: &str,
        ) -> Result<TeamRecord, StoreError> {
            let now = now_ms();
            let mut conn = self.writer().await?;
            let mut tx = begin_write(&mut conn).await?;
            sqlx::query(
                "INSERT INTO teams (id, tenant_id, name, created_at) VALUES ($1, $2, $3, $4)",
            )
            .bind(id.as_uuid())
            .bind(tenant.as_uuid())
            .bind(name)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(|e| match e.as_database_error() {
                Some(db) if db.is_unique_violation() => {
                    StoreError::Taken(crate::Taken::TeamName(name.to_owned()))
                }
                _ => e.into(),
            })?;
            commit_action(tx, Some(ActivityObject::of(id))).await?;
            Ok(TeamRecord {
                id,
                name: name.to_owned(),
                created_at: from_ms(now)?,
                members: 0,
            })
        }

        #[tracing::instrument(level = "debug", name = "store.teams", skip_all)]
        async fn teams(&self, tenant: TenantId) -> Result<Vec<TeamRecord>, StoreError> {
            let sql = format!(
                "SELECT {TEAM_COLUMNS} FROM teams t WHERE t.tenant_id = $1 ORDER BY t.name"
            );
            let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(tenant.as_uuid())
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(team_record).collect()
        }

        #[tracing::instrument(level = "debug", name = "store.delete_team", skip_all)]
        async fn delete_team(&self, tenant: TenantId, id: TeamId) -> Result<bool, StoreError> {
            let mut conn = self.writer().await?;
            let mut tx = begin_write(&mut conn).await?;
            if !owns(&mut tx, "teams", tenant, id.as_uuid()).await? {
                return Ok(false);
            }
            sqlx::query("UPDATE users SET team_id = NULL WHERE team_id = $1")
                .bind(id.as_uuid())
                .execute(&mut *tx)
                .await?;
            sqlx::query("DELETE FROM teams WHERE id = $1")
                .bind(id.as_uuid())
                .execute(&mut *tx)
                .await?;
            commit_action(tx, Some(ActivityObject::of(id))).await?;
            Ok(true)
        }

        #[tracing::instrument(level = "debug", name = "store.set_user_team", skip_all)]
        async fn set_user_team(
            &self,
            tenant: TenantId,
            user: UserId,
            team: Option<TeamId>,
        ) -> Result<(), StoreError> {
            let mut conn = self.writer().await?;
            let mut tx = begin_write(&mut conn).await?;
            let team_known = match team {
                Some(team) => owns(&mut tx, "teams", tenant, team.as_uuid()).await?,
                None => true,
            };
            if !team_known || !owns(&mut tx, "users", tenant, user.as_uuid()).await? {
                return Err(StoreError::NotFound);
            }
            sqlx::query("UPDATE users SET team_id = $1 WHERE id = $2")
                .bind(team.map(|t| *t.as_uuid()))
                .bind(user.as_uuid())
                .execute(&mut *tx)
                .await?;
            commit_action(tx, Some(ActivityObject::of(user))).await
        }

        #[tracing::instrument(level = "debug", name = "store.quotas_of", skip_all)]
        async fn quotas_of(&self, tenant: TenantId) -> Result<Vec<QuotaRecord>, StoreError> {
            let mut found = Vec::new();
            let rows = sqlx::query(sqlx::AssertSqlSafe(TENANT_QUOTAS.as_str()))
                .bind(tenant.as_uuid())
                .fetch_all(self.reader())
                .await?;
            for row in &rows {
                let class = quota_class(row.try_get("gpu_class")?);
                found.push(QuotaRecord {
                    subject: QuotaSubject::Tenant,
                    label: String::new(),
                    held: if class == QuotaClass::Default {
                        0
                    } else {
                        held(row)?
                    },
                    class,
                    limits: limits(row)?,
                });
            }
            let rows = sqlx::query(sqlx::AssertSqlSafe(TEAM_QUOTAS.as_str()))
                .bind(tenant.as_uuid())
                .fetch_all(self.reader())
                .await?;
            for row in &rows {
                found.push(QuotaRecord {
                    subject: QuotaSubject::Team(TeamId::from_uuid(row.try_get("team_id")?)),
                    label: row.try_get("name")?,
                    class: quota_class(row.try_get("gpu_class")?),
                    limits: limits(row)?,
                    held: held(row)?,
                });
            }
            let rows = sqlx::query(sqlx::AssertSqlSafe(USER_QUOTAS.as_str()))
                .bind(tenant.as_uuid())
                .fetch_all(self.reader())
                .await?;
            for row in &rows {
                found.push(QuotaRecord {
                    subject: QuotaSubject::User(UserId::from_uuid(row.try_get("user_id")?)),
                    label: row.try_get("email")?,
                    class: quota_class(row.try_get("gpu_class")?),
                    limits: limits(row)?,
                    held: held(row)?,
                });
            }
            Ok(found)
        }

        #[tracing::instrument(level = "debug", name = "store.set_quota_of", skip_all)]
        async fn set_quota_of(
            &self,
            tenant: TenantId,
            subject: QuotaSubject,
            class: &QuotaClass,
            limits: QuotaLimits,
        ) -> Result<(), StoreError> {
            let limit = |l: Option<u32>| l.map(i64::from);
            let (table, column, id) = match subject {
                QuotaSubject::Tenant => {
                    sqlx::query(
                        "INSERT INTO quotas (tenant_id, gpu_class, limit_units, limit_cpus, \
                         limit_memory_gib) VALUES ($1, $2, $3, $4, $5) \
                         ON CONFLICT (tenant_id, gpu_class) DO UPDATE SET \
                         limit_units = excluded.limit_units, limit_cpus = excluded.limit_cpus, \
                         limit_memory_gib = excluded.limit_memory_gib",
                    )
                    .bind(tenant.as_uuid())
                    .bind(class.key())
                    .bind(limit(limits.units))
                    .bind(limit(limits.cpus))
                    .bind(limit(limits.memory_gib))
                    .execute(&mut *self.writer().await?)
                    .await?;
                    return Ok(());
                }
                QuotaSubject::Team(team) => ("team_quotas", "team_id", *team.as_uuid()),
                QuotaSubject::User(user) => ("user_quotas", "user_id", *user.as_uuid()),
            };
            if *class == QuotaClass::Default {
                return Err(StoreError::InvalidInput(
                    "only the tenant has a default quota: name a class".into(),
                ));
            }
            let mut conn = self.writer().await?;
            let mut tx = begin_write(&mut conn).await?;
            let owner_table = if column == "team_id" {
                "teams"
            } else {
                "users"
            };
            if !owns(&mut tx, owner_table, tenant, &id).await? {
                return Err(StoreError::NotFound);
            }
            let delete = format!("DELETE FROM {table} WHERE {column} = $1 AND gpu_class = $2");
            sqlx::query(sqlx::AssertSqlSafe(delete))
                .bind(id)
                .bind(class.key())
                .execute(&mut *tx)
                .await?;
            if !limits.is_empty() {
                let insert = format!(
                    "INSERT INTO {table} ({column}, gpu_class, limit_units, limit_cpus, \
                     limit_memory_gib) VALUES ($1, $2, $3, $4, $5)"
                );
                sqlx::query(sqlx::AssertSqlSafe(insert))
                    .bind(id)
                    .bind(class.key())
                    .bind(limit(limits.units))
                    .bind(limit(limits.cpus))
                    .bind(limit(limits.memory_gib))
                    .execute(&mut *tx)
                    .await?;
            }
            commit_action(tx, None).await
        }
    }
}
