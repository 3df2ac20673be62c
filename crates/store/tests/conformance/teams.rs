//! Teams and the quotas of a tenant, its teams and its users, on both engines: concurrent
//! creates from two stores never overrun any of the three, and a refusal names whose quota it
//! was.

use std::sync::Arc;

use einsora_core::ids::{TeamId, TenantId, UserId};
use einsora_core::role::Role;
use einsora_store::{
    NewUser, NewWorkload, QuotaClass, QuotaHolder, QuotaLimits, QuotaMeasure, QuotaSubject, Store,
    StoreError, Taken,
};

use crate::harness::{TestDb, new_workload, reason, shape_of, tenant};

const CLASS: &str = "cpu-1c-2g";

pub(crate) async fn user(store: &dyn Store, tenant: TenantId, email: &str) -> UserId {
    let id = UserId::new();
    let new = NewUser {
        id,
        tenant_id: tenant,
        email: email.into(),
        display_name: email.into(),
        role: Role::Member,
        phc: "x".into(),
    };
    store.create_user(&new).await.unwrap();
    id
}

/// A `class` workload by `owner`, of the class's shape in the built-in catalog.
pub(crate) fn by_of(class: &str, tenant: TenantId, owner: UserId, name: &str) -> NewWorkload {
    NewWorkload {
        owner: Some(owner),
        gpu_class: class.into(),
        shape: shape_of(class),
        ..new_workload(tenant, name)
    }
}

fn by(tenant: TenantId, owner: UserId, name: &str) -> NewWorkload {
    by_of(CLASS, tenant, owner, name)
}

/// Creates `n` workloads of `class` at once, each by `owners[i % len]`, from two stores; the
/// refusals, by whose quota refused them and what it counted.
pub(crate) async fn burst_of(
    stores: &[Arc<dyn Store>; 2],
    class: &str,
    tenant: TenantId,
    owners: &[UserId],
    n: usize,
    tag: &str,
) -> (usize, Vec<(QuotaHolder, QuotaMeasure)>) {
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let store = Arc::clone(&stores[i % 2]);
            let w = by_of(
                class,
                tenant,
                owners[i % owners.len()],
                &format!("{tag}{i}"),
            );
            tokio::spawn(async move { store.create_workload(&w, &reason()).await })
        })
        .collect();
    let (mut made, mut refused) = (0, Vec::new());
    for task in tasks {
        match task.await.unwrap() {
            Ok(_) => made += 1,
            Err(StoreError::QuotaExceeded {
                holder, measure, ..
            }) => refused.push((holder, measure)),
            Err(e) => panic!("unexpected: {e}"),
        }
    }
    (made, refused)
}

/// [`burst_of`] `cpu-1c-2g`, the refusals by whose quota refused them.
async fn burst(
    stores: &[Arc<dyn Store>; 2],
    tenant: TenantId,
    owners: &[UserId],
    n: usize,
    tag: &str,
) -> (usize, Vec<QuotaHolder>) {
    let (made, refused) = burst_of(stores, CLASS, tenant, owners, n, tag).await;
    (
        made,
        refused.into_iter().map(|(holder, _)| holder).collect(),
    )
}

