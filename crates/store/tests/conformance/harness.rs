//! The suite's defaults on the shared harness (`einsora_testkit`): tenants with a quota for
//! `cpu-1c-2g`, notebooks of that class, admitted to it.

use einsora_core::ids::{TenantId, WorkloadId};
use einsora_core::lifecycle::State;
use einsora_core::workload::Workload;
use einsora_store::{Admission, QuotaClass, Store, StoreError};
use einsora_testkit::fixtures::{self, Lifecycle, path_to};

pub use einsora_testkit::db::TestDb;
pub use einsora_testkit::fixtures::{created as reason, local, new_workload, shape_of};

const CLASS: &str = "cpu-1c-2g";

/// A tenant whose quota for `cpu-1c-2g` is `limit` (None: unlimited).
pub async fn tenant(store: &dyn Store, limit: Option<u32>) -> TenantId {
    fixtures::tenant(store, QuotaClass::Class(CLASS.into()), limit).await
}

pub async fn create(store: &dyn Store, tenant: TenantId, name: &str) -> Workload {
    lifecycle()
        .through(store, &new_workload(tenant, name), &[])
        .await
}

fn lifecycle() -> Lifecycle {
    Lifecycle::placing_on(CLASS)
}

pub fn admission() -> Admission {
    lifecycle().admission
}

pub async fn step(store: &dyn Store, w: &Workload, to: State) -> Workload {
    lifecycle().step(store, w, to).await
}

pub async fn try_step(store: &dyn Store, w: &Workload, to: State) -> Result<Workload, StoreError> {
    lifecycle().try_step(store, w, to).await
}

/// A workload brought to `state` along the diagram.
pub async fn workload_in(store: &dyn Store, tenant: TenantId, state: State) -> Workload {
    let new = new_workload(tenant, &format!("w-{}", WorkloadId::new()));
    let w = lifecycle().through(store, &new, path_to(state)).await;
    assert_eq!(w.state, state);
    w
}
