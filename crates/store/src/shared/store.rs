// The `Store` implementation, shared by both engines (included).

/// A plain step: `$1` state, `$2` reason, `$3` now; compare-and-swap on `$4` id, `$5` version,
/// `$6` state. The `workload_changed` trigger appends the event.
macro_rules! plain_update {
    () => {
        "UPDATE workloads SET state = $1, reason = $2, version = version + 1, updated_at = $3 \
         WHERE id = $4 AND version = $5 AND state = $6"
    };
}

/// Admission: a plain step that also records the placement (`$7` placed class, `$8` machine,
/// `$9` driver) and the new attempt (`$10`).
macro_rules! admit_update {
    () => {
        "UPDATE workloads SET state = $1, reason = $2, version = version + 1, updated_at = $3, \
         placed_class = $7, machine_id = $8, driver = $9, attempt = $10, devices = $11 \
         WHERE id = $4 AND version = $5 AND state = $6"
    };
}

/// A note (from = to): `$1` reason, `$2` now, for workload `$3` still at version `$4`.
/// Not when the timeline's latest row is the same note: a restarted controller noting an
/// ongoing condition again adds nothing.
macro_rules! note_insert {
    () => {
        "INSERT INTO workload_events (workload_id, tenant_id, from_state, to_state, reason, \
         attempt, at) SELECT id, tenant_id, state, state, $1, attempt, $2 FROM workloads \
         WHERE id = $3 AND version = $4 AND NOT EXISTS (SELECT 1 FROM workload_events e \
         WHERE e.workload_id = workloads.id AND e.from_state = e.to_state AND e.reason = $1 \
         AND e.seq = (SELECT MAX(seq) FROM workload_events m WHERE m.workload_id = workloads.id))"
    };
}

#[async_trait::async_trait]
impl crate::Store for ThisStore {
    #[tracing::instrument(level = "debug", name = "store.migrate", skip_all)]
    async fn migrate(&self) -> Result<MigrationReport, StoreError> {
        let before = self.applied_version().await?;
        migrations::check_not_newer(MIGRATOR, before)?;
        let mut conn = self.writer().await?;
        // `run_direct` is `run` on a connection we already hold.
        MIGRATOR
            .run_direct(None, &mut *conn, false)
            .await
            .map_err(|e| migrations::map_error(MIGRATOR, e))?;
        let after = self.applied_version().await?;
        Ok(migrations::report(before, after))
    }

