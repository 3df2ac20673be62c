// `AgentStore`, shared by both engines (included).

#[async_trait::async_trait]
impl crate::AgentStore for ThisStore {
    #[tracing::instrument(level = "debug", name = "store.machine_for_certificate", skip_all)]
    async fn machine_for_certificate(
        &self,
        machine: MachineId,
        fingerprint: &[u8; 32],
    ) -> Result<Option<crate::MachineRecord>, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(MACHINE_FOR_CERTIFICATE.as_str()))
            .bind(machine.as_uuid())
            .bind(&fingerprint[..])
            .bind(now_ms())
            .fetch_optional(self.reader())
            .await?;
        row.as_ref().map(machine_from_row).transpose()
    }

    #[tracing::instrument(level = "debug", name = "store.trusted_certificates", skip_all)]
    async fn trusted_certificates(
        &self,
        fingerprints: &[[u8; 32]],
    ) -> Result<std::collections::HashSet<[u8; 32]>, StoreError> {
        let mut trusted = std::collections::HashSet::new();
        for chunk in fingerprints.chunks(FINGERPRINTS_PER_QUERY) {
            let mut q = sqlx::QueryBuilder::<Db>::new(
                "SELECT c.fingerprint FROM machine_certificates c \
                 JOIN machines m ON m.id = c.machine_id \
                 WHERE m.revoked_at IS NULL AND c.revoked_at IS NULL AND c.not_after > ",
            );
            q.push_bind(now_ms());
            q.push(" AND c.fingerprint IN (");
            let mut list = q.separated(", ");
            for fingerprint in chunk {
                list.push_bind(fingerprint.to_vec());
            }
            q.push(")");
            for row in q.build().fetch_all(self.reader()).await? {
                let found: Vec<u8> = row.try_get(0)?;
                if let Ok(fingerprint) = <[u8; 32]>::try_from(found.as_slice()) {
                    trusted.insert(fingerprint);
                }
            }
        }
        Ok(trusted)
    }

    #[tracing::instrument(level = "debug", name = "store.machines_in", skip_all)]
    async fn machines_in(&self, region: &Region) -> Result<Vec<crate::MachineRecord>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(MACHINES_IN.as_str()))
            .bind(region.as_str())
            .fetch_all(self.reader())
            .await?;
        rows.iter().map(machine_from_row).collect()
    }

    #[tracing::instrument(level = "debug", name = "store.workloads_on", skip_all)]
    async fn workloads_on(&self, machine: MachineId) -> Result<Vec<Workload>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(WORKLOADS_ON.as_str()))
            .bind(machine.as_uuid())
            .fetch_all(self.reader())
            .await?;
        rows.iter().map(workload_from_row).collect()
    }

    #[tracing::instrument(level = "debug", name = "store.machine_gone", skip_all)]
    async fn machine_gone(&self, machine: MachineId) -> Result<bool, StoreError> {
        let revoked: Option<Option<i64>> =
            sqlx::query_scalar("SELECT revoked_at FROM machines WHERE id = $1")
                .bind(machine.as_uuid())
                .fetch_optional(self.reader())
                .await?;
        Ok(revoked.is_none_or(|at| at.is_some()))
    }

    #[tracing::instrument(level = "debug", name = "store.pend_removal", skip_all)]
    async fn pend_removal(
        &self,
        workload: WorkloadId,
        machine: MachineId,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO pending_removals (workload_id, machine_id, created_at) \
             VALUES ($1, $2, $3) ON CONFLICT (workload_id) DO NOTHING",
        )
        .bind(workload.as_uuid())
        .bind(machine.as_uuid())
        .bind(now_ms())
        .execute(&mut *self.writer().await?)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", name = "store.confirm_removal", skip_all)]
    async fn confirm_removal(
        &self,
        workload: WorkloadId,
        machine: MachineId,
    ) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM pending_removals WHERE workload_id = $1 AND machine_id = $2")
            .bind(workload.as_uuid())
            .bind(machine.as_uuid())
            .execute(&mut *self.writer().await?)
            .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", name = "store.record_inventory", skip_all)]
    async fn record_inventory(&self, reg: &crate::MachineRegistration) -> Result<bool, StoreError> {
        let m = &reg.machine;
        let memory = i64::try_from(m.memory_bytes)
            .map_err(|_| StoreError::InvalidInput("the machine's memory is too large".into()))?;
        let drivers = serde_json::Value::from(reg.drivers.clone()).to_string();
        let done = sqlx::query(
            "UPDATE machines SET name = $1, os = $2, arch = $3, cpus = $4, memory_bytes = $5, \
             accelerators = $6, drivers = $7, last_seen_at = COALESCE($8, last_seen_at), \
             models = $10, gpu_note = $11, performance_cores = $12, efficiency_cores = $13, \
             vm_accel = $14, vm_limit = $15 \
             WHERE id = $9 AND revoked_at IS NULL",
        )
        .bind(&m.name)
        .bind(&m.os)
        .bind(&m.arch)
        .bind(i64::from(m.cpus))
        .bind(memory)
        .bind(crate::devices::to_json(&m.devices))
        .bind(drivers)
        .bind(reg.last_seen_at.map(crate::time_ms::to_ms))
        .bind(m.id.as_uuid())
        .bind(crate::model_files::to_json(&reg.models))
        .bind(reg.gpu_note.map(GpuNote::as_str))
        .bind(m.cores.map(|c| i64::from(c.performance)))
        .bind(m.cores.map(|c| i64::from(c.efficiency)))
        .bind(reg.vm.map(|vm| vm.accel.as_str()))
        .bind(reg.vm.and_then(|vm| vm.limit).map(i64::from))
        .execute(&mut *self.writer().await?)
        .await?;
        // What a machine offers changed: placement may decide differently now.
        self.committed();
        Ok(done.rows_affected() > 0)
    }

    #[tracing::instrument(level = "debug", name = "store.add_machine_certificate", skip_all)]
    async fn add_machine_certificate(
        &self,
        machine: MachineId,
        cert: &crate::MachineCertificate,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "INSERT INTO machine_certificates (serial, machine_id, fingerprint, not_before, \
             not_after, created_at) SELECT $1, id, $3, $4, $5, $6 FROM machines \
             WHERE id = $2 AND revoked_at IS NULL",
        )
        .bind(&cert.serial)
        .bind(machine.as_uuid())
        .bind(&cert.fingerprint[..])
        .bind(crate::time_ms::to_ms(cert.not_before))
        .bind(crate::time_ms::to_ms(cert.not_after))
        .bind(now_ms())
        .execute(&mut *self.writer().await?)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    #[tracing::instrument(level = "debug", name = "store.retire_older_certificates", skip_all)]
    async fn retire_older_certificates(
        &self,
        machine: MachineId,
        fingerprint: &[u8; 32],
    ) -> Result<u64, StoreError> {
        // No change signal: which certificate a machine holds decides nothing a pass decides.
        let done = sqlx::query(
            "UPDATE machine_certificates SET revoked_at = $3 WHERE machine_id = $1 \
             AND revoked_at IS NULL AND fingerprint <> $2 AND created_at <= (SELECT \
             c.created_at FROM machine_certificates c WHERE c.machine_id = $1 \
             AND c.fingerprint = $2)",
        )
        .bind(machine.as_uuid())
        .bind(&fingerprint[..])
        .bind(now_ms())
        .execute(&mut *self.writer().await?)
        .await?;
        Ok(done.rows_affected())
    }

    #[tracing::instrument(level = "debug", name = "store.flag_machine", skip_all)]
    async fn flag_machine(
        &self,
        machine: MachineId,
        what: &str,
        at: time::OffsetDateTime,
    ) -> Result<(), StoreError> {
        // No change signal: a flag decides nothing a pass decides.
        let at = crate::time_ms::to_ms(at);
        sqlx::query(
            "UPDATE machines SET flagged_for = $1, flagged_at = COALESCE(flagged_at, $2), \
             flagged_last_at = $2 WHERE id = $3",
        )
        .bind(what)
        .bind(at)
        .bind(machine.as_uuid())
        .execute(&mut *self.writer().await?)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", name = "store.machine_flag", skip_all)]
    async fn machine_flag(
        &self,
        machine: MachineId,
    ) -> Result<Option<crate::MachineFlag>, StoreError> {
        let row: Option<(Option<String>, Option<i64>, Option<i64>)> = sqlx::query_as(
            "SELECT flagged_for, flagged_at, flagged_last_at FROM machines WHERE id = $1",
        )
        .bind(machine.as_uuid())
        .fetch_optional(self.reader())
        .await?;
        match row {
            Some((Some(what), Some(since), Some(last))) => Ok(Some(crate::MachineFlag {
                what,
                since: from_ms(since)?,
                last: from_ms(last)?,
            })),
            _ => Ok(None),
        }
    }

    #[tracing::instrument(level = "debug", name = "store.machine_seen", skip_all)]
    async fn machine_seen(
        &self,
        machine: MachineId,
        at: time::OffsetDateTime,
    ) -> Result<(), StoreError> {
        // No change signal: being heard from changes nothing the controller decides on.
        sqlx::query("UPDATE machines SET last_seen_at = $1 WHERE id = $2")
            .bind(crate::time_ms::to_ms(at))
            .bind(machine.as_uuid())
            .execute(&mut *self.writer().await?)
            .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", name = "store.record_gpu_usage", skip_all)]
    async fn record_gpu_usage(
        &self,
        machine: MachineId,
        gpus: &[einsora_core::machine::GpuSample],
        at: time::OffsetDateTime,
    ) -> Result<(), StoreError> {
        // No change signal: how busy a GPU is decides nothing the controller decides on.
        sqlx::query("UPDATE machines SET gpu_usage = $1, gpu_usage_at = $2 WHERE id = $3")
            .bind(crate::devices::usage_to_json(gpus))
            .bind(crate::time_ms::to_ms(at))
            .bind(machine.as_uuid())
            .execute(&mut *self.writer().await?)
            .await?;
        Ok(())
    }
}

/// Fingerprints asked about in one statement.
const FINGERPRINTS_PER_QUERY: usize = 500;

static MACHINE_FOR_CERTIFICATE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "SELECT {MACHINE_COLUMNS}, CAST(0 AS BIGINT) AS workload_count FROM machines \
         WHERE id = $1 AND revoked_at IS NULL AND EXISTS (SELECT 1 FROM machine_certificates c \
         WHERE c.machine_id = machines.id AND c.fingerprint = $2 AND c.revoked_at IS NULL \
         AND c.not_after > $3)"
    )
});

static WORKLOADS_ON: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "SELECT {WORKLOAD_COLUMNS} FROM workloads WHERE machine_id = $1 AND (state <> 'deleted' \
         OR id IN (SELECT workload_id FROM pending_removals WHERE machine_id = $1)) ORDER BY id"
    )
});

static MACHINES_IN: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "SELECT {MACHINE_COLUMNS}, CAST(0 AS BIGINT) AS workload_count FROM machines \
         WHERE region = $1 AND revoked_at IS NULL ORDER BY id"
    )
});