/// A user's limit of 2, their team's of 3 (two members), the tenant's of 4: 40 creates at once
/// from two stores make exactly what fits each, and each refusal names the quota that refused.
pub async fn concurrent_creates_overrun_no_users_teams_or_tenants_quota(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, Some(4)).await;
    let (ann, bob, cat) = (
        user(store, t, "ann@example.com").await,
        user(store, t, "bob@example.com").await,
        user(store, t, "cat@example.com").await,
    );
    let ml = store.create_team(t, TeamId::new(), "ml").await.unwrap();
    assert!(matches!(
        store.create_team(t, TeamId::new(), "ml").await,
        Err(StoreError::Taken(Taken::TeamName(_)))
    ));
    store.set_user_team(t, ann, Some(ml.id)).await.unwrap();
    store.set_user_team(t, bob, Some(ml.id)).await.unwrap();
    let class = QuotaClass::Class(CLASS.into());
    store
        .set_quota_of(
            t,
            QuotaSubject::User(ann),
            &class,
            QuotaLimits::units(Some(2)),
        )
        .await
        .unwrap();
    store
        .set_quota_of(
            t,
            QuotaSubject::Team(ml.id),
            &class,
            QuotaLimits::units(Some(3)),
        )
        .await
        .unwrap();
    let stores = [Arc::clone(&db.store), db.open_again().await];

    // Ann alone: her own 2.
    let (made, refused) = burst(&stores, t, &[ann], 20, "a").await;
    assert_eq!(made, 2);
    assert!(
        refused
            .iter()
            .all(|h| *h == QuotaHolder::User("ann@example.com".into()))
    );
    // Bob then: the team's 3 leaves him 1.
    let (made, refused) = burst(&stores, t, &[bob], 10, "b").await;
    assert_eq!(made, 1);
    assert!(refused.iter().all(|h| *h == QuotaHolder::Team("ml".into())));
    // Cat, in no team: the tenant's 4 leaves her 1.
    let (made, refused) = burst(&stores, t, &[cat], 10, "c").await;
    assert_eq!(made, 1);
    assert!(refused.iter().all(|h| *h == QuotaHolder::Tenant));

    let quotas = store.quotas_of(t).await.unwrap();
    let held = |subject| {
        quotas
            .iter()
            .find(|q| q.subject == subject && q.class == class)
            .map(|q| (q.limits.units, q.held))
    };
    assert_eq!(held(QuotaSubject::Tenant), Some((Some(4), 4)));
    assert_eq!(held(QuotaSubject::Team(ml.id)), Some((Some(3), 3)));
    assert_eq!(held(QuotaSubject::User(ann)), Some((Some(2), 2)));
    let message = StoreError::QuotaExceeded {
        holder: QuotaHolder::Team("ml".into()),
        class: CLASS.into(),
        measure: QuotaMeasure::Units,
        held: 3,
        requested: 1,
        limit: 3,
    };
    assert_eq!(
        message.to_string(),
        "team \"ml\"'s quota for cpu-1c-2g exceeded: 3 held, 1 requested, limit 3"
    );
}

/// Removing a limit, moving a user out of a team and deleting a team each take effect on the
/// next create; another tenant's team, user or quota can't be touched.
pub async fn team_and_user_quotas_follow_their_changes(db: TestDb) {
    let store = &*db.store;
    let t = tenant(store, None).await;
    let ann = user(store, t, "ann@example.com").await;
    let ml = store.create_team(t, TeamId::new(), "ml").await.unwrap();
    store.set_user_team(t, ann, Some(ml.id)).await.unwrap();
    let class = QuotaClass::Class(CLASS.into());
    store
        .set_quota_of(
            t,
            QuotaSubject::Team(ml.id),
            &class,
            QuotaLimits::units(Some(0)),
        )
        .await
        .unwrap();
    let refused = store.create_workload(&by(t, ann, "one"), &reason()).await;
    assert!(matches!(refused, Err(StoreError::QuotaExceeded { .. })));
    store.set_user_team(t, ann, None).await.unwrap();
    store
        .create_workload(&by(t, ann, "one"), &reason())
        .await
        .unwrap();
    store.set_user_team(t, ann, Some(ml.id)).await.unwrap();
    assert_eq!(store.teams(t).await.unwrap()[0].members, 1);
    assert!(store.delete_team(t, ml.id).await.unwrap());
    store
        .create_workload(&by(t, ann, "two"), &reason())
        .await
        .unwrap();
    assert!(
        store
            .quotas_of(t)
            .await
            .unwrap()
            .iter()
            .all(|q| q.subject == QuotaSubject::Tenant)
    );

    store
        .set_quota_of(
            t,
            QuotaSubject::User(ann),
            &class,
            QuotaLimits::units(Some(2)),
        )
        .await
        .unwrap();
    let refused = store.create_workload(&by(t, ann, "three"), &reason()).await;
    assert!(matches!(refused, Err(StoreError::QuotaExceeded { .. })));
    store
        .set_quota_of(t, QuotaSubject::User(ann), &class, QuotaLimits::units(None))
        .await
        .unwrap();
    store
        .create_workload(&by(t, ann, "three"), &reason())
        .await
        .unwrap();

    let other = tenant(store, None).await;
    assert!(matches!(
        store
            .set_quota_of(
                other,
                QuotaSubject::User(ann),
                &class,
                QuotaLimits::units(Some(1))
            )
            .await,
        Err(StoreError::NotFound)
    ));
    assert!(matches!(
        store.set_user_team(other, ann, None).await,
        Err(StoreError::NotFound)
    ));
    assert!(matches!(
        store
            .set_quota_of(
                t,
                QuotaSubject::User(ann),
                &QuotaClass::Default,
                QuotaLimits::units(Some(1))
            )
            .await,
        Err(StoreError::InvalidInput(_))
    ));
    let theirs = store.create_team(other, TeamId::new(), "ml").await.unwrap();
    assert!(!store.delete_team(t, theirs.id).await.unwrap());
}
