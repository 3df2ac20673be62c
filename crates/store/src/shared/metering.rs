// `MeteringStore`, shared by both engines (included).

use crate::UsageChange;

/// Keeps `IN (...)` lists far below either engine's limit on bound parameters.
const IDS_PER_QUERY: usize = 500;

/// `$1`..`$9`: a usage record; an hour's existing record keeps its ID and tenant.
const UPSERT_USAGE: &str = "INSERT INTO usage_records (id, tenant_id, workload_id, region, \
     machine_id, placed_class, units, hour_start, seconds) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
     ON CONFLICT (workload_id, hour_start) DO UPDATE SET \
     machine_id = excluded.machine_id, placed_class = excluded.placed_class, \
     units = excluded.units, seconds = excluded.seconds";

fn upsert_usage(
    r: &UsageRecord,
) -> Result<sqlx::query::Query<'static, Db, <Db as sqlx::Database>::Arguments>, StoreError> {
    let hour = crate::time_ms::to_ms(r.hour_start);
    if hour % HOUR_MS != 0 {
        return Err(StoreError::InvalidInput(
            "a usage record starts on the hour".into(),
        ));
    }
    if r.seconds > 3600 {
        return Err(StoreError::InvalidInput(
            "a usage record has at most 3600 seconds".into(),
        ));
    }
    Ok(sqlx::query(UPSERT_USAGE)
        .bind(*r.id.as_uuid())
        .bind(*r.tenant_id.as_uuid())
        .bind(*r.workload_id.as_uuid())
        .bind(r.region.as_str().to_owned())
        .bind(r.machine_id.map(|m| *m.as_uuid()))
        .bind(r.placed_class.clone())
        .bind(i64::from(r.units))
        .bind(hour)
        .bind(i64::from(r.seconds)))
}

static WORKLOADS_TO_METER: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "SELECT {WORKLOAD_COLUMNS} FROM workloads WHERE updated_at >= $1 OR state IN ({}) \
         ORDER BY id",
        *crate::state_sql::METERED
    )
});

#[async_trait::async_trait]
impl crate::MeteringStore for ThisStore {
    #[tracing::instrument(level = "debug", name = "store.workloads_to_meter", skip_all)]
    async fn workloads_to_meter(
        &self,
        changed_since: Option<time::OffsetDateTime>,
    ) -> Result<Vec<Workload>, StoreError> {
        let rows = match changed_since {
            None => {
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT {WORKLOAD_COLUMNS} FROM workloads ORDER BY id"
                )))
                .fetch_all(self.reader())
                .await?
            }
            Some(since) => {
                sqlx::query(sqlx::AssertSqlSafe(WORKLOADS_TO_METER.as_str()))
                    .bind(crate::time_ms::to_ms(since))
                    .fetch_all(self.reader())
                    .await?
            }
        };
        rows.iter().map(workload_from_row).collect()
    }

    #[tracing::instrument(level = "debug", name = "store.timelines", skip_all)]
    async fn timelines(
        &self,
        ids: &[WorkloadId],
    ) -> Result<BTreeMap<WorkloadId, Vec<Event>>, StoreError> {
        let mut timelines: BTreeMap<WorkloadId, Vec<Event>> = BTreeMap::new();
        for chunk in ids.chunks(IDS_PER_QUERY) {
            let mut q = sqlx::QueryBuilder::<Db>::new(
                "SELECT seq, workload_id, from_state, to_state, reason, attempt, at \
                 FROM workload_events WHERE workload_id IN (",
            );
            push_ids(&mut q, chunk);
            q.push(") ORDER BY seq");
            for row in q.build().fetch_all(self.reader()).await? {
                let event = event_from_row(&row)?;
                timelines.entry(event.workload_id).or_default().push(event);
            }
        }
        Ok(timelines)
    }

    #[tracing::instrument(level = "debug", name = "store.usage_of_workloads", skip_all)]
    async fn usage_of_workloads(
        &self,
        ids: &[WorkloadId],
    ) -> Result<BTreeMap<WorkloadId, Vec<UsageRecord>>, StoreError> {
        let mut usage: BTreeMap<WorkloadId, Vec<UsageRecord>> = BTreeMap::new();
        for chunk in ids.chunks(IDS_PER_QUERY) {
            let mut q = sqlx::QueryBuilder::<Db>::new(format!(
                "SELECT {USAGE_COLUMNS} FROM usage_records WHERE workload_id IN ("
            ));
            push_ids(&mut q, chunk);
            q.push(") ORDER BY hour_start");
            for row in q.build().fetch_all(self.reader()).await? {
                let record = usage_from_row(&row)?;
                usage.entry(record.workload_id).or_default().push(record);
            }
        }
        Ok(usage)
    }

    #[tracing::instrument(level = "debug", name = "store.apply_usage", skip_all)]
    async fn apply_usage(&self, change: &UsageChange) -> Result<(), StoreError> {
        if change
            .upsert
            .iter()
            .any(|r| r.workload_id != change.workload_id)
        {
            return Err(StoreError::InvalidInput(
                "a usage change covers one workload".into(),
            ));
        }
        let upserts = change
            .upsert
            .iter()
            .map(upsert_usage)
            .collect::<Result<Vec<_>, _>>()?;
        if change.is_empty() {
            return Ok(());
        }
        let mut conn = self.writer().await?;
        let mut tx = begin_write(&mut conn).await?;
        for upsert in upserts {
            upsert.execute(&mut *tx).await?;
        }
        for hours in change.remove_hours.chunks(IDS_PER_QUERY) {
            let mut q =
                sqlx::QueryBuilder::<Db>::new("DELETE FROM usage_records WHERE workload_id = ");
            q.push_bind(*change.workload_id.as_uuid())
                .push(" AND hour_start IN (");
            let mut list = q.separated(", ");
            for hour in hours {
                list.push_bind(crate::time_ms::to_ms(*hour));
            }
            q.push(")");
            q.build().execute(&mut *tx).await?;
        }
        tx.commit().await?;
        // No change signal: usage is what the metering role writes, not what anything waits on.
        Ok(())
    }
}

fn push_ids(q: &mut sqlx::QueryBuilder<Db>, ids: &[WorkloadId]) {
    let mut list = q.separated(", ");
    for id in ids {
        list.push_bind(*id.as_uuid());
    }
}
