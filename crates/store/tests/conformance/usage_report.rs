use einsora_core::ids::{TeamId, TenantId, UserId};
use einsora_core::role::Role;
use einsora_store::{
    NewUser, NewWorkload, Store, UsageGrouping, UsageRecord, UsageReportQuery, UsageReportRow,
};
use time::Duration;
use time::macros::datetime;

use einsora_testkit::fixtures::{owner_of, usage};

use crate::harness::{TestDb, new_workload, reason, tenant};

async fn user(store: &dyn Store, tenant: TenantId, email: &str) -> UserId {
    let id = UserId::new();
    let new = NewUser {
        id,
        tenant_id: tenant,
        email: email.into(),
        display_name: email.into(),
        role: Role::Member,
        phc: "$argon2id$unused".into(),
    };
    store.create_user(&new).await.unwrap();
    id
}

async fn owned(store: &dyn Store, tenant: TenantId, owner: UserId, name: &str) -> NewWorkload {
    let new = NewWorkload {
        owner: Some(owner),
        ..new_workload(tenant, name)
    };
    store.create_workload(&new, &reason()).await.unwrap();
    new
}

/// The report's rows, in an order both engines agree on.
async fn report(
    store: &dyn Store,
    tenant: TenantId,
    query: &UsageReportQuery,
) -> Vec<(Option<String>, Option<String>, String, u32, u64, u64)> {
    let mut rows: Vec<_> = store
        .usage_report(tenant, query)
        .await
        .unwrap()
        .into_iter()
        .map(|r: UsageReportRow| {
            (
                r.group_id.map(|id| id.to_string()),
                r.label,
                r.placed_class,
                r.workloads,
                r.seconds,
                r.unit_seconds,
            )
        })
        .collect();
    rows.sort();
    rows
}

/// A period's records summed in the database by class, by user and by team (then class),
/// this tenant's only, and a member's report of their own workloads only.
pub async fn usage_is_summed_by_user_team_and_class(db: TestDb) {
    let store = &*db.store;
    let (t, other) = (tenant(store, None).await, tenant(store, None).await);
    let alice = user(store, t, "alice@acme.example").await;
    let bob = user(store, t, "bob@acme.example").await;
    let a1 = owned(store, t, alice, "a1").await;
    let a2 = owned(store, t, alice, "a2").await;
    let b1 = owned(store, t, bob, "b1").await;
    // Its owner has no user row (gone): the group keeps the ID, without a label.
    let nobody = owner_of(t);
    let n1 = owned(store, t, nobody, "n1").await;
    let theirs = owned(store, other, owner_of(other), "theirs").await;
    let h0 = datetime!(2025-03-01 10:00 UTC);
    let hour = |n: i64| h0 + Duration::hours(n);
    let gpu = |r: UsageRecord| UsageRecord {
        placed_class: "nvidia-a10-24g".into(),
        units: 2,
        ..r
    };
    for r in [
        usage(t, a1.id, hour(0), 3600),
        usage(t, a1.id, hour(1), 1800),
        gpu(usage(t, a2.id, hour(1), 1800)),
        usage(t, b1.id, hour(1), 60),
        usage(t, n1.id, hour(1), 600),
        // Outside the period, and another tenant's.
        usage(t, a1.id, hour(2), 3600),
        usage(t, b1.id, hour(-1), 3600),
        usage(other, theirs.id, hour(1), 3600),
    ] {
        store.record_usage(&r).await.unwrap();
    }
    let query = |by, owner| UsageReportQuery {
        from: hour(0),
        to: hour(2),
        by,
        owner,
    };
    let cpu = || "cpu-1c-2g".to_owned();
    let a10 = || "nvidia-a10-24g".to_owned();

    assert_eq!(
        report(store, t, &query(UsageGrouping::Class, None)).await,
        [
            (None, Some(cpu()), cpu(), 3, 6060, 6060),
            (None, Some(a10()), a10(), 1, 1800, 3600),
        ],
        "by class: [from, to), this tenant's only, units × seconds"
    );
    let id = |u: UserId| Some(u.to_string());
    let mut by_user = vec![
        (
            id(alice),
            Some("alice@acme.example".into()),
            cpu(),
            1,
            5400,
            5400,
        ),
        (
            id(alice),
            Some("alice@acme.example".into()),
            a10(),
            1,
            1800,
            3600,
        ),
        (id(bob), Some("bob@acme.example".into()), cpu(), 1, 60, 60),
        (id(nobody), None, cpu(), 1, 600, 600),
    ];
    by_user.sort();
    assert_eq!(
        report(store, t, &query(UsageGrouping::User, None)).await,
        by_user,
        "by user, then class"
    );

    assert_eq!(
        report(store, t, &query(UsageGrouping::User, Some(bob))).await,
        [(id(bob), Some("bob@acme.example".into()), cpu(), 1, 60, 60)],
        "a member's report: their own workloads' only"
    );
    assert_eq!(
        report(store, t, &query(UsageGrouping::Class, Some(alice))).await,
        [
            (None, Some(cpu()), cpu(), 1, 5400, 5400),
            (None, Some(a10()), a10(), 1, 1800, 3600),
        ]
    );
    assert_eq!(
        report(store, other, &query(UsageGrouping::Class, None)).await,
        [(None, Some(cpu()), cpu(), 1, 3600, 3600)],
        "another tenant's report has none of this one's"
    );

    // By team: the team its owner is in now. Alice is in research; Bob, and the owner with no
    // user row, in none.
    let research = TeamId::new();
    store.create_team(t, research, "research").await.unwrap();
    store.set_user_team(t, alice, Some(research)).await.unwrap();
    let team = || Some(research.to_string());
    let mut research_rows = vec![
        (team(), Some("research".into()), cpu(), 1, 5400, 5400),
        (team(), Some("research".into()), a10(), 1, 1800, 3600),
    ];
    research_rows.sort();
    let mut by_team = research_rows.clone();
    by_team.push((None, None, cpu(), 2, 660, 660));
    by_team.sort();
    assert_eq!(
        report(store, t, &query(UsageGrouping::Team, None)).await,
        by_team,
        "by team, then class; those in no team together"
    );
    assert_eq!(
        report(store, t, &query(UsageGrouping::Team, Some(alice))).await,
        research_rows,
        "a member's report by team: their own workloads' only"
    );
    // Bob joins research: his past usage goes with him.
    store.set_user_team(t, bob, Some(research)).await.unwrap();
    let mut by_team = vec![
        (team(), Some("research".into()), cpu(), 2, 5460, 5460),
        (team(), Some("research".into()), a10(), 1, 1800, 3600),
        (None, None, cpu(), 1, 600, 600),
    ];
    by_team.sort();
    assert_eq!(
        report(store, t, &query(UsageGrouping::Team, None)).await,
        by_team
    );
}
