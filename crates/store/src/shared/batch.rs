// Many steps in one statement, shared by both engines (included): `Store::transitions` writes
// a group of steps (same kind, same fence) as one `UPDATE … FROM (VALUES …)`, each row still
// compare-and-swapped on its own version and state, the trigger appending each event.

/// Rows per statement: far below either engine's limit on parameters (10 per row).
const ROWS_PER_STATEMENT: usize = 512;

/// Applies `group` (all admissions or none, all under `fence`) and returns the workloads whose
/// row changed.
async fn apply_group(
    conn: &mut <Db as sqlx::Database>::Connection,
    group: &[&Transition<'_>],
    admissions: bool,
    fence: Option<&Lease>,
    now: i64,
) -> Result<std::collections::HashSet<Uuid>, StoreError> {
    let mut changed = std::collections::HashSet::with_capacity(group.len());
    let devices: Vec<String> = group
        .iter()
        .map(|c| {
            c.admission
                .map_or(Ok(String::new()), |a| devices_json(&a.devices))
        })
        .collect::<Result<_, _>>()?;
    for (rows, devices) in group
        .chunks(ROWS_PER_STATEMENT)
        .zip(devices.chunks(ROWS_PER_STATEMENT))
    {
        let mut devices = devices.iter();
        let mut q = sqlx::QueryBuilder::<Db>::new(
            "UPDATE workloads SET state = v.column4, reason = v.column5, \
             version = workloads.version + 1, updated_at = ",
        );
        q.push_bind(now);
        if admissions {
            q.push(
                ", placed_class = v.column6, machine_id = v.column7, driver = v.column8, \
                 attempt = v.column9, devices = v.column10",
            );
        }
        q.push(" FROM (");
        q.push_values(rows, |mut row, change| {
            let w = change.workload;
            row.push_bind(*w.id.as_uuid())
                .push_bind(w.version)
                .push_bind(w.state.as_str())
                .push_bind(change.to.as_str())
                .push_bind(change.reason.text());
            if let Some(a) = change.admission {
                row.push_bind(a.placed_class.clone())
                    .push_bind(a.machine_id.map(|m| *m.as_uuid()))
                    .push_bind(a.driver.clone())
                    .push_bind(i64::from(w.attempt.next().get()))
                    .push_bind(devices.next().cloned().unwrap_or_default());
            }
        });
        q.push(
            ") AS v WHERE workloads.id = v.column1 AND workloads.version = v.column2 \
             AND workloads.state = v.column3",
        );
        if let Some(lease) = fence {
            q.push(" AND EXISTS (SELECT 1 FROM leases WHERE name = ")
                .push_bind(lease.name.clone())
                .push(" AND holder = ")
                .push_bind(lease.holder.clone())
                .push(" AND epoch = ")
                .push_bind(lease.epoch)
                .push(" AND expires_at > ")
                .push_bind(now)
                .push(concat!(for_share!(), ")"));
        }
        q.push(" RETURNING workloads.id");
        let ids: Vec<Uuid> = q.build_query_scalar().fetch_all(&mut *conn).await?;
        changed.extend(ids);
    }
    Ok(changed)
}

/// Steps of a batch written by one statement: all admissions or none, all under one fence.
struct Group<'b, 'a> {
    admissions: bool,
    fence: Option<&'b Lease>,
    members: Vec<&'b Transition<'a>>,
}

/// The eligible steps of a batch grouped by kind and fence, in first-seen order.
fn groups<'b, 'a>(
    changes: &'b [Transition<'a>],
    eligible: impl Iterator<Item = usize>,
) -> Vec<Group<'b, 'a>> {
    let mut groups: Vec<Group<'b, 'a>> = Vec::new();
    for i in eligible {
        let change = &changes[i];
        let admissions = change.admission.is_some();
        let same = |g: &&mut Group<'b, 'a>| g.admissions == admissions && g.fence == change.fence;
        match groups.iter_mut().find(same) {
            Some(group) => group.members.push(change),
            None => groups.push(Group {
                admissions,
                fence: change.fence,
                members: vec![change],
            }),
        }
    }
    groups
}
