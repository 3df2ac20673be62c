//! `einsora backup`'s dump and `einsora restore`'s load, between engines: a SQLite
//! installation's rows moved into Postgres and back come out exactly as they went in, the
//! store reads them the same, and a target that isn't empty, or a dump from a newer einsora,
//! or a torn one, is refused with the target left as it was.

use std::collections::BTreeMap;

use einsora_core::lifecycle::State;
use einsora_core::output::{OutputStream, PrintedLine};
use einsora_store::backup::{self, BackupError, Item, Value};
use einsora_store::{DatabaseUrl, OutputBatch, OutputCaps, OutputQuery, Store};
use einsora_testkit::fixtures::{registration, usage};
use time::OffsetDateTime;

use crate::harness::{TestDb, tenant, workload_in};

/// Each table's columns and its rows, sorted (a table has no order of its own).
type Tables = BTreeMap<String, (Vec<String>, Vec<Vec<Value>>)>;

async fn dump(url: &DatabaseUrl) -> (Vec<Item>, Tables) {
    let mut items = Vec::new();
    backup::dump(url, &mut |item| {
        items.push(item);
        Ok(())
    })
    .await
    .unwrap();
    let mut tables = Tables::new();
    let mut current = String::new();
    for item in &items {
        match item {
            Item::Table { name, columns } => {
                current = name.clone();
                tables.insert(name.clone(), (columns.clone(), Vec::new()));
            }
            Item::Row(values) => tables.get_mut(&current).unwrap().1.push(values.clone()),
        }
    }
    for (_, rows) in tables.values_mut() {
        rows.sort_by_key(|row| format!("{row:?}"));
    }
    (items, tables)
}

async fn load(url: &DatabaseUrl, items: &[Item]) -> Result<backup::Counts, BackupError> {
    let schema = backup::schema_version(url);
    let mut rows = items.iter().cloned().map(Ok);
    backup::load(url, schema, &mut rows).await
}

