//! Lifecycle transitions (compare-and-swap + event insert) through the store, on SQLite and on
//! Postgres, with 1 and 16 concurrent writers, beside the raw engine running the same
//! transaction on the same schema in the same run: the sqlite3 CLI and pgbench.
//!
//! `cargo bench -p einsora-store --bench transitions` (BENCH_SECONDS sets each phase's length).

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use einsora_core::ids::{TenantId, WorkloadId};
use einsora_core::kind::WorkloadKind;
use einsora_core::lifecycle::State;
use einsora_core::reasons::Reason;
use einsora_core::region::Region;
use einsora_store::{DatabaseUrl, NewTenant, NewWorkload, QuotaClass, Store, Transition};
use einsora_testkit::TempPostgres;
use uuid::Uuid;

/// The cycle each writer drives its own workload around: four plain transitions.
const CYCLE: [State; 4] = [
    State::Queued,
    State::Provisioning,
    State::Failed,
    State::Pending,
];
const WRITERS: [usize; 2] = [1, 16];

fn main() -> anyhow::Result<()> {
    let secs: u64 = std::env::var("BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let phase = Duration::from_secs(secs);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    println!(
        "{:<9} {:>7} {:>14} {:>14} {:>6}",
        "engine", "writers", "einsora tx/s", "raw tx/s", "ratio"
    );
    let dir = tempfile::tempdir()?;
    for writers in WRITERS {
        let path = dir.path().join(format!("bench-{writers}.db"));
        let url = DatabaseUrl::parse(&format!("sqlite:{}", path.display()))?;
        let (store, tenant, ids) = rt.block_on(setup(&url, writers * 2))?;
        let ours = rt.block_on(drive(&store, &ids[..writers], phase))?;
        drop(store);
        let raw = sqlite_raw(&path, tenant, &ids[writers..], phase)?;
        report("sqlite", writers, ours, raw);
    }
    let pg = TempPostgres::shared();
    for writers in WRITERS {
        let raw_url = pg.fresh_database()?;
        let url = DatabaseUrl::parse(&raw_url)?;
        let (store, tenant, ids) = rt.block_on(setup(&url, writers * 2))?;
        let ours = rt.block_on(drive(&store, &ids[..writers], phase))?;
        drop(store);
        let raw = pgbench(pg, &raw_url, tenant, &ids[writers..], phase)?;
        report("postgres", writers, ours, raw);
    }
    Ok(())
}

fn report(engine: &str, writers: usize, ours: f64, raw: f64) {
    println!(
        "{engine:<9} {writers:>7} {ours:>14.0} {raw:>14.0} {:>6.2}",
        ours / raw
    );
}

/// A migrated database with one tenant and `n` pending workloads.
async fn setup(
    url: &DatabaseUrl,
    n: usize,
) -> anyhow::Result<(Arc<dyn Store>, TenantId, Vec<WorkloadId>)> {
    let store = einsora_store::open(url).await?;
    store.migrate().await?;
    let tenant = TenantId::new();
    let new_tenant = NewTenant {
        id: tenant,
        slug: "bench".into(),
        name: "Bench".into(),
        trusted: true,
    };
    store.create_tenant(&new_tenant).await?;
    store.set_quota(tenant, &QuotaClass::Default, None).await?;
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        let w = NewWorkload {
            id: WorkloadId::new(),
            tenant_id: tenant,
            kind: WorkloadKind::Notebook,
            name: format!("bench-{i}"),
            gpu_class: "cpu-1c-2g".into(),
            units: 1,
            image: "jupyterlab".into(),
            region: Region::new("local")?,
            fallback: vec![],
            fallback_after_s: None,
            params: "{}".into(),
        };
        ids.push(store.create_workload(&w, &Reason::Ready).await?.id);
    }
    Ok((store, tenant, ids))
}

/// Each writer drives its own workload around the cycle for `phase`; returns transitions/s.
async fn drive(store: &Arc<dyn Store>, ids: &[WorkloadId], phase: Duration) -> anyhow::Result<f64> {
    let start = Instant::now();
    let tasks: Vec<_> = ids
        .iter()
        .map(|&id| {
            let store = Arc::clone(store);
            tokio::spawn(async move {
                let mut w = store
                    .workload(id)
                    .await?
                    .ok_or_else(|| anyhow::anyhow!("gone"))?;
                let mut done = 0u64;
                while start.elapsed() < phase {
                    let to = CYCLE[done as usize % CYCLE.len()];
                    let change = Transition {
                        workload: &w,
                        to,
                        reason: &Reason::Ready,
                        admission: None,
                        fence: None,
                    };
                    w = store.transition(&change).await?;
                    done += 1;
                }
                anyhow::Ok(done)
            })
        })
        .collect();
    let mut total = 0;
    for t in tasks {
        total += t.await??;
    }
    Ok(total as f64 / start.elapsed().as_secs_f64())
}