    #[tracing::instrument(level = "debug", name = "store.ping", skip_all)]
    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(self.reader()).await?;
        Ok(())
    }

    fn changes(&self) -> ChangeSignal {
        self.changes.subscribe()
    }

    #[tracing::instrument(level = "debug", name = "store.create_tenant", skip_all)]
    async fn create_tenant(&self, tenant: &NewTenant) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO tenants (id, slug, name, trusted, created_at) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(tenant.id.as_uuid())
        .bind(&tenant.slug)
        .bind(&tenant.name)
        .bind(i32::from(tenant.trusted))
        .bind(now_ms())
        .execute(&mut *self.writer().await?)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", name = "store.set_quota", skip_all)]
    async fn set_quota(
        &self,
        tenant: TenantId,
        class: &QuotaClass,
        limit: Option<u32>,
    ) -> Result<(), StoreError> {
        let limits = crate::QuotaLimits::units(limit);
        crate::TeamStore::set_quota_of(self, tenant, crate::QuotaSubject::Tenant, class, limits)
            .await
    }

    #[tracing::instrument(level = "debug", name = "store.create_workload", skip_all)]
    async fn create_workload(
        &self,
        new: &NewWorkload,
        reason: &Reason,
    ) -> Result<Workload, StoreError> {
        if new.units == 0 {
            return Err(StoreError::InvalidInput(
                "a workload needs at least one unit".into(),
            ));
        }
        let fallback = serde_json::to_string(&new.fallback)
            .map_err(|e| StoreError::InvalidInput(format!("fallback list: {e}")))?;
        let reason = reason.text();
        let mut conn = self.writer().await?;
        let mut tx = begin_write(&mut conn).await?;
        let asked = Asked {
            class: &new.gpu_class,
            units: new.units,
            shape: new.shape,
        };
        check_quota(&mut tx, new.tenant_id, new.owner, asked).await?;
        // Read once the quota row is ours: a timeline's times follow the order of commits.
        let now = now_ms();
        sqlx::query(
            "INSERT INTO workloads (id, tenant_id, kind, name, gpu_class, units, image, region, \
             fallback, fallback_after_s, params, state, reason, version, created_at, updated_at, \
             trace_context, owner_id) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, 1, $14, $14, $15, \
             $16)",
        )
        .bind(new.id.as_uuid())
        .bind(new.tenant_id.as_uuid())
        .bind(new.kind.as_str())
        .bind(&new.name)
        .bind(&new.gpu_class)
        .bind(i64::from(new.units))
        .bind(&new.image)
        .bind(new.region.as_str())
        .bind(&fallback)
        .bind(new.fallback_after_s.map(i64::from))
        .bind(&new.params)
        .bind(State::INITIAL.as_str())
        .bind(&reason)
        .bind(now)
        .bind(new.trace_context.as_deref())
        .bind(new.owner.map(|u| *u.as_uuid()))
        .execute(&mut *tx)
        .await
        .map_err(|e| name_taken(e, &new.name))?;
        commit_action(tx, Some(ActivityObject::of(new.id))).await?;
        self.committed();
        crate::metrics::stepped(None, State::INITIAL);
        let at = from_ms(now)?;
        Ok(Workload {
            id: new.id,
            tenant_id: new.tenant_id,
            owner: new.owner,
            kind: new.kind,
            name: new.name.clone(),
            gpu_class: new.gpu_class.clone(),
            placed_class: None,
            units: new.units,
            image: new.image.clone(),
            region: new.region.clone(),
            machine_id: None,
            driver: None,
            devices: Vec::new(),
            attempt: Attempt::NONE,
            fallback: new.fallback.clone(),
            fallback_after_s: new.fallback_after_s,
            params: new.params.clone(),
            state: State::INITIAL,
            reason,
            version: 1,
            created_at: at,
            updated_at: at,
        })
    }

    #[tracing::instrument(level = "debug", name = "store.workload", skip_all)]
    async fn workload(&self, id: WorkloadId) -> Result<Option<Workload>, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(SELECT_WORKLOAD.as_str()))
            .bind(id.as_uuid())
            .fetch_optional(self.reader())
            .await?;
        row.as_ref().map(workload_from_row).transpose()
    }

    #[tracing::instrument(level = "debug", name = "store.workloads", skip_all)]
    async fn workloads(&self, filter: &WorkloadFilter) -> Result<Vec<Workload>, StoreError> {
        let mut q = sqlx::QueryBuilder::<Db>::new(format!(
            "SELECT {WORKLOAD_COLUMNS} FROM workloads WHERE 1 = 1"
        ));
        if let Some(tenant) = filter.tenant {
            q.push(" AND tenant_id = ").push_bind(*tenant.as_uuid());
        }
        if let Some(region) = &filter.region {
            q.push(" AND region = ")
                .push_bind(region.as_str().to_owned());
        }
        if !filter.states.is_empty() {
            q.push(" AND state IN (");
            let mut states = q.separated(", ");
            for s in &filter.states {
                states.push_bind(s.as_str());
            }
            q.push(")");
        }
        if !filter.include_deleted {
            q.push(" AND state <> 'deleted'");
        }
        q.push(" ORDER BY id");
        let rows = q.build().fetch_all(self.reader()).await?;
        rows.iter().map(workload_from_row).collect()
    }

    #[tracing::instrument(level = "debug", name = "store.transition", skip_all)]
    async fn transition(&self, change: &Transition<'_>) -> Result<Workload, StoreError> {
        let next = check_step(change)?;
        // The clock is read once the writer is ours, so a wait can't stretch a lease.
        // A user's action writes its activity entry in its own transaction; the controller's
        // transitions (the busy path) are one statement, with none, on the step writer.
        let (applied, now) = if crate::activity::records_actions() {
            let mut conn = self.writer().await?;
            let now = now_ms();
            let mut tx = begin_write(&mut conn).await?;
            let applied = apply_step(&mut tx, change, now).await?;
            if applied {
                commit_action(tx, Some(ActivityObject::of(change.workload.id))).await?;
            }
            (applied, now)
        } else {
            let mut conn = self.step_writer().await?;
            let now = now_ms();
            (apply_step(&mut conn, change, now).await?, now)
        };
        if !applied {
            return Err(why_unchanged(self, change.workload.id, change.fence).await);
        }
        self.committed();
        stepped(next, change, now)
    }

    #[tracing::instrument(level = "debug", name = "store.transitions", skip_all)]
    async fn transitions(
        &self,
        changes: &[Transition<'_>],
    ) -> Result<Vec<Result<Workload, StoreError>>, StoreError> {
        if changes.is_empty() {
            return Ok(Vec::new());
        }
        let checked: Vec<_> = changes.iter().map(check_step).collect();
        let mut ids = std::collections::HashSet::with_capacity(changes.len());
        if !changes.iter().all(|c| ids.insert(c.workload.id)) {
            // A workload twice in one batch: its steps must see each other, one by one.
            return Ok(self.one_by_one(changes).await);
        }
        let eligible = (0..changes.len()).filter(|i| checked[*i].is_ok());
        let mut conn = self.step_writer().await?;
        let mut tx = begin_write(&mut conn).await?;
        let now = now_ms();
        let mut changed = std::collections::HashSet::with_capacity(changes.len());
        for group in groups(changes, eligible) {
            match apply_group(&mut tx, &group.members, group.admissions, group.fence, now).await {
                Ok(ids) => changed.extend(ids),
                Err(StoreError::Unavailable(e)) => return Err(StoreError::Unavailable(e)),
                // A step the database refused (a constraint) fails its whole statement and
                // aborts the transaction (on Postgres): the steps go one by one instead, so it
                // can't hold the others up.
                Err(_) => {
                    drop(tx);
                    drop(conn);
                    return Ok(self.one_by_one(changes).await);
                }
            }
        }
        tx.commit().await?;
        drop(conn);
        if !changed.is_empty() {
            self.committed();
        }
        let mut results = Vec::with_capacity(changes.len());
        for (change, next) in changes.iter().zip(checked) {
            results.push(match next {
                Err(e) => Err(e),
                Ok(next) if changed.contains(change.workload.id.as_uuid()) => {
                    stepped(next, change, now)
                }
                Ok(_) => Err(why_unchanged(self, change.workload.id, change.fence).await),
            });
        }
        Ok(results)
    }

    #[tracing::instrument(level = "debug", name = "store.start", skip_all)]
    async fn start(
        &self,
        w: &Workload,
        shape: crate::UnitShape,
        reason: &Reason,
    ) -> Result<Workload, StoreError> {
        lifecycle::transition(w.state, State::Pending, w.is_placed())?;
        let reason = reason.text();
        let mut conn = self.writer().await?;
        let mut tx = begin_write(&mut conn).await?;
        let asked = Asked {
            class: &w.gpu_class,
            units: w.units,
            shape,
        };
        check_quota(&mut tx, w.tenant_id, w.owner, asked).await?;
        let now = now_ms();
        let update = sqlx::query(
            "UPDATE workloads SET state = $1, reason = $2, version = version + 1, updated_at = $3 \
             WHERE id = $4 AND version = $5 AND state = $6",
        )
        .bind(State::Pending.as_str())
        .bind(&reason)
        .bind(now)
        .bind(w.id.as_uuid())
        .bind(w.version)
        .bind(w.state.as_str())
        .execute(&mut *tx)
        .await?;
        if update.rows_affected() == 0 {
            drop(tx);
            return Err(why_unchanged(self, w.id, None).await);
        }
        commit_action(tx, Some(ActivityObject::of(w.id))).await?;
        self.committed();
        crate::metrics::stepped(Some(w.state), State::Pending);
        Ok(Workload {
            state: State::Pending,
            reason,
            version: w.version + 1,
            updated_at: from_ms(now)?,
            ..w.clone()
        })
    }

    #[tracing::instrument(level = "debug", name = "store.note", skip_all)]
    async fn note(
        &self,
        w: &Workload,
        reason: &Reason,
        fence: Option<&Lease>,
    ) -> Result<(), StoreError> {
        if w.state.is_terminal() {
            return Err(StoreError::InvalidInput(
                "a deleted workload's timeline is closed".into(),
            ));
        }
        let reason = reason.text();
        let mut conn = self.writer().await?;
        let now = now_ms();
        let sql = match fence {
            None => note_insert!(),
            Some(_) => concat!(note_insert!(), fenced!(5, 6, 7, 8)),
        };
        let mut query = sqlx::query(sql)
            .bind(&reason)
            .bind(now)
            .bind(w.id.as_uuid())
            .bind(w.version);
        if let Some(lease) = fence {
            query = query
                .bind(&lease.name)
                .bind(&lease.holder)
                .bind(lease.epoch)
                .bind(now);
        }
        if query.execute(&mut *conn).await?.rows_affected() == 0 {
            drop(conn);
            let err = why_unchanged(self, w.id, fence).await;
            // Unchanged but still at this version, lease held: the note is the latest already.
            if matches!(err, StoreError::Conflict { .. }) && still_at(self, w).await? {
                return Ok(());
            }
            return Err(err);
        }
        Ok(())
    }

    #[tracing::instrument(level = "debug", name = "store.events", skip_all)]
    async fn events(&self, id: WorkloadId) -> Result<Vec<Event>, StoreError> {
        let rows = sqlx::query(
            "SELECT seq, workload_id, from_state, to_state, reason, attempt, at \
             FROM workload_events WHERE workload_id = $1 ORDER BY seq",
        )
        .bind(id.as_uuid())
        .fetch_all(self.reader())
        .await?;
        rows.iter().map(event_from_row).collect()
    }

    #[tracing::instrument(level = "debug", name = "store.capacity_held", skip_all)]
    async fn capacity_held(&self, region: &Region) -> Result<BTreeMap<String, u64>, StoreError> {
        let rows: Vec<(String, i64)> = sqlx::query_as(sqlx::AssertSqlSafe(CAPACITY_HELD.as_str()))
            .bind(region.as_str())
            .fetch_all(self.reader())
            .await?;
        Ok(rows
            .into_iter()
            .map(|(class, units)| (class, units.max(0).unsigned_abs()))
            .collect())
    }

    #[tracing::instrument(level = "debug", name = "store.take_lease", skip_all)]
    async fn take_lease(
        &self,
        name: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>, StoreError> {
        let now = now_ms();
        let expires = now.saturating_add(duration_ms(ttl));
        let row: Option<(i64,)> = sqlx::query_as(
            "INSERT INTO leases (name, holder, epoch, expires_at) VALUES ($1, $2, 1, $3) \
             ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, \
             epoch = leases.epoch + 1, expires_at = excluded.expires_at \
             WHERE leases.expires_at <= $4 OR leases.holder = excluded.holder \
             RETURNING epoch",
        )
        .bind(name)
        .bind(holder)
        .bind(expires)
        .bind(now)
        .fetch_optional(&mut *self.writer().await?)
        .await?;
        row.map(|(epoch,)| {
            Ok(Lease {
                name: name.to_owned(),
                holder: holder.to_owned(),
                epoch,
                expires_at: from_ms(expires)?,
            })
        })
        .transpose()
    }

    #[tracing::instrument(level = "debug", name = "store.renew_lease", skip_all)]
    async fn renew_lease(&self, lease: &Lease, ttl: Duration) -> Result<Lease, StoreError> {
        let now = now_ms();
        let expires = now.saturating_add(duration_ms(ttl));
        let renewed = sqlx::query(
            "UPDATE leases SET expires_at = $1 WHERE name = $2 AND holder = $3 AND epoch = $4 \
             AND expires_at > $5",
        )
        .bind(expires)
        .bind(&lease.name)
        .bind(&lease.holder)
        .bind(lease.epoch)
        .bind(now)
        .execute(&mut *self.writer().await?)
        .await?;
        if renewed.rows_affected() == 0 {
            return Err(StoreError::LeaseLost(lease.name.clone()));
        }
        Ok(Lease {
            expires_at: from_ms(expires)?,
            ..lease.clone()
        })
    }

    #[tracing::instrument(level = "debug", name = "store.release_lease", skip_all)]
    async fn release_lease(&self, lease: &Lease) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE leases SET expires_at = 0 WHERE name = $1 AND holder = $2 AND epoch = $3",
        )
        .bind(&lease.name)
        .bind(&lease.holder)
        .bind(lease.epoch)
        .execute(&mut *self.writer().await?)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", name = "store.leases", skip_all)]
    async fn leases(&self) -> Result<Vec<Lease>, StoreError> {
        let rows = sqlx::query("SELECT name, holder, epoch, expires_at FROM leases ORDER BY name")
            .fetch_all(self.reader())
            .await?;
        rows.iter()
            .map(|row| {
                Ok(Lease {
                    name: row.try_get("name")?,
                    holder: row.try_get("holder")?,
                    epoch: row.try_get("epoch")?,
                    expires_at: from_ms(row.try_get("expires_at")?)?,
                })
            })
            .collect()
    }
}

