//! Lifecycle transitions (compare-and-swap + event insert) through the store, on SQLite and on
//! Postgres, with 1 and 16 concurrent writers, beside the raw engine running the same
//! transaction on the same schema in the same run: the sqlite3 CLI and pgbench.
//!
//! `cargo bench -p einsora-store --bench transitions` (BENCH_SCALE multiplies the work).
//!
//! Every writer walks its own workloads from pending to deleted: seven transitions each, the
//! admission among them. A transition is one compare-and-swap UPDATE whose trigger appends the
//! event; the raw engines run exactly that statement, with the same CAS, on a second set of
//! workloads in the same database.

// A test harness: a failed unwrap is a failed test, and it reads its own environment.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::fmt::Write as _;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

use einsora_core::ids::{TenantId, WorkloadId};
use einsora_core::kind::WorkloadKind;
use einsora_core::lifecycle::State;
use einsora_core::reasons::Reason;
use einsora_core::region::Region;
use einsora_store::{
    Admission, DatabaseUrl, NewTenant, NewWorkload, QuotaClass, Store, Transition,
};
use einsora_testkit::TempPostgres;
use einsora_testkit::bench::{Report, Table, setting};
use uuid::Uuid;

const PATH: [State; 7] = [
    State::Queued,
    State::Provisioning,
    State::Running,
    State::Stopping,
    State::Stopped,
    State::Deleting,
    State::Deleted,
];

/// (writers, workloads per writer) on each engine, before BENCH_SCALE.
const SQLITE_RUNS: [(usize, usize); 2] = [(1, 3000), (16, 200)];
const POSTGRES_RUNS: [(usize, usize); 2] = [(1, 1500), (16, 300)];

fn main() -> anyhow::Result<()> {
    let scale: f64 = setting("BENCH_SCALE", 1.0)?;
    let scaled = |n: usize| ((n as f64 * scale) as usize).max(1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut report = Report::start(
        "transitions",
        "Store transitions",
        "cargo bench -p einsora-store --bench transitions",
    );
    let mut table = Table::new(
        &[
            "engine",
            "writers",
            "einsora tx/s",
            "raw tx/s, as many clients as writers",
            "ratio",
            "raw tx/s, one sqlite3 process",
            "ratio to one process",
        ],
        1,
    );
    let dir = tempfile::tempdir()?;
    for (writers, each) in SQLITE_RUNS {
        let each = scaled(each);
        let path = dir.path().join(format!("bench-{writers}.db"));
        let url = DatabaseUrl::parse(&format!("sqlite:{}", path.display()))?;
        let store = rt.block_on(setup(&url, writers * each * 3))?;
        let (ours, raw) = ranges(writers, each);
        let ours = rt.block_on(drive(&store, &ours))?;
        drop(store);
        let raw_procs = sqlite_raw(&path, &raw[..raw.len() / 2].concat(), writers)?;
        let raw_one = sqlite_raw(&path, &raw[raw.len() / 2..].concat(), 1)?;
        table.row(vec![
            "SQLite".into(),
            writers.to_string(),
            format!("{ours:.0}"),
            format!("{raw_procs:.0}"),
            format!("{:.2}", ours / raw_procs),
            format!("{raw_one:.0}"),
            format!("{:.2}", ours / raw_one),
        ]);
    }
    let pg = TempPostgres::shared();
    for (writers, each) in POSTGRES_RUNS {
        let each = scaled(each);
        let raw_url = pg.fresh_database()?;
        let url = DatabaseUrl::parse(&raw_url)?;
        let store = rt.block_on(setup(&url, writers * each * 2))?;
        let (ours, _) = ranges(writers, each);
        let ours = rt.block_on(drive(&store, &ours))?;
        drop(store);
        let raw = pgbench(pg, &raw_url, writers, each)?;
        table.row(vec![
            "Postgres".into(),
            writers.to_string(),
            format!("{ours:.0}"),
            format!("{raw:.0}"),
            format!("{:.2}", ours / raw),
            String::new(),
            String::new(),
        ]);
    }
    report.say(format!(
        "Transitions a second (SQLite: the raw engine is the sqlite3 CLI, as many processes as \
         writers and as one process; Postgres: pgbench -M prepared, one client per writer; \
         BENCH_SCALE {scale}):"
    ));
    report.table(&table);
    report.finish()?;
    Ok(())
}

/// Workload `n`'s ID, computable in SQL too: pgbench derives it from its counters.
fn id(n: usize) -> WorkloadId {
    WorkloadId::from_uuid(Uuid::from_u128(0x7000_8000_0000_0000_0000 | n as u128))
}

/// Per writer, the workload numbers it walks: ours first, then the raw engine's (twice as many
/// on SQLite, which runs the raw engine as many processes and as one).
fn ranges(writers: usize, each: usize) -> (Vec<Vec<usize>>, Vec<Vec<usize>>) {
    let block = |w: usize| (w * each..(w + 1) * each).collect::<Vec<_>>();
    let ours = (0..writers).map(block).collect();
    let raw = (writers..3 * writers).map(block).collect();
    (ours, raw)
}

/// A migrated database with one tenant and `n` pending workloads (numbered 0..n).
async fn setup(url: &DatabaseUrl, n: usize) -> anyhow::Result<Arc<dyn Store>> {
    let (store, _) = einsora_store::migrate(url).await?;
    let tenant = TenantId::new();
    let new_tenant = NewTenant {
        id: tenant,
        slug: "bench".into(),
        name: "Bench".into(),
        trusted: true,
    };
    store.create_tenant(&new_tenant).await?;
    store.set_quota(tenant, &QuotaClass::Default, None).await?;
    let creators: Vec<_> = (0..16)
        .map(|c| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                for i in (c..n).step_by(16) {
                    let w = NewWorkload {
                        owner: None,
                        id: id(i),
                        tenant_id: tenant,
                        kind: WorkloadKind::Notebook,
                        name: format!("bench-{i}"),
                        gpu_class: "cpu-1c-2g".into(),
                        units: 1,
                        shape: einsora_store::UnitShape {
                            cpus: 1,
                            memory_gib: 2,
                        },
                        image: "jupyterlab".into(),
                        region: Region::new("local")?,
                        fallback: vec![],
                        fallback_after_s: None,
                        params: "{}".into(),
                        trace_context: None,
                    };
                    store.create_workload(&w, &Reason::Ready).await?;
                }
                anyhow::Ok(())
            })
        })
        .collect();
    for c in creators {
        c.await??;
    }
    Ok(store)
}

