// `OutputStore`, shared by both engines (included).

use crate::output::{
    MAX_PAGE_LINES, OutputBatch, OutputCaps, OutputHead, OutputLine, OutputPage, OutputQuery,
};

const HEAD_COLUMNS: &str = "workload_id, attempt, source_offset, next_seq, bytes, dropped_lines";
const LINE_COLUMNS: &str = "seq, attempt, stream, printed_at, text, dropped_before, gap_before";
/// How many lines one statement drops when a cap or the sweep drops many.
const DROP_PAGE: i64 = 256;

fn to_u64(what: &'static str, n: i64) -> Result<u64, StoreError> {
    u64::try_from(n).map_err(|_| StoreError::corrupt(what, n))
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn head_from_row(row: &<Db as sqlx::Database>::Row) -> Result<OutputHead, StoreError> {
    Ok(OutputHead {
        workload_id: WorkloadId::from_uuid(row.try_get("workload_id")?),
        attempt: to_u32("attempt", row.try_get("attempt")?)?,
        offset: to_u64("source offset", row.try_get("source_offset")?)?,
        next_seq: to_u64("next line", row.try_get("next_seq")?)?,
        bytes: to_u64("output bytes", row.try_get("bytes")?)?,
        dropped_lines: to_u64("dropped lines", row.try_get("dropped_lines")?)?,
    })
}

fn line_from_row(row: &<Db as sqlx::Database>::Row) -> Result<OutputLine, StoreError> {
    Ok(OutputLine {
        seq: to_u64("line number", row.try_get("seq")?)?,
        attempt: to_u32("attempt", row.try_get("attempt")?)?,
        stream: parse_word("output stream", &row.try_get::<String, _>("stream")?)?,
        printed_at: from_ms(row.try_get("printed_at")?)?,
        text: row.try_get("text")?,
        dropped_before: to_u64("dropped lines", row.try_get("dropped_before")?)?,
        gap_before: row.try_get("gap_before")?,
    })
}

async fn output_head(
    tx: &mut Tx<'_>,
    workload: WorkloadId,
) -> Result<Option<OutputHead>, StoreError> {
    let row = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {HEAD_COLUMNS} FROM workload_output_heads WHERE workload_id = $1{}",
        for_update!()
    )))
    .bind(*workload.as_uuid())
    .fetch_optional(&mut **tx)
    .await?;
    row.as_ref().map(head_from_row).transpose()
}

/// Lines one INSERT writes: ten parameters each, well within either engine's limit.
const ROWS_PER_INSERT: usize = 200;

/// What a line costs the caps beyond its text: a row's own overhead, so empty lines count too.
const ROW_OVERHEAD: u64 = 64;

/// The totals row of the whole store (the nil tenant's).
const ALL: Uuid = Uuid::nil();

/// Which lines a cap drops from: oldest first.
enum Scope {
    Workload(WorkloadId),
    Tenant(TenantId),
    All,
}

/// Drops the oldest lines of `scope` until at least `over` of what the caps count is gone.
async fn drop_oldest(tx: &mut Tx<'_>, scope: Scope, mut over: u64) -> Result<(), StoreError> {
    while over > 0 {
        let (filter, order) = match &scope {
            Scope::Workload(_) => ("WHERE workload_id = $1", "seq"),
            Scope::Tenant(_) => ("WHERE tenant_id = $1", "received_at, seq"),
            Scope::All => ("", "received_at, seq"),
        };
        let limit = if filter.is_empty() { "$1" } else { "$2" };
        let sql = format!(
            "SELECT workload_id, seq, bytes FROM workload_output {filter} ORDER BY {order} \
             LIMIT {limit}"
        );
        let query = sqlx::query(sqlx::AssertSqlSafe(sql));
        let query = match &scope {
            Scope::Workload(w) => query.bind(*w.as_uuid()),
            Scope::Tenant(t) => query.bind(*t.as_uuid()),
            Scope::All => query,
        };
        let rows = query.bind(DROP_PAGE).fetch_all(&mut **tx).await?;
        let mut chosen = Vec::new();
        let mut covered = 0;
        for row in &rows {
            chosen.push((
                row.try_get::<Uuid, _>("workload_id")?,
                row.try_get::<i64, _>("seq")?,
            ));
            covered += to_u64("output bytes", row.try_get("bytes")?)?;
            if covered >= over {
                break;
            }
        }
        let (_, freed) = drop_lines(tx, &chosen).await?;
        if freed == 0 {
            return Ok(());
        }
        over = over.saturating_sub(freed);
    }
    Ok(())
}

