// `AgentStore`, shared by both engines (included).

#[async_trait::async_trait]
impl crate::AgentStore for ThisStore {
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

    async fn workloads_on(&self, machine: MachineId) -> Result<Vec<Workload>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(WORKLOADS_ON.as_str()))
            .bind(machine.as_uuid())
            .fetch_all(self.reader())
            .await?;
        rows.iter().map(workload_from_row).collect()
    }

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
}

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
        "SELECT {WORKLOAD_COLUMNS} FROM workloads WHERE machine_id = $1 AND state <> 'deleted' \
         ORDER BY id"
    )
});
