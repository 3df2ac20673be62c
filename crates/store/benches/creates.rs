//! Burst creates through the store alone: 200 at once from one tenant, by a user in a team,
//! with a roomy quota for the class at all three levels, so each create checks the tenant's,
//! the team's and the user's quota in its transaction under the tenant's locked quota row
//! (`check_quota`). Beside the lifecycle bench (the same burst through the gateway, the api and
//! the controller), this says how much of a create's time is the store's.
//!
//! `cargo bench -p einsora-store --bench creates` (BENCH_ROUNDS bursts per engine, default 5).

// A test harness: a failed unwrap is a failed test, and it reads its own environment.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::sync::Arc;
use std::time::Instant;

use einsora_core::ids::{TeamId, TenantId, UserId, WorkloadId};
use einsora_core::kind::WorkloadKind;
use einsora_core::reasons::Reason;
use einsora_core::region::Region;
use einsora_core::role::Role;
use einsora_store::{
    DatabaseUrl, NewUser, NewWorkload, QuotaClass, QuotaLimits, QuotaSubject, Store, UnitShape,
};
use einsora_testkit::TempPostgres;
use einsora_testkit::bench::{Report, Table, quantile, setting};
use einsora_testkit::fixtures;

const CREATES: usize = 200;
const CLASS: &str = "cpu-1c-2g";

fn main() -> anyhow::Result<()> {
    let rounds: usize = setting("BENCH_ROUNDS", 5)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut report = Report::start(
        "creates",
        "Store burst creates",
        "cargo bench -p einsora-store --bench creates",
    );
    let mut table = Table::new(&["engine", "round", "all done ms", "p50 ms", "p99 ms"], 2);
    let dir = tempfile::tempdir()?;
    let sqlite = format!("sqlite:{}", dir.path().join("creates.db").display());
    let postgres = TempPostgres::shared().fresh_database()?;
    for (engine, url) in [("SQLite", sqlite), ("Postgres", postgres)] {
        let url = DatabaseUrl::parse(&url)?;
        rt.block_on(async {
            let (store, _) = einsora_store::migrate(&url).await?;
            let (tenant, user) = quotas_on(&*store).await?;
            for round in 1..=rounds {
                let (all, mut ms) = burst(&store, tenant, user, round).await?;
                ms.sort_by(f64::total_cmp);
                table.row(vec![
                    engine.to_owned(),
                    round.to_string(),
                    format!("{all:.1}"),
                    format!("{:.1}", quantile(&ms, 0.5)),
                    format!("{:.1}", quantile(&ms, 0.99)),
                ]);
            }
            anyhow::Ok(())
        })?;
    }
    report.say(format!(
        "{CREATES} creates at once through `Store::create_workload`, one tenant, a user in a \
         team, each level with a roomy quota for {CLASS}; ms from the burst's start to each \
         create's return (the store's pool and writer as the api has them, no HTTP):"
    ));
    report.table(&table);
    report.finish()?;
    Ok(())
}

/// A tenant and a user in a team, the tenant, the team and the user each with a roomy quota.
async fn quotas_on(store: &dyn Store) -> anyhow::Result<(TenantId, UserId)> {
    let roomy = u32::try_from(CREATES * 100).unwrap_or(u32::MAX);
    let class = QuotaClass::Class(CLASS.into());
    let tenant = fixtures::tenant(store, class.clone(), Some(roomy)).await;
    let user = UserId::new();
    let new_user = NewUser {
        id: user,
        tenant_id: tenant,
        email: "bench@example.com".into(),
        display_name: "Bench".into(),
        role: Role::Member,
        phc: "x".into(),
    };
    store.create_user(&new_user).await?;
    let team = store.create_team(tenant, TeamId::new(), "bench").await?;
    store.set_user_team(tenant, user, Some(team.id)).await?;
    for subject in [QuotaSubject::Team(team.id), QuotaSubject::User(user)] {
        let limits = QuotaLimits::units(Some(roomy));
        store.set_quota_of(tenant, subject, &class, limits).await?;
    }
    Ok((tenant, user))
}

/// One burst: the whole burst's ms and each create's.
async fn burst(
    store: &Arc<dyn Store>,
    tenant: TenantId,
    user: UserId,
    round: usize,
) -> anyhow::Result<(f64, Vec<f64>)> {
    let start = Instant::now();
    let tasks: Vec<_> = (0..CREATES)
        .map(|i| {
            let store = Arc::clone(store);
            let new = NewWorkload {
                id: WorkloadId::new(),
                tenant_id: tenant,
                owner: Some(user),
                kind: WorkloadKind::Notebook,
                name: format!("r{round}-{i}"),
                gpu_class: CLASS.into(),
                units: 1,
                shape: UnitShape {
                    cpus: 1,
                    memory_gib: 2,
                },
                image: "jupyterlab".into(),
                region: Region::new("local").unwrap(),
                fallback: vec![],
                fallback_after_s: None,
                params: "{}".into(),
                trace_context: None,
            };
            tokio::spawn(async move {
                store.create_workload(&new, &Reason::Ready).await?;
                anyhow::Ok(start.elapsed().as_secs_f64() * 1000.0)
            })
        })
        .collect();
    let mut ms = Vec::with_capacity(CREATES);
    for task in tasks {
        ms.push(task.await??);
    }
    Ok((start.elapsed().as_secs_f64() * 1000.0, ms))
}
