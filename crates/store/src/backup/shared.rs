// A dump and a load, written once for both engines and `include!`d into `sqlite.rs` and
// `postgres.rs` (as `crate::shared` is, ADR 0001). Each engine defines `connect`, `applied`,
// `columns`, `value`, `bind`, `Query`, `MIGRATOR`, `SNAPSHOT` (how a dump's read transaction
// begins), `WRITE` (how a load's does), `IDENTITY` (a column the engine generates, written as
// dumped) and `AFTER_LOAD` (what moves its sequence past the rows written).

pub(super) async fn dump(
    url: &DatabaseUrl,
    each: &mut (dyn FnMut(Item) -> Result<(), BackupError> + Send),
) -> Result<Counts, BackupError> {
    let mut conn = connect(url, Purpose::Use).await?;
    // One snapshot for every table, while the installation writes on.
    let mut tx = conn
        .begin_with(SNAPSHOT)
        .await
        .map_err(StoreError::from)?;
    let (found, known) = (applied(&mut tx).await?, super::schema_version(url));
    if found != known {
        return Err(BackupError::Mismatch { found, known });
    }
    let mut counts = Counts::new();
    for table in TABLES {
        let columns: Vec<String> = columns(&mut tx, table)
            .await?
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        each(Item::Table {
            name: (*table).to_owned(),
            columns: columns.clone(),
        })?;
        let names: Vec<String> = columns.iter().map(|c| format!("\"{c}\"")).collect();
        let sql = format!("SELECT {} FROM \"{table}\"", names.join(", "));
        let mut rows = sqlx::query(sqlx::AssertSqlSafe(sql)).fetch(&mut *tx);
        let mut n = 0;
        while let Some(row) = rows.try_next().await.map_err(StoreError::from)? {
            let values = (0..columns.len())
                .map(|i| value(&row, i, table, &columns[i]))
                .collect::<Result<Vec<_>, _>>()?;
            each(Item::Row(values))?;
            n += 1;
        }
        counts.insert((*table).to_owned(), n);
    }
    Ok(counts)
}

pub(super) async fn load(
    url: &DatabaseUrl,
    schema: i64,
    items: &mut (dyn Iterator<Item = Result<Item, BackupError>> + Send),
) -> Result<Counts, BackupError> {
    let mut conn = connect(url, Purpose::Migrate).await?;
    let migrator = MIGRATOR;
    let found = applied(&mut conn).await?;
    if found > schema {
        return Err(BackupError::NewerTarget { found, schema });
    }
    migrator
        .run_to(schema, &mut conn)
        .await
        .map_err(|e| crate::migrations::map_error(migrator, e))?;
    for table in TABLES {
        let sql = format!("SELECT COUNT(*) FROM \"{table}\"");
        let rows: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .fetch_one(&mut conn)
            .await
            .map_err(StoreError::from)?;
        if rows > 0 {
            return Err(BackupError::NotEmpty {
                table: (*table).to_owned(),
                rows,
            });
        }
    }
    let counts = {
        let mut tx = conn.begin_with(WRITE).await.map_err(StoreError::from)?;
        let mut expect = Expect::new();
        let mut insert: Option<(String, Vec<Kind>, Vec<String>)> = None;
        for item in items {
            match item? {
                Item::Table { name, columns } => {
                    let target = self::columns(&mut tx, &name).await?;
                    let names: Vec<String> = target.iter().map(|(n, _)| n.clone()).collect();
                    expect.table(&name, &columns, &names)?;
                    let kinds = super::kinds(&name, &columns, &target)?;
                    if name == "workload_events" {
                        sqlx::query(AFTER_WORKLOADS)
                            .execute(&mut *tx)
                            .await
                            .map_err(StoreError::from)?;
                    }
                    let identity = IDENTITY.is_some_and(|(table, _)| name == table);
                    insert = Some((super::insert_sql(&name, &columns, identity), kinds, columns));
                }
                Item::Row(values) => {
                    let table = expect.row(values.len())?.to_owned();
                    let (sql, kinds, columns) = insert.as_ref().expect("a row follows its table");
                    let mut query: Query<'_> = sqlx::query(sqlx::AssertSqlSafe(sql.clone()));
                    for ((value, kind), column) in values.into_iter().zip(kinds).zip(columns) {
                        query = bind(query, *kind, value).map_err(|why| {
                            BackupError::shape(&table, format!("{column}: {why}"))
                        })?;
                    }
                    query
                        .execute(&mut *tx)
                        .await
                        .map_err(|e| BackupError::shape(&table, e.to_string()))?;
                }
            }
        }
        let counts = expect.finish()?;
        if let Some(after) = AFTER_LOAD {
            sqlx::query(sqlx::AssertSqlSafe(after.to_owned()))
                .execute(&mut *tx)
                .await
                .map_err(StoreError::from)?;
        }
        tx.commit().await.map_err(StoreError::from)?;
        counts
    };
    migrator
        .run(&mut conn)
        .await
        .map_err(|e| crate::migrations::map_error(migrator, e))?;
    Ok(counts)
}

