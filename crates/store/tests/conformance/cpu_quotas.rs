//! Quotas in CPUs and memory for CPU classes, on both engines: each limit a row states counts
//! the class's shape per unit, a refusal names the quota and what it counted, a start checks
//! them again, and concurrent creates from two stores never overrun any of them.

use std::sync::Arc;

use einsora_core::ids::{TeamId, TenantId, UserId};
use einsora_core::lifecycle::State;
use einsora_store::{
    DatabaseUrl, NewWorkload, QuotaClass, QuotaHolder, QuotaLimits, QuotaMeasure, QuotaSubject,
    StoreError,
};
use einsora_testkit::fixtures::path_to;
use sqlx::migrate::Migrator;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{Connection, PgConnection, SqliteConnection};

use crate::harness::{TestDb, new_workload, reason, shape_of, step, tenant};
use crate::teams::{burst_of, by_of, user};

/// 4 CPUs and 16 GiB a workload.
const CLASS: &str = "cpu-4c-16g";

fn limits(units: Option<u32>, cpus: Option<u32>, memory_gib: Option<u32>) -> QuotaLimits {
    QuotaLimits {
        units,
        cpus,
        memory_gib,
    }
}

/// The tenant's row: its CPU limit, then its memory limit, then its limit in units refuses
/// the create that would pass it, each saying so in its own terms; a start checks them again;
/// a team's and a user's rows that limit CPUs or memory alone are kept and listed, and go
/// when set to no limit.
pub async fn cpu_and_memory_limits_refuse_what_would_pass_them(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    let class = QuotaClass::Class(CLASS.into());
    let set = |limits: QuotaLimits| {
        let class = class.clone();
        async move {
            store
                .set_quota_of(t, QuotaSubject::Tenant, &class, limits)
                .await
                .unwrap();
        }
    };
    let new = |name: &str| NewWorkload {
        gpu_class: CLASS.into(),
        shape: shape_of(CLASS),
        ..new_workload(t, name)
    };
    set(limits(None, Some(10), None)).await;
    let a = store.create_workload(&new("a"), &reason()).await.unwrap();
    store.create_workload(&new("b"), &reason()).await.unwrap();
    let refused = store
        .create_workload(&new("c"), &reason())
        .await
        .unwrap_err();
    assert_eq!(
        refused.to_string(),
        "the tenant's quota for cpu-4c-16g exceeded: 8 CPUs held, 4 requested, limit 10"
    );

    set(limits(Some(5), None, Some(40))).await;
    let refused = store
        .create_workload(&new("c"), &reason())
        .await
        .unwrap_err();
    assert_eq!(
        refused.to_string(),
        "the tenant's quota for cpu-4c-16g exceeded: 32 GiB of memory held, 16 requested, \
         limit 40"
    );
    set(limits(Some(2), Some(100), Some(100))).await;
    let refused = store
        .create_workload(&new("c"), &reason())
        .await
        .unwrap_err();
    assert!(
        matches!(
            refused,
            StoreError::QuotaExceeded {
                measure: QuotaMeasure::Units,
                held: 2,
                requested: 1,
                limit: 2,
                ..
            }
        ),
        "{refused}"
    );
    set(limits(None, Some(12), Some(48))).await;
    store.create_workload(&new("c"), &reason()).await.unwrap();

    // A stopped workload starts again only within the limits.
    let mut stopped = a;
    for &to in path_to(State::Stopped) {
        stopped = step(store, &stopped, to).await;
    }
    set(limits(None, Some(10), None)).await;
    let refused = store
        .start(&stopped, shape_of(CLASS), &reason())
        .await
        .unwrap_err();
    assert!(
        matches!(
            refused,
            StoreError::QuotaExceeded {
                measure: QuotaMeasure::Cpus,
                held: 8,
                requested: 4,
                limit: 10,
                ..
            }
        ),
        "{refused}"
    );
    set(limits(None, Some(12), None)).await;
    store
        .start(&stopped, shape_of(CLASS), &reason())
        .await
        .unwrap();

    // A team's and a user's rows with CPU or memory limits alone.
    let ann = user(store, t, "ann@example.com").await;
    let ml = store.create_team(t, TeamId::new(), "ml").await.unwrap();
    let team_limits = limits(None, Some(6), None);
    let user_limits = limits(None, None, Some(20));
    store
        .set_quota_of(t, QuotaSubject::Team(ml.id), &class, team_limits)
        .await
        .unwrap();
    store
        .set_quota_of(t, QuotaSubject::User(ann), &class, user_limits)
        .await
        .unwrap();
    let quotas = store.quotas_of(t).await.unwrap();
    let listed = |subject| {
        quotas
            .iter()
            .find(|q| q.subject == subject && q.class == class)
            .map(|q| (q.limits, q.held))
    };
    assert_eq!(
        listed(QuotaSubject::Tenant),
        Some((limits(None, Some(12), None), 3))
    );
    assert_eq!(listed(QuotaSubject::Team(ml.id)), Some((team_limits, 0)));
    assert_eq!(listed(QuotaSubject::User(ann)), Some((user_limits, 0)));
    for subject in [QuotaSubject::Team(ml.id), QuotaSubject::User(ann)] {
        store
            .set_quota_of(t, subject, &class, QuotaLimits::default())
            .await
            .unwrap();
    }
    assert!(
        store
            .quotas_of(t)
            .await
            .unwrap()
            .iter()
            .all(|q| q.subject == QuotaSubject::Tenant)
    );
}