/// Deletes these lines (workload, seq) and takes what was deleted off its workloads' heads and
/// the totals (only what this transaction deleted: another may have deleted some first); how
/// many lines it deleted, and what they cost the caps.
async fn drop_lines(tx: &mut Tx<'_>, lines: &[(Uuid, i64)]) -> Result<(u64, u64), StoreError> {
    let mut by_workload: BTreeMap<Uuid, Vec<i64>> = BTreeMap::new();
    for (workload, seq) in lines {
        by_workload.entry(*workload).or_default().push(*seq);
    }
    let (mut freed, mut count) = (0, 0);
    let mut by_tenant: BTreeMap<Uuid, u64> = BTreeMap::new();
    for (workload, seqs) in by_workload {
        let mut q =
            sqlx::QueryBuilder::<Db>::new("DELETE FROM workload_output WHERE workload_id = ");
        q.push_bind(workload).push(" AND seq IN (");
        let mut list = q.separated(", ");
        for seq in &seqs {
            list.push_bind(*seq);
        }
        q.push(") RETURNING tenant_id, bytes");
        let deleted = q.build().fetch_all(&mut **tx).await?;
        if deleted.is_empty() {
            continue;
        }
        let mut bytes = 0;
        for row in &deleted {
            let cost = to_u64("output bytes", row.try_get("bytes")?)?;
            bytes += cost;
            *by_tenant
                .entry(row.try_get::<Uuid, _>("tenant_id")?)
                .or_default() += cost;
        }
        sqlx::query(
            "UPDATE workload_output_heads SET bytes = bytes - $2, \
             dropped_lines = dropped_lines + $3 WHERE workload_id = $1",
        )
        .bind(workload)
        .bind(to_i64(bytes))
        .bind(to_i64(deleted.len() as u64))
        .execute(&mut **tx)
        .await?;
        freed += bytes;
        count += deleted.len() as u64;
    }
    for (tenant, bytes) in by_tenant.into_iter().chain([(ALL, freed)]) {
        add_to_total(tx, tenant, -to_i64(bytes)).await?;
    }
    Ok((count, freed))
}

/// Adds `bytes` (negative: takes them off) to a totals row, making it if it is missing.
async fn add_to_total(tx: &mut Tx<'_>, tenant: Uuid, bytes: i64) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO workload_output_totals (tenant_id, bytes) VALUES ($1, $2) \
         ON CONFLICT (tenant_id) DO UPDATE SET bytes = workload_output_totals.bytes + excluded.bytes",
    )
    .bind(tenant)
    .bind(bytes)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// What a totals row holds (nothing if it has none).
async fn total(tx: &mut Tx<'_>, tenant: Uuid) -> Result<u64, StoreError> {
    let held: Option<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT bytes FROM workload_output_totals WHERE tenant_id = $1{}",
        for_update!()
    )))
    .bind(tenant)
    .fetch_optional(&mut **tx)
    .await?;
    to_u64("output bytes", held.unwrap_or(0))
}