fn blob(id: &Uuid) -> String {
    format!("X'{}'", id.simple())
}

/// The same transactions through the sqlite3 CLI: one process per writer, each on its own
/// workload, with the pragmas the store sets. Runs a fixed count sized from a short probe.
fn sqlite_raw(
    path: &std::path::Path,
    tenant: TenantId,
    ids: &[WorkloadId],
    phase: Duration,
) -> anyhow::Result<f64> {
    let script = |id: &WorkloadId, count: usize| {
        let mut sql = String::from(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=5000; \
             PRAGMA foreign_keys=ON;\n",
        );
        let mut state = State::Pending;
        for i in 0..count {
            let to = CYCLE[i % CYCLE.len()];
            sql.push_str(&format!(
                "BEGIN IMMEDIATE; UPDATE workloads SET state = '{to}', reason = 'ready', \
                 version = version + 1, updated_at = {now} WHERE id = {id} AND version = {v} \
                 AND state = '{state}'; INSERT INTO workload_events (id, workload_id, tenant_id, \
                 from_state, to_state, reason, attempt, at) VALUES ({eid}, {id}, {tenant}, \
                 '{state}', '{to}', 'ready', 0, {now}); COMMIT;\n",
                now = i,
                id = blob(id.as_uuid()),
                v = i + 1,
                eid = blob(&Uuid::now_v7()),
                tenant = blob(tenant.as_uuid()),
            ));
            state = to;
        }
        sql
    };
    let run = |scripts: Vec<String>| -> anyhow::Result<Duration> {
        let start = Instant::now();
        let children: Vec<_> = scripts
            .into_iter()
            .map(|sql| {
                let file = tempfile::NamedTempFile::new()?;
                std::fs::write(file.path(), sql)?;
                let child = Command::new("sqlite3")
                    .arg(path)
                    .stdin(std::fs::File::open(file.path())?)
                    .stdout(Stdio::null())
                    .spawn()?;
                anyhow::Ok((child, file))
            })
            .collect::<Result<_, _>>()?;
        for (mut child, _file) in children {
            anyhow::ensure!(child.wait()?.success(), "sqlite3 failed");
        }
        Ok(start.elapsed())
    };
    // Size the run to about one phase, measured on the part of the cycle's versions left.
    let probe = 400;
    let took = run(ids.iter().map(|id| script(id, probe)).collect())?;
    let per_writer = probe as f64 / took.as_secs_f64() * phase.as_secs_f64();
    let count = ((per_writer as usize) / CYCLE.len()).max(1) * CYCLE.len();
    // The probe moved each workload on by `probe` versions: continue from there.
    let scripts = ids
        .iter()
        .map(|id| script(id, probe + count).split_inclusive('\n').skip(1 + probe).collect())
        .map(|body: String| format!("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=5000; PRAGMA foreign_keys=ON;\n{body}"))
        .collect();
    let took = run(scripts)?;
    Ok((count * ids.len()) as f64 / took.as_secs_f64())
}

/// The same transaction through pgbench, each client on its own workload.
fn pgbench(
    pg: &TempPostgres,
    url: &str,
    tenant: TenantId,
    ids: &[WorkloadId],
    phase: Duration,
) -> anyhow::Result<f64> {
    let ids_sql: Vec<String> = ids.iter().map(|id| format!("'{id}'::uuid")).collect();
    let script = format!(
        "\\set n :client_id + 1\n\
         BEGIN;\n\
         UPDATE workloads SET state = CASE state WHEN 'pending' THEN 'queued' \
         WHEN 'queued' THEN 'provisioning' WHEN 'provisioning' THEN 'failed' ELSE 'pending' END, \
         reason = 'ready', version = version + 1, updated_at = 1 \
         WHERE id = (ARRAY[{ids}])[:n] RETURNING state AS to_state, version \\gset\n\
         INSERT INTO workload_events (id, workload_id, tenant_id, from_state, to_state, reason, \
         attempt, at) VALUES (gen_random_uuid(), (ARRAY[{ids}])[:n], '{tenant}', 'x', \
         :'to_state', 'ready', 0, 1);\n\
         END;\n",
        ids = ids_sql.join(", "),
    );
    let file = tempfile::NamedTempFile::new()?;
    std::fs::write(file.path(), script)?;
    let clients = ids.len().to_string();
    let out = Command::new(pg.bin().join("pgbench"))
        .args(["-n", "-M", "prepared", "-c", &clients, "-j", "2", "-T"])
        .arg(phase.as_secs().to_string())
        .arg("-f")
        .arg(file.path())
        .arg(url)
        .output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    anyhow::ensure!(
        out.status.success(),
        "pgbench failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
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