/// An installation with something in most tables: accounts, machines, workloads with
/// timelines, usage and output.
async fn fill(store: &dyn Store) {
    let t = tenant(store, Some(4)).await;
    let running = workload_in(store, t, State::Running).await;
    workload_in(store, t, State::Deleted).await;
    workload_in(store, t, State::Failed).await;
    store
        .record_inventory(&registration(t, "box", Some(OffsetDateTime::now_utc())))
        .await
        .unwrap();
    let hour = OffsetDateTime::now_utc().replace_minute(0).unwrap();
    let hour = hour
        .replace_second(0)
        .unwrap()
        .replace_nanosecond(0)
        .unwrap();
    store
        .record_usage(&usage(t, running.id, hour, 600))
        .await
        .unwrap();
    let line = |text: &str, end: u64, gap_before: bool| PrintedLine {
        stream: OutputStream::Stderr,
        printed_at: OffsetDateTime::now_utc(),
        text: text.into(),
        dropped_before: 0,
        gap_before,
        end,
    };
    let batch = OutputBatch {
        workload_id: running.id,
        tenant_id: t,
        attempt: running.attempt.get(),
        to: 20,
        received_at: OffsetDateTime::now_utc(),
        lines: vec![line("first", 6, true), line("second é", 20, false)],
    };
    let caps = OutputCaps {
        per_workload: 1 << 20,
        per_tenant: 1 << 20,
        total: 1 << 20,
    };
    store.append_output(&batch, &caps).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlite_installation_moves_to_postgres_and_back_unchanged() {
    let solo = TestDb::sqlite().await;
    fill(&*solo.store).await;
    let (items, tables) = dump(&solo.url).await;
    assert_eq!(
        tables.keys().collect::<Vec<_>>().len(),
        backup::TABLES.len(),
        "every table is in the dump"
    );
    assert!(tables["workload_events"].1.len() >= 6, "{tables:?}");
    assert_eq!(tables["workload_output"].1.len(), 2);

    let pg = TestDb::postgres().await;
    pg.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public");
    let counts = load(&pg.url, &items).await.unwrap();
    assert_eq!(counts["workload_output"], 2);
    let (moved, in_postgres) = dump(&pg.url).await;
    assert_eq!(
        in_postgres, tables,
        "Postgres holds exactly what SQLite held"
    );

    let lab = pg.open_again().await;
    let filter = Default::default();
    let (before, after) = (
        solo.store.workloads(&filter).await.unwrap(),
        lab.workloads(&filter).await.unwrap(),
    );
    assert_eq!(after, before, "the store reads the same workloads");
    let ids: Vec<_> = before.iter().map(|w| w.id).collect();
    assert_eq!(
        lab.timelines(&ids).await.unwrap(),
        solo.store.timelines(&ids).await.unwrap(),
        "and the same timelines"
    );
    let all = OutputQuery {
        limit: 10,
        ..OutputQuery::default()
    };
    let running = before.iter().find(|w| w.state == State::Running).unwrap();
    assert_eq!(
        lab.read_output(running.id, &all).await.unwrap(),
        solo.store.read_output(running.id, &all).await.unwrap(),
        "and the same output"
    );
    // A timeline goes on where it was: its next step is numbered after the restored ones.
    crate::harness::step(&*lab, running, State::Stopping).await;
    let timeline = &lab.timelines(&[running.id]).await.unwrap()[&running.id];
    let last = timeline.last().unwrap();
    assert_eq!(last.to, State::Stopping, "{timeline:?}");
    assert!(
        timeline.windows(2).all(|p| p[0].seq < p[1].seq),
        "{timeline:?}"
    );

    let back = tempfile::tempdir().unwrap();
    let url = DatabaseUrl::Sqlite {
        path: back.path().join("einsora.db"),
    };
    load(&url, &moved).await.unwrap();
    assert_eq!(dump(&url).await.1, tables, "and back to SQLite, unchanged");
    einsora_store::open(&url)
        .await
        .expect("at this einsora's schema");
}

async fn refusals(db: TestDb) {
    let source = TestDb::sqlite().await;
    fill(&*source.store).await;
    let (items, _) = dump(&source.url).await;

    // Not empty: one line naming a table, and nothing written.
    let target = &db.url;
    fill(&*db.store).await;
    let (_, before) = dump(target).await;
    let refused = load(target, &items).await.unwrap_err();
    assert!(matches!(refused, BackupError::NotEmpty { .. }), "{refused}");
    assert!(
        refused.to_string().contains("isn't empty: tenants has"),
        "{refused}"
    );
    assert_eq!(dump(target).await.1, before);

    // From a newer einsora: refused before anything is opened.
    let fresh = TestDb::sqlite().await;
    fresh.execute("DELETE FROM tenants");
    let newer = backup::schema_version(&fresh.url) + 1;
    let mut rows = items.iter().cloned().map(Ok);
    let refused = backup::load(&fresh.url, newer, &mut rows)
        .await
        .unwrap_err();
    assert!(matches!(refused, BackupError::Newer { .. }), "{refused}");

    // Torn off before its last table: nothing of it stays.
    let empty = tempfile::tempdir().unwrap();
    let url = DatabaseUrl::Sqlite {
        path: empty.path().join("einsora.db"),
    };
    let cut = items
        .iter()
        .position(|i| matches!(i, Item::Table { name, .. } if name == "activity"))
        .unwrap();
    let refused = load(&url, &items[..cut]).await.unwrap_err();
    assert!(
        refused.to_string().contains("without the table activity"),
        "{refused}"
    );
    load(&url, &items)
        .await
        .expect("the whole dump, after the torn one");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_refuses_a_full_target_a_newer_dump_and_a_torn_one() {
    refusals(TestDb::sqlite().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_refuses_a_full_target_a_newer_dump_and_a_torn_one() {
    refusals(TestDb::postgres().await).await;
}

/// A table a migration adds is dumped, or left out by name: never forgotten.
pub async fn every_table_is_dumped_or_left_out_by_name(db: TestDb) {
    let sql = match &db.url {
        DatabaseUrl::Sqlite { .. } => {
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
        }
        DatabaseUrl::Postgres { .. } => {
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY table_name"
        }
    };
    let found = einsora_testkit::db::query(&db.url, sql);
    let mut found: Vec<&str> = found.lines().collect();
    found.sort_unstable();
    let mut known: Vec<&str> = backup::TABLES
        .iter()
        .chain(backup::LEFT_OUT)
        .copied()
        .collect();
    known.sort_unstable();
    assert_eq!(found, known);
}
