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
/// fit the tenant's quota, then, for a workload of `owner`, the owner's team's and the owner's
/// own. Concurrent creates and starts of one tenant serialise on that row, so none of the three
/// can be overrun.
async fn check_quota(
    tx: &mut Tx<'_>,
    tenant: TenantId,
    owner: Option<einsora_core::ids::UserId>,
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
    let exceeded = |holder: crate::QuotaHolder, held: i64, limit: i64| StoreError::QuotaExceeded {
        holder,
        class: class.to_owned(),
        held: held.max(0).unsigned_abs(),
        requested: units,
        limit: limit.max(0).unsigned_abs(),
    };
    let Some(row) = pick(class).or_else(|| pick(QuotaClass::DEFAULT_KEY)) else {
        return Err(exceeded(crate::QuotaHolder::Tenant, 0, 0));
    };
    if let Some(limit) = row.try_get::<Option<i64>, _>("limit_units")? {
        let held: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(HELD_BY_TENANT.as_str()))
            .bind(tenant.as_uuid())
            .bind(class)
            .fetch_one(&mut **tx)
            .await?;
        if held + i64::from(units) > limit {
            return Err(exceeded(crate::QuotaHolder::Tenant, held, limit));
        }
    }
    let Some(owner) = owner else {
        return Ok(());
    };
    // The owner's own limit and their team's, each with what it holds now.
    let limits = sqlx::query(sqlx::AssertSqlSafe(OWNER_LIMITS.as_str()))
        .bind(owner.as_uuid())
        .bind(class)
        .fetch_optional(&mut **tx)
        .await?;
    let Some(limits) = limits else {
        return Ok(());
    };
    if let Some(limit) = limits.try_get::<Option<i64>, _>("user_limit")? {
        let held: i64 = limits.try_get("user_held")?;
        if held + i64::from(units) > limit {
            let email: String = limits.try_get("email")?;
            return Err(exceeded(crate::QuotaHolder::User(email), held, limit));
        }
    }
    if let Some(limit) = limits.try_get::<Option<i64>, _>("team_limit")? {
        let held: i64 = limits.try_get("team_held")?;
        if held + i64::from(units) > limit {
            let team: String = limits.try_get("team_name")?;
            return Err(exceeded(crate::QuotaHolder::Team(team), held, limit));
        }
    }
    Ok(())
}

/// A user's (`$1`) limit for a class (`$2`) and their team's, each with the units its workloads
/// of that class hold now (the team's: by each workload's owner's team today).
static OWNER_LIMITS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let holds = &*crate::state_sql::HOLDS_QUOTA;
    format!(
        "SELECT u.email, t.name AS team_name, \
         (SELECT q.limit_units FROM user_quotas q WHERE q.user_id = u.id AND q.gpu_class = $2) \
           AS user_limit, \
         (SELECT q.limit_units FROM team_quotas q WHERE q.team_id = u.team_id \
           AND q.gpu_class = $2) AS team_limit, \
         (SELECT CAST(COALESCE(SUM(w.units), 0) AS BIGINT) FROM workloads w \
           WHERE w.owner_id = u.id AND w.gpu_class = $2 AND w.state IN ({holds})) AS user_held, \
         (SELECT CAST(COALESCE(SUM(w.units), 0) AS BIGINT) FROM workloads w \
           JOIN users m ON m.id = w.owner_id \
           WHERE m.team_id = u.team_id AND w.gpu_class = $2 AND w.state IN ({holds})) \
           AS team_held \
         FROM users u LEFT JOIN teams t ON t.id = u.team_id WHERE u.id = $1"
    )
});

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