static SELECT_WORKLOAD: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| format!("SELECT {WORKLOAD_COLUMNS} FROM workloads WHERE id = $1"));

static CAPACITY_HELD: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "SELECT COALESCE(placed_class, gpu_class) AS class, CAST(SUM(units) AS BIGINT) AS units FROM workloads \
         WHERE region = $1 AND state IN ({}) GROUP BY COALESCE(placed_class, gpu_class)",
        *crate::state_sql::HOLDS_CAPACITY
    )
});

/// Refuses a step the lifecycle (or its own door) doesn't allow, and says what the row becomes
/// (all but the version and time, which `stepped` sets once it is written).
fn check_step(change: &Transition<'_>) -> Result<Workload, StoreError> {
    let w = change.workload;
    // Two steps of the diagram have their own doors: admission records a placement and a
    // new attempt, and going back to pending re-checks quota.
    let refuse = |why: &str| Err(StoreError::InvalidInput(why.to_owned()));
    match (change.to, change.admission) {
        (State::Provisioning, None) => {
            return refuse("moving to provisioning is an admission: it needs a placement");
        }
        (to, Some(_)) if to != State::Provisioning => {
            return refuse("a placement is recorded only with the move to provisioning");
        }
        (State::Pending, _) => {
            return refuse("a workload goes back to pending only through start");
        }
        _ => {}
    }
    lifecycle::transition(
        w.state,
        change.to,
        change.admission.is_some() || w.is_placed(),
    )?;
    let mut next = w.clone();
    if let Some(a) = change.admission {
        next.placed_class = Some(a.placed_class.clone());
        next.machine_id = a.machine_id;
        next.driver = a.driver.clone();
        next.devices = a.devices.clone();
        next.attempt = w.attempt.next();
    }
    Ok(next)
}

