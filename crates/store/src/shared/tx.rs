// Steps used inside write transactions, shared by both engines (included).

type Tx = sqlx::Transaction<'static, Db>;

/// Refuses the write unless `lease` is still held, at its epoch, unexpired. On Postgres the row
/// is share-locked so a takeover can't commit between this check and the write.
async fn check_fence(tx: &mut Tx, lease: &Lease, now: i64) -> Result<(), StoreError> {
    let held = sqlx::query(concat!(
        "SELECT epoch FROM leases WHERE name = $1 AND holder = $2 AND epoch = $3 \
         AND expires_at > $4",
        for_share!()
    ))
    .bind(&lease.name)
    .bind(&lease.holder)
    .bind(lease.epoch)
    .bind(now)
    .fetch_optional(&mut **tx)
    .await?;
    match held {
        Some(_) => Ok(()),
        None => Err(StoreError::LeaseLost(lease.name.clone())),
    }
}

/// Locks the tenant's quota row for `class` (or its default row) and checks that `units` more
/// fit. Concurrent creates and starts of one tenant serialise here.
async fn check_quota(
    tx: &mut Tx,
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

#[allow(clippy::too_many_arguments)]
async fn insert_event(
    tx: &mut Tx,
    workload: WorkloadId,
    tenant: TenantId,
    from: Option<State>,
    to: State,
    reason: &str,
    attempt: Attempt,
    at: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO workload_events (id, workload_id, tenant_id, from_state, to_state, reason, \
         attempt, at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(EventId::new().as_uuid())
    .bind(workload.as_uuid())
    .bind(tenant.as_uuid())
    .bind(from.map(State::as_str))
    .bind(to.as_str())
    .bind(reason)
    .bind(i64::from(attempt.get()))
    .bind(at)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Turns a lost compare-and-swap into the error that says what happened.
async fn lost_race(tx: &mut Tx, id: WorkloadId) -> StoreError {
    let current: Result<Option<String>, _> =
        sqlx::query_scalar("SELECT state FROM workloads WHERE id = $1")
            .bind(id.as_uuid())
            .fetch_optional(&mut **tx)
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
        Some(db) if db.is_unique_violation() => StoreError::NameTaken(name.to_owned()),
        _ => err.into(),
    }
}
