// Steps of writes, shared by both engines (included).

type Tx<'c> = sqlx::Transaction<'c, Db>;

/// The condition a controller's write carries: its lease is still held, at its epoch,
/// unexpired. On Postgres the lease row is share-locked, so a takeover can't commit between the
/// check and the write. The arguments number the parameters for the lease's name, holder,
/// epoch, and the current time.
macro_rules! fenced {
    ($name:literal, $holder:literal, $epoch:literal, $now:literal) => {
        concat!(
            " AND EXISTS (SELECT 1 FROM leases WHERE name = $",
            $name,
            " AND holder = $",
            $holder,
            " AND epoch = $",
            $epoch,
            " AND expires_at > $",
            $now,
            for_share!(),
            ")"
        )
    };
}

/// Locks the tenant's quota row for `class` (or its default row) and checks that `units` more
/// fit. Concurrent creates and starts of one tenant serialise here.
async fn check_quota(
    tx: &mut Tx<'_>,
    tenant: TenantId,
    class: &str,
    units: u32,
) -> Result<(), StoreError> {
    let rows = sqlx::query(concat!(
        "SELECT gpu_class, limit_units FROM quotas WHERE tenant_id = $1 AND gpu_class IN ($2, $3)",
        for_update!()
    ))
    .bind(tenant.as_uuid())
    .bind(class)
    .bind(QuotaClass::DEFAULT_KEY)
    .fetch_all(&mut **tx)
    .await?;
    let pick = |key: &str| {
        rows.iter()
            .find(|r| r.try_get::<String, _>("gpu_class").is_ok_and(|c| c == key))
    };
    let exceeded = |held: u64, limit: u64| StoreError::QuotaExceeded {
        class: class.to_owned(),
        held,
        requested: units,
        limit,
    };
    let Some(row) = pick(class).or_else(|| pick(QuotaClass::DEFAULT_KEY)) else {
        return Err(exceeded(0, 0));
    };
    let Some(limit) = row.try_get::<Option<i64>, _>("limit_units")? else {
        return Ok(());
    };
    let held: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(HELD_BY_TENANT.as_str()))
        .bind(tenant.as_uuid())
        .bind(class)
        .fetch_one(&mut **tx)
        .await?;
    let (held, limit) = (held.max(0).unsigned_abs(), limit.max(0).unsigned_abs());
    if held + u64::from(units) > limit {
        return Err(exceeded(held, limit));
    }
    Ok(())
}

static HELD_BY_TENANT: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "SELECT CAST(COALESCE(SUM(units), 0) AS BIGINT) FROM workloads WHERE tenant_id = $1 AND gpu_class = $2 \
         AND state IN ({})",
        *crate::state_sql::HOLDS_QUOTA
    )
});

/// Says why a write changed nothing: the lease was lost, or another writer won the
/// compare-and-swap, or the workload doesn't exist.
async fn why_unchanged(store: &ThisStore, id: WorkloadId, fence: Option<&Lease>) -> StoreError {
    if let Some(lease) = fence {
        let held: Result<Option<i64>, _> = sqlx::query_scalar(
            "SELECT epoch FROM leases WHERE name = $1 AND holder = $2 AND epoch = $3 \
             AND expires_at > $4",
        )
        .bind(&lease.name)
        .bind(&lease.holder)
        .bind(lease.epoch)
        .bind(now_ms())
        .fetch_optional(store.reader())
        .await;
        match held {
            Ok(Some(_)) => {}
            Ok(None) => return StoreError::LeaseLost(lease.name.clone()),
            Err(e) => return e.into(),
        }
    }
    let current: Result<Option<String>, _> =
        sqlx::query_scalar("SELECT state FROM workloads WHERE id = $1")
            .bind(id.as_uuid())
            .fetch_optional(store.reader())
            .await;
    match current {
        Ok(Some(state)) => match parse_word("state", &state) {
            Ok(current) => StoreError::Conflict { current },
            Err(e) => e,
        },
        Ok(None) => StoreError::NotFound,
        Err(e) => e.into(),
    }
}

fn name_taken(err: sqlx::Error, name: &str) -> StoreError {
    match err.as_database_error() {
        Some(db) if db.is_unique_violation() => {
            StoreError::Taken(crate::Taken::WorkloadName(name.to_owned()))
        }
        _ => err.into(),
    }
}
