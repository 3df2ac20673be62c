//! Builders for what tests put in a store: tenants with a quota, workloads, admissions,
//! workloads taken along the lifecycle by the Store API, machines and their devices, usage. Each gives the defaults a test doesn't
//! care about; a test sets what it does (struct update syntax on what they return).

use einsora_core::accelerator::AcceleratorKind;
use einsora_core::catalog::Catalog;
use einsora_core::ids::{MachineId, TenantId, UsageRecordId, UserId, WorkloadId};
use einsora_core::kind::WorkloadKind;
use einsora_core::lifecycle::State;
use einsora_core::machine::{Device, Machine, ModelFile};
use einsora_core::reasons::{Actor, Credential, Reason};
use einsora_core::region::Region;
use einsora_core::sharing::SharingLevel;
use einsora_core::workload::Workload;
use einsora_store::{
    Admission, MachineRegistration, NewTenant, NewWorkload, QuotaClass, Store, StoreError,
    Transition, UnitShape, UsageRecord,
};
use time::OffsetDateTime;

/// The default region's ID.
pub fn local() -> Region {
    Region::new("local").unwrap()
}

/// What a unit of `class` counts against CPU and memory quotas by the built-in catalog (nothing
/// for a class it lacks), as the API looks it up in its own.
pub fn shape_of(class: &str) -> UnitShape {
    static CATALOG: std::sync::LazyLock<Catalog> = std::sync::LazyLock::new(Catalog::builtin);
    CATALOG.class(class).map(UnitShape::of).unwrap_or_default()
}

/// Why a test's workload was created: by a user in the dashboard.
pub fn created() -> Reason {
    Reason::Created {
        by: Actor {
            subject: "you@example.com".into(),
            credential: Credential::BrowserSession,
        },
    }
}

/// A trusted tenant with `quota` (`None`: unlimited) for `class`.
pub async fn tenant(store: &dyn Store, class: QuotaClass, quota: Option<u32>) -> TenantId {
    tenant_as(store, true, class, quota).await
}

/// [`tenant`], `trusted` or not (a trusted tenant sees free capacity in its waits).
pub async fn tenant_as(
    store: &dyn Store,
    trusted: bool,
    class: QuotaClass,
    quota: Option<u32>,
) -> TenantId {
    let id = TenantId::new();
    let tenant = NewTenant {
        id,
        slug: format!("t-{id}"),
        name: "Test".into(),
        trusted,
    };
    store.create_tenant(&tenant).await.unwrap();
    store.set_quota(id, &class, quota).await.unwrap();
    id
}

/// The user who owns the fixtures' machines and workloads of `tenant` (the same UUID as the
/// tenant's, so a test needs no user row to place a tenant's workload on its own machine).
pub fn owner_of(tenant: TenantId) -> UserId {
    UserId::from_uuid(*tenant.as_uuid())
}

/// A notebook of one `cpu-1c-2g` unit on `jupyterlab` in [`local`], named `name`, by
/// [`owner_of`] its tenant.
pub fn new_workload(tenant: TenantId, name: &str) -> NewWorkload {
    NewWorkload {
        id: WorkloadId::new(),
        tenant_id: tenant,
        owner: Some(owner_of(tenant)),
        kind: WorkloadKind::Notebook,
        name: name.into(),
        gpu_class: "cpu-1c-2g".into(),
        units: 1,
        shape: shape_of("cpu-1c-2g"),
        image: "jupyterlab".into(),
        region: local(),
        fallback: vec![],
        fallback_after_s: None,
        params: "{}".into(),
        trace_context: None,
    }
}

/// The lifecycle as tests walk it: each step without a lease, admission (placing a workload on
/// `admission`) recorded on the way to provisioning, and the way back to pending `start`.
#[derive(Debug, Clone)]
pub struct Lifecycle {
    pub admission: Admission,
}

impl Lifecycle {
    /// Admitted to `placed_class` on no machine, with the sim driver.
    pub fn placing_on(placed_class: &str) -> Lifecycle {
        Lifecycle {
            admission: Admission {
                placed_class: placed_class.into(),
                machine_id: None,
                driver: Some("sim".into()),
                devices: Vec::new(),
            },
        }
    }

