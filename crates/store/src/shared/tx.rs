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

/// What a create or start asks of its class's quotas: `units` more of `class`, each counting
/// `shape` against CPU and memory limits.
#[derive(Debug, Clone, Copy)]
struct Asked<'a> {
    class: &'a str,
    units: u32,
    shape: crate::UnitShape,
}

/// A limit that a create or start would pass: what it counts, and what is held, requested and
/// allowed, in those terms.
#[derive(Debug, Clone, Copy)]
struct Over {
    measure: crate::QuotaMeasure,
    held: i64,
    requested: i64,
    limit: i64,
}

impl Asked<'_> {
    /// The first of a row's limits (units, CPUs, memory: `None` where it has none) that this
    /// would pass, the holder holding `held` units of the class now.
    fn exceeds(&self, limits: [Option<i64>; 3], held: i64) -> Option<Over> {
        use crate::QuotaMeasure::{Cpus, MemoryGib, Units};
        let per_unit = [
            (Units, 1),
            (Cpus, i64::from(self.shape.cpus)),
            (MemoryGib, i64::from(self.shape.memory_gib)),
        ];
        per_unit
            .into_iter()
            .zip(limits)
            .find_map(|((measure, per), limit)| {
                let over = Over {
                    measure,
                    held: held.saturating_mul(per),
                    requested: i64::from(self.units) * per,
                    limit: limit?,
                };
                (over.held.saturating_add(over.requested) > over.limit).then_some(over)
            })
    }

    fn refusal(&self, holder: crate::QuotaHolder, over: Over) -> StoreError {
        StoreError::QuotaExceeded {
            holder,
            class: self.class.to_owned(),
            measure: over.measure,
            held: over.held.max(0).unsigned_abs(),
            requested: over.requested.max(0).unsigned_abs(),
            limit: over.limit.max(0).unsigned_abs(),
        }
    }
}

/// A row's limits, as `Asked::exceeds` takes them, from its columns for units, CPUs and
/// memory.
fn limits_of(
    row: &<Db as sqlx::Database>::Row,
    columns: [&str; 3],
) -> Result<[Option<i64>; 3], StoreError> {
    let mut limits = [None; 3];
    for (limit, column) in limits.iter_mut().zip(columns) {
        *limit = row.try_get::<Option<i64>, _>(column)?;
    }
    Ok(limits)
}

/// Locks the tenant's quota row for the class (or its default row) and checks that what is
/// asked fits every limit of the tenant's quota, then, for a workload of `owner`, of the
/// owner's team's and the owner's own: in units, and in CPUs and memory by the class's shape.
/// Concurrent creates and starts of one tenant serialise on that row, so none of the three can
/// be overrun.
async fn check_quota(
    tx: &mut Tx<'_>,
    tenant: TenantId,
    owner: Option<einsora_core::ids::UserId>,
    asked: Asked<'_>,
) -> Result<(), StoreError> {
    let rows = sqlx::query(concat!(
        "SELECT gpu_class, limit_units, limit_cpus, limit_memory_gib FROM quotas \
         WHERE tenant_id = $1 AND gpu_class IN ($2, $3)",
        for_update!()
    ))
    .bind(tenant.as_uuid())
    .bind(asked.class)
    .bind(QuotaClass::DEFAULT_KEY)
    .fetch_all(&mut **tx)
    .await?;
    let pick = |key: &str| {
        rows.iter()
            .find(|r| r.try_get::<String, _>("gpu_class").is_ok_and(|c| c == key))
    };
    let Some(row) = pick(asked.class).or_else(|| pick(QuotaClass::DEFAULT_KEY)) else {
        // No row for the class and no default: nothing may be held.
        let none = Over {
            measure: crate::QuotaMeasure::Units,
            held: 0,
            requested: i64::from(asked.units),
            limit: 0,
        };
        return Err(asked.refusal(crate::QuotaHolder::Tenant, none));
    };
    let limits = limits_of(row, ["limit_units", "limit_cpus", "limit_memory_gib"])?;
    if limits.iter().any(Option::is_some) {
        let held: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(HELD_BY_TENANT.as_str()))
            .bind(tenant.as_uuid())
            .bind(asked.class)
            .fetch_one(&mut **tx)
            .await?;
        if let Some(over) = asked.exceeds(limits, held) {
            return Err(asked.refusal(crate::QuotaHolder::Tenant, over));
        }
    }
    let Some(owner) = owner else {
        return Ok(());
    };
    // The owner's own limits and their team's, each with what it holds now.
    let found = sqlx::query(sqlx::AssertSqlSafe(OWNER_LIMITS.as_str()))
        .bind(owner.as_uuid())
        .bind(asked.class)
        .fetch_optional(&mut **tx)
        .await?;
    let Some(found) = found else {
        return Ok(());
    };
    let user_limits = limits_of(&found, ["user_units", "user_cpus", "user_memory_gib"])?;
    if let Some(over) = asked.exceeds(user_limits, found.try_get("user_held")?) {
        let email: String = found.try_get("email")?;
        return Err(asked.refusal(crate::QuotaHolder::User(email), over));
    }
    let team_limits = limits_of(&found, ["team_units", "team_cpus", "team_memory_gib"])?;
    if let Some(over) = asked.exceeds(team_limits, found.try_get("team_held")?) {
        let team: String = found.try_get("team_name")?;
        return Err(asked.refusal(crate::QuotaHolder::Team(team), over));
    }
    Ok(())
}

/// A user's (`$1`) limits for a class (`$2`) and their team's (NULL where there is no row),
/// each with the units its workloads of that class hold now (the team's: by each workload's
/// owner's team today).
static OWNER_LIMITS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let holds = &*crate::state_sql::HOLDS_QUOTA;
    format!(
        "SELECT u.email, t.name AS team_name, \
         uq.limit_units AS user_units, uq.limit_cpus AS user_cpus, \
         uq.limit_memory_gib AS user_memory_gib, \
         tq.limit_units AS team_units, tq.limit_cpus AS team_cpus, \
         tq.limit_memory_gib AS team_memory_gib, \
         (SELECT CAST(COALESCE(SUM(w.units), 0) AS BIGINT) FROM workloads w \
           WHERE w.owner_id = u.id AND w.gpu_class = $2 AND w.state IN ({holds})) AS user_held, \
         (SELECT CAST(COALESCE(SUM(w.units), 0) AS BIGINT) FROM workloads w \
           JOIN users m ON m.id = w.owner_id \
           WHERE m.team_id = u.team_id AND w.gpu_class = $2 AND w.state IN ({holds})) \
           AS team_held \
         FROM users u LEFT JOIN teams t ON t.id = u.team_id \
         LEFT JOIN user_quotas uq ON uq.user_id = u.id AND uq.gpu_class = $2 \
         LEFT JOIN team_quotas tq ON tq.team_id = u.team_id AND tq.gpu_class = $2 \
         WHERE u.id = $1"
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
