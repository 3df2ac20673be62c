// Usage reports, shared by both engines (included): one GROUP BY per grouping.

/// The sums every report row has. Postgres' SUM of a BIGINT is NUMERIC: cast back.
const REPORT_SUMS: &str = "u.placed_class AS placed_class, \
     COUNT(DISTINCT u.workload_id) AS workloads, \
     CAST(SUM(u.seconds) AS BIGINT) AS seconds, \
     CAST(SUM(u.units * u.seconds) AS BIGINT) AS unit_seconds";

#[async_trait::async_trait]
impl crate::UsageReportStore for ThisStore {
    #[tracing::instrument(level = "debug", name = "store.usage_report", skip_all)]
    async fn usage_report(
        &self,
        tenant: TenantId,
        query: &crate::UsageReportQuery,
    ) -> Result<Vec<crate::UsageReportRow>, StoreError> {
        use crate::UsageGrouping;
        let (group, joins, keys) = match query.by {
            UsageGrouping::Class => (
                "NULL AS group_id, u.placed_class AS label",
                "",
                "u.placed_class",
            ),
            UsageGrouping::User => (
                "w.owner_id AS group_id, o.email AS label",
                " LEFT JOIN users o ON o.id = w.owner_id",
                "w.owner_id, o.email, u.placed_class",
            ),
            // The owner's team now, not when the record's hour was (migration 0017).
            UsageGrouping::Team => (
                "t.id AS group_id, t.name AS label",
                " LEFT JOIN users o ON o.id = w.owner_id LEFT JOIN teams t ON t.id = o.team_id",
                "t.id, t.name, u.placed_class",
            ),
        };
        let mut q = sqlx::QueryBuilder::<Db>::new(format!(
            "SELECT {group}, {REPORT_SUMS} FROM usage_records u \
             JOIN workloads w ON w.id = u.workload_id{joins} WHERE u.tenant_id = "
        ));
        q.push_bind(*tenant.as_uuid())
            .push(" AND u.hour_start >= ")
            .push_bind(crate::time_ms::to_ms(query.from))
            .push(" AND u.hour_start < ")
            .push_bind(crate::time_ms::to_ms(query.to));
        if let Some(owner) = query.owner {
            q.push(" AND w.owner_id = ").push_bind(*owner.as_uuid());
        }
        q.push(format!(" GROUP BY {keys}"));
        let rows = q.build().fetch_all(self.reader()).await?;
        rows.iter()
            .map(|row| {
                let count = |name: &'static str| -> Result<u64, StoreError> {
                    let n: i64 = row.try_get(name)?;
                    u64::try_from(n).map_err(|_| StoreError::corrupt(name, n))
                };
                Ok(crate::UsageReportRow {
                    group_id: row.try_get("group_id")?,
                    label: row.try_get("label")?,
                    placed_class: row.try_get("placed_class")?,
                    workloads: to_u32("workload count", row.try_get("workloads")?)?,
                    seconds: count("seconds")?,
                    unit_seconds: count("unit_seconds")?,
                })
            })
            .collect()
    }
}
