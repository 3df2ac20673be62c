// `ControllerStore`, shared by both engines (included).

use crate::{InUse, Waiting};

#[async_trait::async_trait]
impl crate::ControllerStore for ThisStore {
    #[tracing::instrument(level = "debug", name = "store.waiting", skip_all)]
    async fn waiting(&self, region: &Region) -> Result<Vec<Waiting>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(WAITING.as_str()))
            .bind(region.as_str())
            .fetch_all(self.reader())
            .await?;
        rows.iter()
            .map(|row| {
                Ok(Waiting {
                    workload: workload_from_row(row)?,
                    tenant_trusted: row.try_get::<i32, _>("tenant_trusted")? != 0,
                    trace_context: row.try_get("trace_context")?,
                    since: from_ms(row.try_get("waiting_since")?)?,
                })
            })
            .collect()
    }

    #[tracing::instrument(level = "debug", name = "store.census", skip_all)]
    async fn census(&self, region: &Region) -> Result<BTreeMap<State, u64>, StoreError> {
        let rows = sqlx::query(
            "SELECT state, COUNT(*) AS n FROM workloads WHERE region = $1 AND state <> 'deleted' \
             GROUP BY state",
        )
        .bind(region.as_str())
        .fetch_all(self.reader())
        .await?;
        let mut counts = BTreeMap::new();
        for row in &rows {
            let state = parse_word("workload state", &row.try_get::<String, _>("state")?)?;
            counts.insert(state, to_u64("workload count", row.try_get("n")?)?);
        }
        Ok(counts)
    }

    #[tracing::instrument(level = "debug", name = "store.touch_endpoints", skip_all)]
    async fn touch_endpoints(
        &self,
        ids: &[WorkloadId],
        at: time::OffsetDateTime,
    ) -> Result<(), StoreError> {
        if ids.is_empty() {
            return Ok(());
        }
        let at = crate::time_ms::to_ms(at);
        let mut writer = self.writer().await?;
        for chunk in ids.chunks(TOUCHED_PER_QUERY) {
            let mut q = sqlx::QueryBuilder::<Db>::new("UPDATE workloads SET last_request_at = ");
            q.push_bind(at)
                .push(" WHERE (last_request_at IS NULL OR last_request_at < ")
                .push_bind(at)
                .push(") AND id IN (");
            let mut list = q.separated(", ");
            for id in chunk {
                list.push_bind(*id.as_uuid());
            }
            q.push(")");
            q.build().execute(&mut *writer).await?;
        }
        Ok(())
    }

    #[tracing::instrument(level = "debug", name = "store.running_endpoints", skip_all)]
    async fn running_endpoints(&self, region: &Region) -> Result<Vec<InUse>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(RUNNING_ENDPOINTS.as_str()))
            .bind(region.as_str())
            .fetch_all(self.reader())
            .await?;
        rows.iter()
            .map(|row| {
                Ok(InUse {
                    workload: workload_from_row(row)?,
                    last_request: row
                        .try_get::<Option<i64>, _>("last_request_at")?
                        .map(from_ms)
                        .transpose()?,
                    running_since: from_ms(row.try_get("running_since")?)?,
                })
            })
            .collect()
    }
}

/// Workloads touched in one statement.
const TOUCHED_PER_QUERY: usize = 500;

/// Running endpoints with their last request, and their latest step into running (notes on a
/// running workload, from = to, don't count).
static RUNNING_ENDPOINTS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "SELECT {WORKLOAD_COLUMNS}, last_request_at, \
         COALESCE((SELECT e.at FROM workload_events e WHERE e.workload_id = workloads.id \
         AND e.to_state = 'running' AND (e.from_state IS NULL OR e.from_state <> 'running') \
         ORDER BY e.seq DESC LIMIT 1), updated_at) AS running_since \
         FROM workloads WHERE region = $1 AND state = 'running' AND kind = 'endpoint'"
    )
});

/// The queue's order is the sequence of each workload's latest step into pending; notes on a
/// pending workload (from = to) don't move it. That step's time is when it started waiting
/// (its update time if the step is missing, as in a hand-edited row).
static WAITING: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    const INTO_PENDING: &str = "FROM workload_events e WHERE e.workload_id = workloads.id \
         AND e.to_state = 'pending' AND (e.from_state IS NULL OR e.from_state <> 'pending')";
    format!(
        "SELECT {WORKLOAD_COLUMNS}, \
         (SELECT trusted FROM tenants WHERE tenants.id = workloads.tenant_id) AS tenant_trusted, \
         trace_context, \
         COALESCE((SELECT e.at {INTO_PENDING} ORDER BY e.seq DESC LIMIT 1), updated_at) \
         AS waiting_since \
         FROM workloads WHERE region = $1 AND state IN ('pending', 'queued') \
         ORDER BY (SELECT MAX(seq) {INTO_PENDING}), id"
    )
});