/// A user's limit of 8 CPUs, their team's of 48 GiB (two members), the tenant's of 40 CPUs: 60
/// creates of 4-CPU, 16-GiB workloads at once from two stores make exactly what fits each,
/// and each refusal names the quota that refused and what it counted.
pub async fn concurrent_creates_overrun_no_cpu_or_memory_limit(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    let (ann, bob, cat) = (
        user(store, t, "ann@example.com").await,
        user(store, t, "bob@example.com").await,
        user(store, t, "cat@example.com").await,
    );
    let ml = store.create_team(t, TeamId::new(), "ml").await.unwrap();
    store.set_user_team(t, ann, Some(ml.id)).await.unwrap();
    store.set_user_team(t, bob, Some(ml.id)).await.unwrap();
    let class = QuotaClass::Class(CLASS.into());
    for (subject, limits) in [
        (QuotaSubject::Tenant, limits(None, Some(40), None)),
        (QuotaSubject::Team(ml.id), limits(None, None, Some(48))),
        (QuotaSubject::User(ann), limits(None, Some(8), None)),
    ] {
        store
            .set_quota_of(t, subject, &class, limits)
            .await
            .unwrap();
    }
    let stores = [Arc::clone(&db.store), db.open_again().await];

    // Ann alone: her own 8 CPUs, two workloads.
    let (made, refused) = burst_of(&stores, CLASS, t, &[ann], 20, "a").await;
    assert_eq!(made, 2);
    let hers = (
        QuotaHolder::User("ann@example.com".into()),
        QuotaMeasure::Cpus,
    );
    assert!(refused.iter().all(|r| *r == hers), "{refused:?}");
    // Bob then: the team's 48 GiB leaves him one.
    let (made, refused) = burst_of(&stores, CLASS, t, &[bob], 20, "b").await;
    assert_eq!(made, 1);
    let teams = (QuotaHolder::Team("ml".into()), QuotaMeasure::MemoryGib);
    assert!(refused.iter().all(|r| *r == teams), "{refused:?}");
    // Cat, in no team: the tenant's 40 CPUs leave her seven.
    let (made, refused) = burst_of(&stores, CLASS, t, &[cat], 20, "c").await;
    assert_eq!(made, 7);
    let tenants = (QuotaHolder::Tenant, QuotaMeasure::Cpus);
    assert!(refused.iter().all(|r| *r == tenants), "{refused:?}");
    // And no more for anyone.
    let (made, _) = burst_of(&stores, CLASS, t, &[cat, bob], 10, "d").await;
    assert_eq!(made, 0);

    let held: Vec<_> = store
        .quotas_of(t)
        .await
        .unwrap()
        .into_iter()
        .filter(|q| q.class == class)
        .map(|q| (q.subject, q.held))
        .collect();
    assert_eq!(
        held,
        [
            (QuotaSubject::Tenant, 10),
            (QuotaSubject::Team(ml.id), 3),
            (QuotaSubject::User(ann), 2),
        ]
    );
    let message = by_of(CLASS, t, cat, "e");
    let refused = store
        .create_workload(&message, &reason())
        .await
        .unwrap_err();
    assert_eq!(
        refused.to_string(),
        "the tenant's quota for cpu-4c-16g exceeded: 40 CPUs held, 4 requested, limit 40"
    );
}