/// Each writer walks its workloads through the path; returns transitions/s.
async fn drive(store: &Arc<dyn Store>, plan: &[Vec<usize>]) -> anyhow::Result<f64> {
    let admission = Admission {
        placed_class: "cpu-1c-2g".into(),
        machine_id: None,
        driver: Some("sim".into()),
        devices: Vec::new(),
    };
    // Read first, so only transitions are timed (the raw engines read nothing either).
    let mut walks = Vec::with_capacity(plan.len());
    for numbers in plan {
        let mut workloads = Vec::with_capacity(numbers.len());
        for &n in numbers {
            workloads.push(
                store
                    .workload(id(n))
                    .await?
                    .ok_or_else(|| anyhow::anyhow!("gone"))?,
            );
        }
        walks.push(workloads);
    }
    let start = Instant::now();
    let tasks: Vec<_> = walks
        .into_iter()
        .map(|workloads| {
            let store = Arc::clone(store);
            let admission = admission.clone();
            tokio::spawn(async move {
                for mut w in workloads {
                    for to in PATH {
                        let change = Transition {
                            workload: &w,
                            to,
                            reason: &Reason::Ready,
                            admission: (to == State::Provisioning).then_some(&admission),
                            fence: None,
                        };
                        w = store.transition(&change).await?;
                    }
                }
                anyhow::Ok(())
            })
        })
        .collect();
    let mut total = 0;
    for (t, numbers) in tasks.into_iter().zip(plan) {
        t.await??;
        total += numbers.len() * PATH.len();
    }
    Ok(total as f64 / start.elapsed().as_secs_f64())
}

/// One literal UPDATE per step, as the store sends it (admission sets the placement).
fn sqlite_statement(sql: &mut String, n: usize, step: usize) {
    let from = if step == 0 {
        State::Pending
    } else {
        PATH[step - 1]
    };
    let to = PATH[step];
    let placement = if to == State::Provisioning {
        ", placed_class = 'cpu-1c-2g', machine_id = NULL, driver = 'sim', attempt = 1"
    } else {
        ""
    };
    let _ = writeln!(
        sql,
        "UPDATE workloads SET state = '{to}', reason = 'ready', version = version + 1, \
         updated_at = {step}{placement} WHERE id = X'{id}' AND version = {v} AND state = '{from}';",
        id = id(n).as_uuid().simple(),
        v = step + 1,
    );
}