#[async_trait::async_trait]
impl crate::OutputStore for ThisStore {
    #[tracing::instrument(level = "debug", name = "store.append_output", skip_all)]
    async fn append_output(
        &self,
        batch: &OutputBatch,
        caps: &OutputCaps,
    ) -> Result<OutputHead, StoreError> {
        let mut end = 0;
        for line in &batch.lines {
            if line.end < end || line.end > batch.to {
                return Err(StoreError::InvalidInput(
                    "an output batch's lines end in order, within it".into(),
                ));
            }
            end = line.end;
        }
        let mut conn = self.writer().await?;
        let mut tx = begin_write(&mut conn).await?;
        // The whole store's row first: appends take their locks in one order.
        add_to_total(&mut tx, ALL, 0).await?;
        total(&mut tx, ALL).await?;
        let head = output_head(&mut tx, batch.workload_id).await?;
        // Offsets grow across a workload's attempts: what ends at or before the head is stored.
        let stored_up_to = match &head {
            // An older attempt's lines come too late.
            Some(h) if batch.attempt < h.attempt => return Ok(h.clone()),
            Some(h) if batch.attempt == h.attempt && batch.to <= h.offset => return Ok(h.clone()),
            Some(h) => h.offset,
            None => 0,
        };
        let workload = *batch.workload_id.as_uuid();
        let tenant = *batch.tenant_id.as_uuid();
        let first_seq = head.as_ref().map_or(1, |h| h.next_seq);
        let received = crate::time_ms::to_ms(batch.received_at);
        let new: Vec<_> = batch
            .lines
            .iter()
            .filter(|l| l.end > stored_up_to)
            .collect();
        let cost = |line: &einsora_core::output::PrintedLine| line.text.len() as u64 + ROW_OVERHEAD;
        let added: u64 = new.iter().map(|l| cost(l)).sum();
        // Many rows a statement: a batch is one round trip per [`ROWS_PER_INSERT`] lines.
        for (chunk_at, chunk) in new.chunks(ROWS_PER_INSERT).enumerate() {
            let mut insert = sqlx::QueryBuilder::<Db>::new(
                "INSERT INTO workload_output (workload_id, seq, tenant_id, attempt, stream, \
                 printed_at, received_at, text, bytes, dropped_before, gap_before) ",
            );
            let base = first_seq + (chunk_at * ROWS_PER_INSERT) as u64;
            insert.push_values(chunk.iter().enumerate(), |mut row, (i, line)| {
                row.push_bind(workload)
                    .push_bind(to_i64(base + i as u64))
                    .push_bind(tenant)
                    .push_bind(i64::from(batch.attempt))
                    .push_bind(line.stream.as_str())
                    .push_bind(crate::time_ms::to_ms(line.printed_at))
                    .push_bind(received)
                    .push_bind(line.text.as_str())
                    .push_bind(to_i64(cost(line)))
                    .push_bind(to_i64(line.dropped_before))
                    .push_bind(line.gap_before);
            });
            insert.build().execute(&mut *tx).await?;
        }
        let seq = first_seq + new.len() as u64;
        sqlx::query(
            "INSERT INTO workload_output_heads (workload_id, tenant_id, next_seq, attempt, \
             source_offset, bytes, dropped_lines) VALUES ($1, $2, $3, $4, $5, $6, 0) \
             ON CONFLICT (workload_id) DO UPDATE SET next_seq = excluded.next_seq, \
             attempt = excluded.attempt, source_offset = excluded.source_offset, \
             bytes = workload_output_heads.bytes + excluded.bytes",
        )
        .bind(workload)
        .bind(tenant)
        .bind(to_i64(seq))
        .bind(i64::from(batch.attempt))
        .bind(to_i64(batch.to.max(stored_up_to)))
        .bind(to_i64(added))
        .execute(&mut *tx)
        .await?;
        for row in [tenant, ALL] {
            add_to_total(&mut tx, row, to_i64(added)).await?;
        }
        let held = head.as_ref().map_or(0, |h| h.bytes) + added;
        if held > caps.per_workload {
            drop_oldest(
                &mut tx,
                Scope::Workload(batch.workload_id),
                held - caps.per_workload,
            )
            .await?;
        }
        let of_tenant = total(&mut tx, tenant).await?;
        if of_tenant > caps.per_tenant {
            drop_oldest(
                &mut tx,
                Scope::Tenant(batch.tenant_id),
                of_tenant - caps.per_tenant,
            )
            .await?;
        }
        let of_all = total(&mut tx, ALL).await?;
        if of_all > caps.total {
            drop_oldest(&mut tx, Scope::All, of_all - caps.total).await?;
        }
        let head = output_head(&mut tx, batch.workload_id)
            .await?
            .ok_or_else(|| StoreError::corrupt("output head", "missing after a write"))?;
        tx.commit().await?;
        Ok(head)
    }