/// A team's and a user's rows from before quotas in CPUs and memory (migration 17) keep their
/// limits in units through migration 18, which remakes their tables on SQLite.
async fn earlier_quota_rows_keep_their_limits(url: DatabaseUrl) {
    let dir = match &url {
        DatabaseUrl::Sqlite { .. } => "sqlite",
        DatabaseUrl::Postgres { .. } => "postgres",
    };
    let migrations = format!("{}/../../migrations/{dir}", env!("CARGO_MANIFEST_DIR"));
    let migrator = Migrator::new(std::path::Path::new(&migrations))
        .await
        .unwrap();
    match &url {
        DatabaseUrl::Sqlite { path } => {
            let options = SqliteConnectOptions::new()
                .filename(path)
                .create_if_missing(true);
            let mut conn = SqliteConnection::connect_with(&options).await.unwrap();
            migrator.run_to(17, &mut conn).await.unwrap();
        }
        DatabaseUrl::Postgres { url, .. } => {
            let mut conn = PgConnection::connect(url).await.unwrap();
            migrator.run_to(17, &mut conn).await.unwrap();
        }
    }
    let (tenant, team, ann) = (TenantId::new(), TeamId::new(), UserId::new());
    // An ID as each engine's SQL writes it: 16 bytes, or a UUID.
    let [t, m, a] = [tenant.as_uuid(), team.as_uuid(), ann.as_uuid()].map(|id| match &url {
        DatabaseUrl::Sqlite { .. } => format!("X'{}'", id.simple()),
        DatabaseUrl::Postgres { .. } => format!("'{id}'::uuid"),
    });
    einsora_testkit::db::execute(
        &url,
        &format!(
            "INSERT INTO tenants (id, slug, name, trusted, created_at) VALUES ({t}, 't', 'T', 1, 0); \
             INSERT INTO teams (id, tenant_id, name, created_at) VALUES ({m}, {t}, 'ml', 0); \
             INSERT INTO users (id, tenant_id, email, display_name, created_at, team_id) \
             VALUES ({a}, {t}, 'ann@example.com', 'Ann', 0, {m}); \
             INSERT INTO team_quotas (team_id, gpu_class, limit_units) VALUES ({m}, '{CLASS}', 3); \
             INSERT INTO user_quotas (user_id, gpu_class, limit_units) VALUES ({a}, '{CLASS}', 2);"
        ),
    );
    let (store, report) = einsora_store::migrate(&url).await.unwrap();
    assert!(report.applied.contains(&18), "{report:?}");
    let class = QuotaClass::Class(CLASS.into());
    let quotas = store.quotas_of(tenant).await.unwrap();
    let limits_of = |subject| {
        quotas
            .iter()
            .find(|q| q.subject == subject && q.class == class)
            .map(|q| q.limits)
    };
    assert_eq!(
        limits_of(QuotaSubject::Team(team)),
        Some(QuotaLimits::units(Some(3)))
    );
    assert_eq!(
        limits_of(QuotaSubject::User(ann)),
        Some(QuotaLimits::units(Some(2)))
    );
    // Deleting the team still takes its rows with it (the remade table's reference).
    assert!(store.delete_team(tenant, team).await.unwrap());
    let left = store.quotas_of(tenant).await.unwrap();
    assert_eq!(left.len(), 1, "{left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_quota_rows_keep_their_limits_through_migration_18() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("einsora.db");
    earlier_quota_rows_keep_their_limits(DatabaseUrl::Sqlite { path }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_quota_rows_keep_their_limits_through_migration_18() {
    let url = einsora_testkit::TempPostgres::shared()
        .fresh_database()
        .unwrap();
    earlier_quota_rows_keep_their_limits(DatabaseUrl::parse(&url).unwrap()).await;
}
