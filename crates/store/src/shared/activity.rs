// `ActivityStore`, shared by both engines (included), and the one insert every action's
// transaction makes of its entry.

use crate::activity::{Activity, ActivityObject, ActivityPage, ActivityQuery, MAX_ACTIVITY_PAGE};

const ACTIVITY_COLUMNS: &str = "id, tenant_id, user_id, at, actor, action, object_kind, \
                                object_id, result, request_id, client_addr";

/// Writes `activity` with whatever runs on `conn` (an action's transaction, or its own).
async fn insert_activity(
    conn: &mut <Db as sqlx::Database>::Connection,
    activity: &Activity,
) -> Result<(), StoreError> {
    let (kind, id) = match &activity.object {
        Some(o) => (Some(o.kind.as_str()), Some(o.id.as_str())),
        None => (None, None),
    };
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO activity ({ACTIVITY_COLUMNS}) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
    )))
    .bind(activity.id)
    .bind(activity.tenant_id.as_uuid())
    .bind(activity.user_id.map(|u| *u.as_uuid()))
    .bind(crate::time_ms::to_ms(activity.at))
    .bind(&activity.actor)
    .bind(&activity.action)
    .bind(kind)
    .bind(id)
    .bind(&activity.result)
    .bind(&activity.request_id)
    .bind(activity.client_addr.as_deref())
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Commits an action's transaction, with the entry of the call being recorded, if one is
/// (`crate::activity::recording`): the action and its entry are kept together or not at all.
async fn commit_action(mut tx: Tx<'_>, object: Option<ActivityObject>) -> Result<(), StoreError> {
    let entry = crate::activity::action_entry(object);
    if let Some(entry) = &entry {
        insert_activity(&mut tx, entry).await?;
    }
    tx.commit().await?;
    if entry.is_some() {
        crate::activity::entry_written();
    }
    Ok(())
}

fn activity_from_row(row: &<Db as sqlx::Database>::Row) -> Result<Activity, StoreError> {
    let object = match (
        row.try_get::<Option<String>, _>("object_kind")?,
        row.try_get::<Option<String>, _>("object_id")?,
    ) {
        (Some(kind), Some(id)) => Some(ActivityObject { kind, id }),
        _ => None,
    };
    Ok(Activity {
        id: row.try_get("id")?,
        tenant_id: TenantId::from_uuid(row.try_get("tenant_id")?),
        user_id: row
            .try_get::<Option<Uuid>, _>("user_id")?
            .map(einsora_core::ids::UserId::from_uuid),
        at: from_ms(row.try_get("at")?)?,
        actor: row.try_get("actor")?,
        action: row.try_get("action")?,
        object,
        result: row.try_get("result")?,
        request_id: row.try_get("request_id")?,
        client_addr: row.try_get("client_addr")?,
    })
}

#[async_trait::async_trait]
impl crate::ActivityStore for ThisStore {
    #[tracing::instrument(level = "debug", name = "store.record_activity", skip_all)]
    async fn record_activity(&self, activity: &Activity) -> Result<(), StoreError> {
        let mut conn = self.writer().await?;
        insert_activity(&mut conn, activity).await
    }

    #[tracing::instrument(level = "debug", name = "store.activity", skip_all)]
    async fn activity(&self, query: &ActivityQuery) -> Result<ActivityPage, StoreError> {
        let limit = query.limit.clamp(1, MAX_ACTIVITY_PAGE);
        let mut q = sqlx::QueryBuilder::<Db>::new(format!(
            "SELECT {ACTIVITY_COLUMNS} FROM activity WHERE tenant_id = "
        ));
        q.push_bind(*query.tenant.as_uuid());
        if let Some(from) = query.from {
            q.push(" AND at >= ").push_bind(crate::time_ms::to_ms(from));
        }
        if let Some(to) = query.to {
            q.push(" AND at < ").push_bind(crate::time_ms::to_ms(to));
        }
        if let Some(action) = &query.action {
            q.push(" AND action = ").push_bind(action.clone());
        }
        if let Some(user) = query.user {
            q.push(" AND user_id = ").push_bind(*user.as_uuid());
        }
        if let Some(object) = &query.object_id {
            q.push(" AND object_id = ").push_bind(object.clone());
        }
        match query.ok {
            Some(true) => {
                q.push(" AND result = 'ok'");
            }
            Some(false) => {
                q.push(" AND result <> 'ok'");
            }
            None => {}
        }
        if let Some(before) = query.before {
            q.push(" AND id < ").push_bind(before);
        }
        // One more than the page, to know whether there is a next one.
        q.push(" ORDER BY id DESC LIMIT ")
            .push_bind(i64::from(limit) + 1);
        let rows = q.build().fetch_all(self.reader()).await?;
        let mut entries = rows
            .iter()
            .map(activity_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        let more = entries.len() > limit as usize;
        entries.truncate(limit as usize);
        let next = more.then(|| entries.last().map(|e| e.id)).flatten();
        Ok(ActivityPage { entries, next })
    }

    #[tracing::instrument(level = "debug", name = "store.sweep_activity", skip_all)]
    async fn sweep_activity(&self, before: time::OffsetDateTime) -> Result<u64, StoreError> {
        let cutoff = crate::time_ms::to_ms(before);
        let mut swept = 0;
        loop {
            let mut conn = self.writer().await?;
            let done = sqlx::query(
                "DELETE FROM activity WHERE id IN \
                 (SELECT id FROM activity WHERE at < $1 LIMIT $2)",
            )
            .bind(cutoff)
            .bind(DROP_PAGE)
            .execute(&mut *conn)
            .await?
            .rows_affected();
            swept += done;
            if done < DROP_PAGE.unsigned_abs() {
                return Ok(swept);
            }
        }
    }
}
