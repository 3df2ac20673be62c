// Notebooks' one-time access tickets, shared by both engines (included by accounts.rs).

async fn insert_ticket(store: &ThisStore, t: &NewTicket) -> Result<(), StoreError> {
    let now = now_ms();
    let mut conn = store.writer().await?;
    let mut tx = begin_write(&mut conn).await?;
    // An expired ticket can't be redeemed any more: nothing is lost by forgetting it.
    sqlx::query("DELETE FROM access_tickets WHERE expires_at <= $1")
        .bind(now)
        .execute(&mut *tx)
        .await?;
    let (session, token) = match &t.granted_by {
        Grant::Session(hash) => (Some(&hash[..]), None),
        Grant::Token(id) => (None, Some(id.as_uuid())),
    };
    sqlx::query(
        "INSERT INTO access_tickets (ticket_hash, workload_id, tenant_id, user_id, created_at, \
         expires_at, granted_session, granted_token) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(&t.ticket_hash[..])
    .bind(t.workload_id.as_uuid())
    .bind(t.tenant_id.as_uuid())
    .bind(t.user_id.as_uuid())
    .bind(now)
    .bind(to_ms(t.expires_at))
    .bind(session)
    .bind(token)
    .execute(&mut *tx)
    .await?;
    commit_action(tx, Some(ActivityObject::of(t.workload_id))).await
}

async fn take_ticket(
    store: &ThisStore,
    ticket_hash: &SecretHash,
    workload: WorkloadId,
) -> Result<Option<RedeemedTicket>, StoreError> {
    // One statement: of any number of concurrent redeemers, exactly one sees the row.
    let taken = sqlx::query(
        "UPDATE access_tickets SET used_at = $1 WHERE ticket_hash = $2 AND workload_id = $3 \
         AND used_at IS NULL AND expires_at > $1 RETURNING user_id, granted_session, granted_token",
    )
    .bind(now_ms())
    .bind(&ticket_hash[..])
    .bind(workload.as_uuid())
    .fetch_optional(&mut *store.writer().await?)
    .await?;
    let Some(taken) = taken else {
        return Ok(None);
    };
    let user: Uuid = taken.try_get("user_id")?;
    let session: Option<Vec<u8>> = taken.try_get("granted_session")?;
    let token: Option<Uuid> = taken.try_get("granted_token")?;
    let granted_by = match (session, token) {
        (Some(hash), None) => Grant::Session(hash_from("granted session", hash)?),
        (None, Some(id)) => Grant::Token(TokenId::from_uuid(id)),
        // A ticket from before grants were kept: no credential to live as long as.
        _ => return Ok(None),
    };
    let row = sqlx::query(sqlx::AssertSqlSafe(USER_BY_ID.as_str()))
        .bind(user)
        .fetch_one(store.reader())
        .await?;
    Ok(Some(RedeemedTicket {
        workload_id: workload,
        user: user_from_row(&row)?,
        granted_by,
    }))
}

async fn live_grants(store: &ThisStore, grants: &[Grant]) -> Result<Vec<bool>, StoreError> {
    let now = now_ms();
    let mut live = Vec::with_capacity(grants.len());
    for grant in grants {
        let found: Option<i32> = match grant {
            Grant::Session(hash) => {
                sqlx::query_scalar("SELECT 1 FROM sessions WHERE id_hash = $1 AND expires_at > $2")
                    .bind(&hash[..])
                    .bind(now)
                    .fetch_optional(store.reader())
                    .await?
            }
            Grant::Token(id) => {
                sqlx::query_scalar(
                    "SELECT 1 FROM api_tokens WHERE id = $1 AND revoked_at IS NULL \
                     AND (expires_at IS NULL OR expires_at > $2)",
                )
                .bind(id.as_uuid())
                .bind(now)
                .fetch_optional(store.reader())
                .await?
            }
        };
        live.push(found.is_some());
    }
    Ok(live)
}