    pub async fn try_step(
        &self,
        store: &dyn Store,
        w: &Workload,
        to: State,
    ) -> Result<Workload, StoreError> {
        if to == State::Pending {
            return store.start(w, shape_of(&w.gpu_class), &created()).await;
        }
        let change = Transition {
            workload: w,
            to,
            reason: &Reason::Ready,
            admission: (to == State::Provisioning).then_some(&self.admission),
            fence: None,
        };
        store.transition(&change).await
    }

    pub async fn step(&self, store: &dyn Store, w: &Workload, to: State) -> Workload {
        self.try_step(store, w, to)
            .await
            .unwrap_or_else(|e| panic!("{} -> {to}: {e}", w.state))
    }

    /// `new`, created and taken through `steps`.
    pub async fn through(&self, store: &dyn Store, new: &NewWorkload, steps: &[State]) -> Workload {
        let mut w = store.create_workload(new, &created()).await.unwrap();
        for &to in steps {
            w = self.step(store, &w, to).await;
        }
        w
    }
}

/// The steps along the lifecycle's diagram from pending to `state`.
pub fn path_to(state: State) -> &'static [State] {
    use State::*;
    match state {
        Pending => &[],
        Queued => &[Queued],
        Provisioning => &[Provisioning],
        Running => &[Provisioning, Running],
        Stopping => &[Provisioning, Running, Stopping],
        Stopped => &[Provisioning, Running, Stopping, Stopped],
        Failed => &[Provisioning, Failed],
        Deleting => &[Deleting],
        Deleted => &[Deleting, Deleted],
    }
}

const GIB: u64 = 1 << 30;

/// An NVIDIA L40S (48 GiB) with this UUID.
pub fn l40s(uuid: &str) -> Device {
    Device {
        vendor: AcceleratorKind::Nvidia,
        model: "NVIDIA L40S".into(),
        uuid: uuid.into(),
        memory_bytes: 48 * GIB,
    }
}

/// An NVIDIA H100 (80 GiB) with this UUID.
pub fn h100(uuid: &str) -> Device {
    Device {
        vendor: AcceleratorKind::Nvidia,
        model: "NVIDIA H100 80GB HBM3".into(),
        uuid: uuid.into(),
        memory_bytes: 80 * GIB,
    }
}

/// `owner`'s private Linux machine in [`local`] ([`owner_of`] it): 16 CPUs, 64 GiB and one L40S
/// (`GPU-0`).
pub fn machine(owner: TenantId, name: &str) -> Machine {
    Machine {
        trusted_users: Vec::new(),
        id: MachineId::new(),
        owner,
        owner_user: Some(owner_of(owner)),
        name: name.into(),
        region: local(),
        os: "linux".into(),
        arch: "x86_64".into(),
        cpus: 16,
        memory_bytes: 64 * GIB,
        devices: vec![l40s("GPU-0")],
        sharing: SharingLevel::Private,
        cores: None,
    }
}

/// [`machine`] as its agent registers it: the docker driver, one model file
/// (`team/tiny.gguf`), last seen at `seen`.
pub fn registration(
    owner: TenantId,
    name: &str,
    seen: Option<OffsetDateTime>,
) -> MachineRegistration {
    MachineRegistration {
        machine: machine(owner, name),
        drivers: vec!["docker".into()],
        models: vec![ModelFile {
            path: "team/tiny.gguf".into(),
            size_bytes: 4096,
        }],
        gpu_note: None,
        vm: None,
        last_seen_at: seen,
    }
}

/// `secs` of one `cpu-1c-2g` unit in the hour from `hour`, on no machine.
pub fn usage(
    tenant: TenantId,
    workload: WorkloadId,
    hour: OffsetDateTime,
    secs: u32,
) -> UsageRecord {
    UsageRecord {
        id: UsageRecordId::new(),
        tenant_id: tenant,
        workload_id: workload,
        region: local(),
        machine_id: None,
        placed_class: "cpu-1c-2g".into(),
        units: 1,
        hour_start: hour,
        seconds: secs,
    }
}