/// One statement: the compare-and-swap, the lease check, and (by trigger) the event. Whether
/// it changed the row.
async fn apply_step(
    conn: &mut <Db as sqlx::Database>::Connection,
    change: &Transition<'_>,
    now: i64,
) -> Result<bool, StoreError> {
    let w = change.workload;
    let sql = match (change.admission, change.fence) {
        (None, None) => plain_update!(),
        (None, Some(_)) => concat!(plain_update!(), fenced!(7, 8, 9, 10)),
        (Some(_), None) => admit_update!(),
        (Some(_), Some(_)) => concat!(admit_update!(), fenced!(12, 13, 14, 15)),
    };
    let mut query = sqlx::query(sql)
        .bind(change.to.as_str())
        .bind(change.reason.text())
        .bind(now)
        .bind(w.id.as_uuid())
        .bind(w.version)
        .bind(w.state.as_str());
    if let Some(a) = change.admission {
        query = query
            .bind(&a.placed_class)
            .bind(a.machine_id.map(|m| *m.as_uuid()))
            .bind(&a.driver)
            .bind(i64::from(w.attempt.next().get()))
            .bind(devices_json(&a.devices)?);
    }
    if let Some(lease) = change.fence {
        query = query
            .bind(&lease.name)
            .bind(&lease.holder)
            .bind(lease.epoch)
            .bind(now);
    }
    Ok(query.execute(&mut *conn).await?.rows_affected() > 0)
}

