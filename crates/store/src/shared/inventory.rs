// `InventoryStore`, shared by both engines (included).

use crate::{MachineRegistration, UsagePage, WorkloadPage};

const HOUR_MS: i64 = 3_600_000;

#[async_trait::async_trait]
impl crate::InventoryStore for ThisStore {
    #[tracing::instrument(level = "debug", name = "store.workload_of", skip_all)]
    async fn workload_of(
        &self,
        tenant: TenantId,
        id: WorkloadId,
    ) -> Result<Option<Workload>, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(WORKLOAD_OF.as_str()))
            .bind(id.as_uuid())
            .bind(tenant.as_uuid())
            .fetch_optional(self.reader())
            .await?;
        row.as_ref().map(workload_from_row).transpose()
    }

    #[tracing::instrument(level = "debug", name = "store.workloads_of", skip_all)]
    async fn workloads_of(
        &self,
        tenant: TenantId,
        page: &WorkloadPage,
    ) -> Result<Vec<Workload>, StoreError> {
        let mut q = sqlx::QueryBuilder::<Db>::new(format!(
            "SELECT {WORKLOAD_COLUMNS} FROM workloads WHERE tenant_id = "
        ));
        q.push_bind(*tenant.as_uuid());
        if let Some(owner) = page.owner {
            q.push(" AND owner_id = ").push_bind(*owner.as_uuid());
        }
        if !page.include_deleted {
            q.push(" AND state <> 'deleted'");
        }
        if let Some(before) = page.before {
            q.push(" AND id < ").push_bind(*before.as_uuid());
        }
        q.push(" ORDER BY id DESC LIMIT ")
            .push_bind(i64::from(page.limit));
        let rows = q.build().fetch_all(self.reader()).await?;
        rows.iter().map(workload_from_row).collect()
    }

    #[tracing::instrument(level = "debug", name = "store.put_machine", skip_all)]
    async fn put_machine(&self, reg: &MachineRegistration) -> Result<(), StoreError> {
        let m = &reg.machine;
        let memory = i64::try_from(m.memory_bytes)
            .map_err(|_| StoreError::InvalidInput("the machine's memory is too large".into()))?;
        let drivers = serde_json::Value::from(reg.drivers.clone()).to_string();
        // An existing machine keeps its owner, owning user and region: a registration naming
        // another owner or region is refused rather than moving it.
        let put = sqlx::query(
            "INSERT INTO machines (id, owner_id, name, region, os, arch, cpus, memory_bytes, \
             accelerators, drivers, sharing, last_seen_at, created_at, models, gpu_note, \
             performance_cores, efficiency_cores, owner_user_id, vm_accel, vm_limit) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, \
             $17, $18, $19, $20) \
             ON CONFLICT (id) DO UPDATE SET name = excluded.name, os = excluded.os, \
             arch = excluded.arch, cpus = excluded.cpus, memory_bytes = excluded.memory_bytes, \
             accelerators = excluded.accelerators, drivers = excluded.drivers, \
             models = excluded.models, gpu_note = excluded.gpu_note, \
             vm_accel = excluded.vm_accel, vm_limit = excluded.vm_limit, \
             performance_cores = excluded.performance_cores, \
             efficiency_cores = excluded.efficiency_cores, sharing = excluded.sharing, \
             last_seen_at = COALESCE(excluded.last_seen_at, machines.last_seen_at) \
             WHERE machines.owner_id = excluded.owner_id AND machines.region = excluded.region",
        )
        .bind(m.id.as_uuid())
        .bind(m.owner.as_uuid())
        .bind(&m.name)
        .bind(m.region.as_str())
        .bind(&m.os)
        .bind(&m.arch)
        .bind(i64::from(m.cpus))
        .bind(memory)
        .bind(crate::devices::to_json(&m.devices))
        .bind(drivers)
        .bind(m.sharing.as_str())
        .bind(reg.last_seen_at.map(crate::time_ms::to_ms))
        .bind(now_ms())
        .bind(crate::model_files::to_json(&reg.models))
        .bind(reg.gpu_note.map(GpuNote::as_str))
        .bind(m.cores.map(|c| i64::from(c.performance)))
        .bind(m.cores.map(|c| i64::from(c.efficiency)))
        .bind(m.owner_user.map(|u| *u.as_uuid()))
        .bind(reg.vm.map(|vm| vm.accel.as_str()))
        .bind(reg.vm.and_then(|vm| vm.limit).map(i64::from))
        .execute(&mut *self.writer().await?)
        .await?;
        if put.rows_affected() == 0 {
            return Err(StoreError::InvalidInput(
                "this machine is registered to another owner or region".into(),
            ));
        }
        self.committed();
        Ok(())
    }

    #[tracing::instrument(level = "debug", name = "store.machines_of", skip_all)]
    async fn machines_of(&self, tenant: TenantId) -> Result<Vec<MachineRecord>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "{} ORDER BY id",
            *SELECT_MACHINES
        )))
        .bind(tenant.as_uuid())
        .fetch_all(self.reader())
        .await?;
        rows.iter().map(machine_from_row).collect()
    }

    #[tracing::instrument(level = "debug", name = "store.machine_of", skip_all)]
    async fn machine_of(
        &self,
        tenant: TenantId,
        id: MachineId,
    ) -> Result<Option<MachineRecord>, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "{} AND id = $2",
            *SELECT_MACHINES
        )))
        .bind(tenant.as_uuid())
        .bind(id.as_uuid())
        .fetch_optional(self.reader())
        .await?;
        row.as_ref().map(machine_from_row).transpose()
    }

    #[tracing::instrument(level = "debug", name = "store.gpu_use_on", skip_all)]
    async fn gpu_use_on(
        &self,
        machine: MachineId,
    ) -> Result<
        (
            Vec<einsora_core::machine::GpuSample>,
            Option<time::OffsetDateTime>,
        ),
        StoreError,
    > {
        let row: Option<(Option<String>, Option<i64>)> =
            sqlx::query_as("SELECT gpu_usage, gpu_usage_at FROM machines WHERE id = $1")
                .bind(machine.as_uuid())
                .fetch_optional(self.reader())
                .await?;
        let Some((Some(text), at)) = row else {
            return Ok((Vec::new(), None));
        };
        Ok((
            crate::devices::usage_from_json(&text)?,
            at.map(crate::time_ms::from_ms).transpose()?,
        ))
    }

    #[tracing::instrument(level = "debug", name = "store.revoke_machine", skip_all)]
    async fn revoke_machine(
        &self,
        tenant: TenantId,
        id: MachineId,
    ) -> Result<Option<MachineRecord>, StoreError> {
        let now = now_ms();
        let mut conn = self.writer().await?;
        let mut tx = begin_write(&mut conn).await?;
        let revoked = sqlx::query(
            "UPDATE machines SET revoked_at = COALESCE(revoked_at, $1) \
             WHERE id = $2 AND owner_id = $3",
        )
        .bind(now)
        .bind(id.as_uuid())
        .bind(tenant.as_uuid())
        .execute(&mut *tx)
        .await?;
        if revoked.rows_affected() == 0 {
            return Ok(None);
        }
        sqlx::query(
            "UPDATE machine_certificates SET revoked_at = COALESCE(revoked_at, $1) \
             WHERE machine_id = $2",
        )
        .bind(now)
        .bind(id.as_uuid())
        .execute(&mut *tx)
        .await?;
        commit_action(tx, Some(ActivityObject::of(id))).await?;
        drop(conn);
        self.committed();
        self.machine_of(tenant, id).await
    }

    #[tracing::instrument(level = "debug", name = "store.set_trusted_users", skip_all)]
    async fn set_trusted_users(
        &self,
        tenant: TenantId,
        id: MachineId,
        by: einsora_core::ids::UserId,
        users: &[einsora_core::ids::UserId],
    ) -> Result<Option<MachineRecord>, StoreError> {
        let list: Vec<String> = users.iter().map(ToString::to_string).collect();
        let mut conn = self.writer().await?;
        let mut tx = begin_write(&mut conn).await?;
        let set = sqlx::query(
            "UPDATE machines SET trusted_users = $1 \
             WHERE id = $2 AND owner_id = $3 AND owner_user_id = $4",
        )
        .bind(serde_json::Value::from(list).to_string())
        .bind(id.as_uuid())
        .bind(tenant.as_uuid())
        .bind(by.as_uuid())
        .execute(&mut *tx)
        .await?;
        if set.rows_affected() == 0 {
            return Ok(None);
        }
        commit_action(tx, Some(ActivityObject::of(id))).await?;
        drop(conn);
        self.committed();
        self.machine_of(tenant, id).await
    }

    #[tracing::instrument(level = "debug", name = "store.record_usage", skip_all)]
    async fn record_usage(&self, r: &UsageRecord) -> Result<(), StoreError> {
        upsert_usage(r)?.execute(&mut *self.writer().await?).await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", name = "store.usage_of", skip_all)]
    async fn usage_of(
        &self,
        tenant: TenantId,
        page: &UsagePage,
    ) -> Result<Vec<UsageRecord>, StoreError> {
        let mut q = sqlx::QueryBuilder::<Db>::new(format!(
            "SELECT {USAGE_COLUMNS} FROM usage_records WHERE tenant_id = "
        ));
        q.push_bind(*tenant.as_uuid())
            .push(" AND hour_start >= ")
            .push_bind(crate::time_ms::to_ms(page.from))
            .push(" AND hour_start < ")
            .push_bind(crate::time_ms::to_ms(page.to));
        if let Some(owner) = page.owner {
            q.push(" AND workload_id IN (SELECT id FROM workloads WHERE owner_id = ")
                .push_bind(*owner.as_uuid())
                .push(")");
        }
        if let Some(after) = page.after {
            let hour = crate::time_ms::to_ms(after.hour_start);
            q.push(" AND (hour_start > ")
                .push_bind(hour)
                .push(" OR (hour_start = ")
                .push_bind(hour)
                .push(" AND id > ")
                .push_bind(*after.id.as_uuid())
                .push("))");
        }
        q.push(" ORDER BY hour_start, id LIMIT ")
            .push_bind(i64::from(page.limit));
        let rows = q.build().fetch_all(self.reader()).await?;
        rows.iter().map(usage_from_row).collect()
    }

    #[tracing::instrument(level = "debug", name = "store.workload_usage", skip_all)]
    async fn workload_usage(
        &self,
        tenant: TenantId,
        id: WorkloadId,
    ) -> Result<Vec<UsageRecord>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {USAGE_COLUMNS} FROM usage_records WHERE tenant_id = $1 AND workload_id = $2 \
             ORDER BY hour_start, id"
        )))
        .bind(tenant.as_uuid())
        .bind(id.as_uuid())
        .fetch_all(self.reader())
        .await?;
        rows.iter().map(usage_from_row).collect()
    }
}

static WORKLOAD_OF: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!("SELECT {WORKLOAD_COLUMNS} FROM workloads WHERE id = $1 AND tenant_id = $2")
});