/// The raw engine through the sqlite3 CLI, in autocommit like the store, with the store's
/// pragmas, over `numbers` split among `procs` processes; returns transitions/s.
fn sqlite_raw(path: &std::path::Path, numbers: &[usize], procs: usize) -> anyhow::Result<f64> {
    let chunk = numbers.len().div_ceil(procs);
    let scripts: Vec<String> = numbers
        .chunks(chunk)
        .map(|part| {
            let mut sql = String::from("PRAGMA busy_timeout=5000; PRAGMA synchronous=NORMAL;\n");
            for &n in part {
                for step in 0..PATH.len() {
                    sqlite_statement(&mut sql, n, step);
                }
            }
            sql
        })
        .collect();
    let files = scripts
        .iter()
        .map(|sql| {
            let file = tempfile::NamedTempFile::new()?;
            std::fs::write(file.path(), sql)?;
            anyhow::Ok(file)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let start = Instant::now();
    let children = files
        .iter()
        .map(|f| {
            Command::new("sqlite3")
                .arg(path)
                .stdin(std::fs::File::open(f.path())?)
                .stdout(Stdio::null())
                .spawn()
        })
        .collect::<Result<Vec<_>, _>>()?;
    for mut child in children {
        anyhow::ensure!(child.wait()?.success(), "sqlite3 failed");
    }
    let took = start.elapsed();
    check_walked(path, numbers)?;
    Ok((numbers.len() * PATH.len()) as f64 / took.as_secs_f64())
}

/// Every raw transition applied: each workload ended deleted at version 8.
fn check_walked(path: &std::path::Path, numbers: &[usize]) -> anyhow::Result<()> {
    let ids: Vec<String> = numbers
        .iter()
        .map(|&n| format!("X'{}'", id(n).as_uuid().simple()))
        .collect();
    let sql = format!(
        "SELECT COUNT(*) FROM workloads WHERE state = 'deleted' AND version = 8 AND id IN ({})",
        ids.join(",")
    );
    let out = Command::new("sqlite3").arg(path).arg(sql).output()?;
    let done: usize = String::from_utf8_lossy(&out.stdout).trim().parse()?;
    anyhow::ensure!(
        done == numbers.len(),
        "raw run applied {done} of {} walks",
        numbers.len()
    );
    Ok(())
}

/// The raw engine through pgbench: each client walks its own workloads with the same UPDATE
/// (workload and version derived from pgbench's per-client counter `k`).
fn pgbench(pg: &TempPostgres, url: &str, clients: usize, each: usize) -> anyhow::Result<f64> {
    let first = clients * each;
    let script = format!(
        "\\set k :k + 1\n\
         \\set n {first} + :client_id * {each} + (:k - 1) / 7\n\
         \\set v (:k - 1) % 7 + 1\n\
         UPDATE workloads SET state = CASE state WHEN 'pending' THEN 'queued' \
         WHEN 'queued' THEN 'provisioning' WHEN 'provisioning' THEN 'running' \
         WHEN 'running' THEN 'stopping' WHEN 'stopping' THEN 'stopped' \
         WHEN 'stopped' THEN 'deleting' ELSE 'deleted' END, \
         reason = 'ready', version = version + 1, updated_at = :k::bigint, \
         placed_class = CASE WHEN :v::int = 2 THEN 'cpu-1c-2g' ELSE placed_class END, \
         driver = CASE WHEN :v::int = 2 THEN 'sim' ELSE driver END \
         WHERE id = ('00000000-0000-7000-8000-' || lpad(to_hex(:n::bigint), 12, '0'))::uuid \
         AND version = :v::bigint;\n"
    );
    let file = tempfile::NamedTempFile::new()?;
    std::fs::write(file.path(), script)?;
    let out = Command::new(pg.bin().join("pgbench"))
        .args(["-n", "-M", "prepared", "-D", "k=0", "-j", "2"])
        .args([
            "-c",
            &clients.to_string(),
            "-t",
            &(each * PATH.len()).to_string(),
            "-f",
        ])
        .arg(file.path())
        .arg(url)
        .output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    anyhow::ensure!(
        out.status.success(),
        "pgbench failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let walked: i64 = {
        let sql = "SELECT COUNT(*) FROM workloads WHERE state = 'deleted' AND version = 8";
        let out = Command::new("psql").args([url, "-tAc", sql]).output()?;
        String::from_utf8_lossy(&out.stdout).trim().parse()?
    };
    anyhow::ensure!(
        walked as usize == 2 * clients * each,
        "pgbench walked {walked} workloads"
    );
    stdout
        .lines()
        .find_map(|l| {
            l.strip_prefix("tps = ")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .ok_or_else(|| anyhow::anyhow!("no tps in pgbench output: {stdout}"))
}