/// The row as a written step left it.
fn stepped(mut next: Workload, change: &Transition<'_>, now: i64) -> Result<Workload, StoreError> {
    crate::metrics::stepped(Some(change.workload.state), change.to);
    next.state = change.to;
    next.reason = change.reason.text();
    next.version = change.workload.version + 1;
    next.updated_at = from_ms(now)?;
    Ok(next)
}

impl ThisStore {
    #[tracing::instrument(level = "debug", name = "store.one_by_one", skip_all)]
    async fn one_by_one(&self, changes: &[Transition<'_>]) -> Vec<Result<Workload, StoreError>> {
        let mut results = Vec::with_capacity(changes.len());
        for change in changes {
            results.push(crate::Store::transition(self, change).await);
        }
        results
    }
}

/// A device list as the `devices` column keeps it.
fn devices_json(devices: &[String]) -> Result<String, StoreError> {
    serde_json::to_string(devices)
        .map_err(|e| StoreError::InvalidInput(format!("device list: {e}")))
}

/// Whether the workload's row is still at the version `w` was read at.
async fn still_at(store: &ThisStore, w: &Workload) -> Result<bool, StoreError> {
    let version: Option<i64> = sqlx::query_scalar("SELECT version FROM workloads WHERE id = $1")
        .bind(w.id.as_uuid())
        .fetch_optional(store.reader())
        .await?;
    Ok(version == Some(w.version))
}
