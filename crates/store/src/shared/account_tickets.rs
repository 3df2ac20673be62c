// Notebooks' one-time access tickets, shared by both engines (included by accounts.rs).

async fn insert_ticket(store: &ThisStore, t: &NewTicket) -> Result<(), StoreError> {
    let now = now_ms();
    let mut conn = store.writer().await?;
    // An expired ticket can't be redeemed any more: nothing is lost by forgetting it.
    sqlx::query("DELETE FROM access_tickets WHERE expires_at <= $1")
        .bind(now)
        .execute(&mut *conn)
        .await?;
    sqlx::query(
        "INSERT INTO access_tickets (ticket_hash, workload_id, tenant_id, user_id, created_at, \
         expires_at) VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(&t.ticket_hash[..])
    .bind(t.workload_id.as_uuid())
    .bind(t.tenant_id.as_uuid())
    .bind(t.user_id.as_uuid())
    .bind(now)
    .bind(to_ms(t.expires_at))
    .execute(&mut *conn)
    .await?;
    Ok(())
}

async fn take_ticket(
    store: &ThisStore,
    ticket_hash: &SecretHash,
    workload: WorkloadId,
) -> Result<Option<RedeemedTicket>, StoreError> {
    // One statement: of any number of concurrent redeemers, exactly one sees the row.
    let user: Option<Uuid> = sqlx::query_scalar(
        "UPDATE access_tickets SET used_at = $1 WHERE ticket_hash = $2 AND workload_id = $3 \
         AND used_at IS NULL AND expires_at > $1 RETURNING user_id",
    )
    .bind(now_ms())
    .bind(&ticket_hash[..])
    .bind(workload.as_uuid())
    .fetch_optional(&mut *store.writer().await?)
    .await?;
    let Some(user) = user else {
        return Ok(None);
    };
    let row = sqlx::query(sqlx::AssertSqlSafe(USER_BY_ID.as_str()))
        .bind(user)
        .fetch_one(store.reader())
        .await?;
    Ok(Some(RedeemedTicket {
        workload_id: workload,
        user: user_from_row(&row)?,
    }))
}
