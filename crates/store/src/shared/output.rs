// `OutputStore`, shared by both engines (included).

use crate::output::{
    MAX_PAGE_LINES, OutputBatch, OutputCaps, OutputHead, OutputLine, OutputPage, OutputQuery,
};

const HEAD_COLUMNS: &str = "workload_id, attempt, source_offset, next_seq, bytes, dropped_lines";
const LINE_COLUMNS: &str = "seq, attempt, stream, printed_at, text, dropped_before";
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

/// Which lines a cap drops from: oldest first.
enum Scope {
    Workload(WorkloadId),
    Tenant(TenantId),
    All,
}

/// Drops the oldest lines of `scope` until at least `over` bytes are gone, counting them as
/// dropped in their workloads' heads.
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
        if rows.is_empty() {
            return Ok(());
        }
        let mut chosen = Vec::new();
        for row in &rows {
            let bytes = to_u64("output bytes", row.try_get("bytes")?)?;
            chosen.push((
                row.try_get::<Uuid, _>("workload_id")?,
                row.try_get::<i64, _>("seq")?,
                bytes,
            ));
            over = over.saturating_sub(bytes.max(1));
            if over == 0 {
                break;
            }
        }
        drop_lines(tx, &chosen).await?;
    }
    Ok(())
}

/// Deletes these lines (workload, seq, bytes) and counts them in their heads.
async fn drop_lines(tx: &mut Tx<'_>, lines: &[(Uuid, i64, u64)]) -> Result<(), StoreError> {
    let mut by_workload: BTreeMap<Uuid, (Vec<i64>, u64)> = BTreeMap::new();
    for (workload, seq, bytes) in lines {
        let entry = by_workload.entry(*workload).or_default();
        entry.0.push(*seq);
        entry.1 += bytes;
    }
    for (workload, (seqs, bytes)) in by_workload {
        let mut q =
            sqlx::QueryBuilder::<Db>::new("DELETE FROM workload_output WHERE workload_id = ");
        q.push_bind(workload).push(" AND seq IN (");
        let mut list = q.separated(", ");
        for seq in &seqs {
            list.push_bind(*seq);
        }
        q.push(")");
        q.build().execute(&mut **tx).await?;
        sqlx::query(
            "UPDATE workload_output_heads SET bytes = bytes - $2, \
             dropped_lines = dropped_lines + $3 WHERE workload_id = $1",
        )
        .bind(workload)
        .bind(to_i64(bytes))
        .bind(to_i64(seqs.len() as u64))
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

async fn bytes_held(tx: &mut Tx<'_>, tenant: Option<TenantId>) -> Result<u64, StoreError> {
    let held: Option<i64> =
        match tenant {
            Some(t) => sqlx::query_scalar(
                "SELECT CAST(SUM(bytes) AS BIGINT) FROM workload_output_heads WHERE tenant_id = $1",
            )
            .bind(*t.as_uuid())
            .fetch_one(&mut **tx)
            .await?,
            None => {
                sqlx::query_scalar("SELECT CAST(SUM(bytes) AS BIGINT) FROM workload_output_heads")
                    .fetch_one(&mut **tx)
                    .await?
            }
        };
    to_u64("output bytes", held.unwrap_or(0))
}

#[async_trait::async_trait]
impl crate::OutputStore for ThisStore {
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
        let head = output_head(&mut tx, batch.workload_id).await?;
        let stored_up_to = match &head {
            // An older attempt's lines come too late.
            Some(h) if batch.attempt < h.attempt => return Ok(h.clone()),
            Some(h) if batch.attempt == h.attempt => h.offset,
            _ => 0,
        };
        if let Some(h) = &head
            && h.attempt == batch.attempt
            && batch.to <= h.offset
        {
            return Ok(h.clone());
        }
        let workload = *batch.workload_id.as_uuid();
        let mut seq = head.as_ref().map_or(1, |h| h.next_seq);
        let received = crate::time_ms::to_ms(batch.received_at);
        let mut added = 0_u64;
        for line in batch.lines.iter().filter(|l| l.end > stored_up_to) {
            let bytes = line.text.len() as u64;
            sqlx::query(
                "INSERT INTO workload_output (workload_id, seq, tenant_id, attempt, stream, \
                 printed_at, received_at, text, bytes, dropped_before) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
            )
            .bind(workload)
            .bind(to_i64(seq))
            .bind(*batch.tenant_id.as_uuid())
            .bind(i64::from(batch.attempt))
            .bind(line.stream.as_str())
            .bind(crate::time_ms::to_ms(line.printed_at))
            .bind(received)
            .bind(&line.text)
            .bind(to_i64(bytes))
            .bind(to_i64(line.dropped_before))
            .execute(&mut *tx)
            .await?;
            seq += 1;
            added += bytes;
        }
        sqlx::query(
            "INSERT INTO workload_output_heads (workload_id, tenant_id, next_seq, attempt, \
             source_offset, bytes, dropped_lines) VALUES ($1, $2, $3, $4, $5, $6, 0) \
             ON CONFLICT (workload_id) DO UPDATE SET next_seq = excluded.next_seq, \
             attempt = excluded.attempt, source_offset = excluded.source_offset, \
             bytes = workload_output_heads.bytes + excluded.bytes",
        )
        .bind(workload)
        .bind(*batch.tenant_id.as_uuid())
        .bind(to_i64(seq))
        .bind(i64::from(batch.attempt))
        .bind(to_i64(batch.to))
        .bind(to_i64(added))
        .execute(&mut *tx)
        .await?;
        let held = head.as_ref().map_or(0, |h| h.bytes) + added;
        if held > caps.per_workload {
            drop_oldest(
                &mut tx,
                Scope::Workload(batch.workload_id),
                held - caps.per_workload,
            )
            .await?;
        }
        let tenant = bytes_held(&mut tx, Some(batch.tenant_id)).await?;
        if tenant > caps.per_tenant {
            drop_oldest(
                &mut tx,
                Scope::Tenant(batch.tenant_id),
                tenant - caps.per_tenant,
            )
            .await?;
        }
        let total = bytes_held(&mut tx, None).await?;
        if total > caps.total {
            drop_oldest(&mut tx, Scope::All, total - caps.total).await?;
        }
        let head = output_head(&mut tx, batch.workload_id)
            .await?
            .ok_or_else(|| StoreError::corrupt("output head", "missing after a write"))?;
        tx.commit().await?;
        Ok(head)
    }

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
        let rows = match (query.after, query.tail) {
            (Some(after), _) => {
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT {LINE_COLUMNS} FROM workload_output WHERE workload_id = $1 \
                     AND seq > $2 ORDER BY seq LIMIT $3"
                )))
                .bind(id)
                .bind(to_i64(after))
                .bind(limit)
                .fetch_all(self.reader())
                .await?
            }
            (None, Some(tail)) => {
                let mut rows = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT {LINE_COLUMNS} FROM workload_output WHERE workload_id = $1 \
                     ORDER BY seq DESC LIMIT $2"
                )))
                .bind(id)
                .bind(limit.min(i64::from(tail)))
                .fetch_all(self.reader())
                .await?;
                rows.reverse();
                rows
            }
            (None, None) => {
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT {LINE_COLUMNS} FROM workload_output WHERE workload_id = $1 \
                     ORDER BY seq LIMIT $2"
                )))
                .bind(id)
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

    async fn sweep_output(&self, before: time::OffsetDateTime) -> Result<u64, StoreError> {
        let cutoff = crate::time_ms::to_ms(before);
        let mut dropped = 0;
        loop {
            // A page per transaction: a long sweep never holds the writer for long.
            let mut conn = self.writer().await?;
            let mut tx = begin_write(&mut conn).await?;
            let rows = sqlx::query(
                "SELECT workload_id, seq, bytes FROM workload_output WHERE received_at < $1 \
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
                    to_u64("output bytes", row.try_get("bytes")?)?,
                ));
            }
            drop_lines(&mut tx, &lines).await?;
            tx.commit().await?;
            dropped += lines.len() as u64;
        }
    }
}