    #[tracing::instrument(level = "debug", name = "store.output_heads", skip_all)]
    async fn output_heads(&self, workloads: &[WorkloadId]) -> Result<Vec<OutputHead>, StoreError> {
        let mut heads = Vec::new();
        for chunk in workloads.chunks(IDS_PER_QUERY) {
            let mut q = sqlx::QueryBuilder::<Db>::new(format!(
                "SELECT {HEAD_COLUMNS} FROM workload_output_heads WHERE workload_id IN ("
            ));
            push_ids(&mut q, chunk);
            q.push(") ORDER BY workload_id");
            for row in q.build().fetch_all(self.reader()).await? {
                heads.push(head_from_row(&row)?);
            }
        }
        Ok(heads)
    }

    #[tracing::instrument(level = "debug", name = "store.read_output", skip_all)]
    async fn read_output(
        &self,
        workload: WorkloadId,
        query: &OutputQuery,
    ) -> Result<OutputPage, StoreError> {
        let head = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {HEAD_COLUMNS} FROM workload_output_heads WHERE workload_id = $1"
        )))
        .bind(*workload.as_uuid())
        .fetch_optional(self.reader())
        .await?;
        let Some(head) = head.as_ref().map(head_from_row).transpose()? else {
            return Ok(OutputPage {
                next_seq: 1,
                ..OutputPage::default()
            });
        };
        let limit = i64::from(query.limit.clamp(1, MAX_PAGE_LINES));
        let id = *workload.as_uuid();
        // A line printed before `since` doesn't count: with no `since`, every line does.
        let since = query.since.map_or(i64::MIN, crate::time_ms::to_ms);
        let rows = match (query.after, query.tail) {
            (Some(after), _) => {
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT {LINE_COLUMNS} FROM workload_output WHERE workload_id = $1 \
                     AND seq > $2 AND printed_at >= $3 ORDER BY seq LIMIT $4"
                )))
                .bind(id)
                .bind(to_i64(after))
                .bind(since)
                .bind(limit)
                .fetch_all(self.reader())
                .await?
            }
            (None, Some(tail)) => {
                let mut rows = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT {LINE_COLUMNS} FROM workload_output WHERE workload_id = $1 \
                     AND printed_at >= $2 ORDER BY seq DESC LIMIT $3"
                )))
                .bind(id)
                .bind(since)
                .bind(limit.min(i64::from(tail)))
                .fetch_all(self.reader())
                .await?;
                rows.reverse();
                rows
            }
            (None, None) => {
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT {LINE_COLUMNS} FROM workload_output WHERE workload_id = $1 \
                     AND printed_at >= $2 ORDER BY seq LIMIT $3"
                )))
                .bind(id)
                .bind(since)
                .bind(limit)
                .fetch_all(self.reader())
                .await?
            }
        };
        Ok(OutputPage {
            lines: rows.iter().map(line_from_row).collect::<Result<_, _>>()?,
            dropped_lines: head.dropped_lines,
            next_seq: head.next_seq,
        })
    }

    #[tracing::instrument(level = "debug", name = "store.sweep_output", skip_all)]
    async fn sweep_output(&self, before: time::OffsetDateTime) -> Result<u64, StoreError> {
        let cutoff = crate::time_ms::to_ms(before);
        let mut dropped = 0;
        loop {
            // A page per transaction: a long sweep never holds the writer for long.
            let mut conn = self.writer().await?;
            let mut tx = begin_write(&mut conn).await?;
            let rows = sqlx::query(
                "SELECT workload_id, seq FROM workload_output WHERE received_at < $1 \
                 ORDER BY received_at, seq LIMIT $2",
            )
            .bind(cutoff)
            .bind(DROP_PAGE)
            .fetch_all(&mut *tx)
            .await?;
            if rows.is_empty() {
                return Ok(dropped);
            }
            let mut lines = Vec::with_capacity(rows.len());
            for row in &rows {
                lines.push((
                    row.try_get::<Uuid, _>("workload_id")?,
                    row.try_get::<i64, _>("seq")?,
                ));
            }
            let (count, _) = drop_lines(&mut tx, &lines).await?;
            tx.commit().await?;
            dropped += count;
        }
    }
}
