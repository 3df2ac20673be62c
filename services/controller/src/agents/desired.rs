//! A machine's desired state, computed from the store on every send, so a restart never makes
//! an agent stop or delete anything: provisioning or running → run; deleting, or a stopped
//! endpoint → remove with everything it stored; anything else → park, keeping its disk.

use einsora_core::agent::Mode;
use einsora_core::catalog::{Catalog, ComputeClass};
use einsora_core::kind::WorkloadKind;
use einsora_core::lifecycle::State;
use einsora_core::machine::Machine;
use einsora_core::workload::Workload;
use einsora_proto::agent::v1 as pb;
use einsora_proto::common::v1 as common_pb;
use einsora_proto::convert::WorkloadParams;
use einsora_store::OutputHead;

pub fn mode(w: &Workload) -> Mode {
    match w.state {
        State::Provisioning | State::Running => Mode::Run,
        State::Deleting | State::Deleted => Mode::Remove,
        State::Stopped if w.kind == WorkloadKind::Endpoint => Mode::Remove,
        _ => Mode::Park,
    }
}

/// Every workload of the machine, with what it should be. A workload whose class left the
/// catalog is still listed (to be parked or removed), with what the store knows of it.
pub fn workloads(
    on_machine: &[Workload],
    catalog: &Catalog,
    machine: &Machine,
    output: &[OutputHead],
) -> Vec<pb::DesiredWorkload> {
    on_machine
        .iter()
        .map(|w| {
            let class_name = w.placed_class.as_deref().unwrap_or(&w.gpu_class);
            let class = catalog.class(class_name);
            let accelerator = class.map(|c| c.accelerator());
            let runtime = accelerator
                .and_then(|a| catalog.image(&w.image)?.runtime_for(a))
                .map(|r| r.name().to_owned())
                .unwrap_or_default();
            let head = output.iter().find(|h| h.workload_id == w.id);
            pb::DesiredWorkload {
                workload_id: w.id.to_string(),
                attempt: w.attempt.get(),
                output: head.map(|h| pb::OutputHead {
                    attempt: h.attempt,
                    offset: h.offset,
                }),
                mode: pb::Mode::from(mode(w)).into(),
                spec: Some(pb::WorkloadSpec {
                    kind: common_pb::WorkloadKind::from(w.kind).into(),
                    compute_class: class_name.to_owned(),
                    accelerator: accelerator
                        .map_or(common_pb::AcceleratorKind::Unspecified, Into::into)
                        .into(),
                    image: w.image.clone(),
                    runtime: runtime.clone(),
                    driver: w.driver.clone().unwrap_or_default(),
                    resources: class.map(|c| pb::Resources {
                        cpus: c.cpus(),
                        memory_bytes: c.memory_bytes(),
                        device_count: w.units.min(c.devices()),
                        device_uuids: w.devices.clone(),
                        disk_bytes: c.disk_bytes(),
                    }),
                    requires_strong_isolation: machine
                        .requires_strong_isolation(w.tenant_id, w.owner),
                    egress: egress(w, class, machine),
                    retired: class.is_none() || runtime.is_empty(),
                    // The store validated them when they were written; a row that no longer
                    // reads is sent without, and the agent refuses what it can't run.
                    params: WorkloadParams::from_json(w.kind, &w.params)
                        .ok()
                        .map(Into::into),
                }),
            }
        })
        .collect()
}

/// Outbound network only for the code the machine's owning user runs there: their own
/// notebooks, of a class the catalog leaves open. A guest's workload (a teammate's, a community
/// pool's) and an endpoint (a fixed server with its model already in place) get none.
fn egress(w: &Workload, class: Option<&ComputeClass>, machine: &Machine) -> bool {
    w.kind == WorkloadKind::Notebook
        && !machine.requires_strong_isolation(w.tenant_id, w.owner)
        && class.is_some_and(|c| c.egress())
}

#[cfg(test)]
mod tests {
    use super::*;
    use WorkloadKind::{Endpoint, Notebook};
    use einsora_core::ids::{TenantId, UserId, WorkloadId};
    use einsora_testkit::fixtures::{machine, owner_of};

    /// A workload of `tenant`, by the user who owns that tenant's fixture machines.
    fn workload(kind: WorkloadKind, state: State, tenant: TenantId, class: &str) -> Workload {
        let now = time::OffsetDateTime::now_utc();
        Workload {
            id: WorkloadId::new(),
            tenant_id: tenant,
            owner: Some(owner_of(tenant)),
            kind,
            name: "w".into(),
            gpu_class: class.into(),
            placed_class: None,
            units: 1,
            image: "jupyterlab".into(),
            region: einsora_core::region::Region::new("local").unwrap(),
            machine_id: None,
            driver: None,
            devices: Vec::new(),
            attempt: einsora_core::attempt::Attempt::NONE,
            fallback: vec![],
            fallback_after_s: None,
            params: "{}".into(),
            state,
            reason: String::new(),
            version: 1,
            created_at: now,
            updated_at: now,
        }
    }

    #[test]
    fn modes_follow_the_seeds() {
        for (kind, state, expected) in [
            (Notebook, State::Provisioning, Mode::Run),
            (Notebook, State::Running, Mode::Run),
            (Notebook, State::Stopping, Mode::Park),
            (Notebook, State::Stopped, Mode::Park),
            (Endpoint, State::Stopped, Mode::Remove),
            (Notebook, State::Failed, Mode::Park),
            (Notebook, State::Pending, Mode::Park),
            (Notebook, State::Deleting, Mode::Remove),
        ] {
            let w = workload(kind, state, TenantId::new(), "cpu-1c-2g");
            assert_eq!(mode(&w), expected, "{kind} {state}");
        }
    }

    /// Only the owning user's own notebooks of an open class reach out: never a guest's (of
    /// another tenant or a teammate), never an endpoint, never a class the catalog closes, never
    /// a class that left the catalog. Everyone but the owning user needs strong isolation.
    #[test]
    fn egress_is_the_owners_notebooks_of_open_classes_only() {
        let catalog = Catalog::from_yaml(
            "regions: [local]\n\
             drivers: [docker]\n\
             classes:\n\
             - {name: open, accelerator: cpu, cpus: 1, memory_gib: 2}\n\
             - {name: closed, accelerator: cpu, cpus: 1, memory_gib: 2, egress: false}\n\
             images:\n\
             - {name: jupyterlab, kinds: [notebook], runtimes: [{name: jupyterlab-cpu, accelerators: [cpu]}]}\n",
        )
        .unwrap();
        let (owner, guest) = (TenantId::new(), TenantId::new());
        let m = machine(owner, "box");
        let teammate = Some(UserId::new());
        for (kind, tenant, user, class, expected) in [
            (Notebook, owner, None, "open", true),
            (Notebook, guest, None, "open", false),
            (Notebook, owner, teammate, "open", false),
            (Endpoint, owner, None, "open", false),
            (Notebook, owner, None, "closed", false),
            (Notebook, owner, None, "gone", false),
        ] {
            let mut w = workload(kind, State::Running, tenant, class);
            w.owner = user.or(w.owner);
            let owners = w.owner == m.owner_user;
            let sent = workloads(&[w], &catalog, &m, &[]);
            let spec = sent[0].spec.as_ref().unwrap();
            assert_eq!(
                spec.egress, expected,
                "{kind} of {class}, the owner's: {owners}"
            );
            assert_eq!(spec.requires_strong_isolation, !owners, "{kind} of {class}");
        }
    }

    /// A GPU workload is sent exactly the devices its admission gave it: its agent passes those
    /// to the runtime and no others.
    #[test]
    fn a_gpu_workload_is_sent_the_devices_it_was_given() {
        let catalog = Catalog::builtin();
        let owner = TenantId::new();
        let mut w = workload(Notebook, State::Running, owner, "h100-80gb");
        w.devices = vec!["GPU-1".into()];
        let spec = workloads(&[w], &catalog, &machine(owner, "box"), &[])
            .remove(0)
            .spec
            .unwrap();
        let resources = spec.resources.unwrap();
        assert_eq!(
            (resources.device_count, resources.device_uuids),
            (1, vec!["GPU-1".to_owned()])
        );
    }

    /// A workload whose class or image left the catalog is sent as retired: kept as it was
    /// made, nothing new started.
    #[test]
    fn a_workload_whose_class_or_image_left_the_catalog_is_retired() {
        let catalog = Catalog::builtin();
        let owner = TenantId::new();
        for (class, image, retired) in [
            ("cpu-1c-2g", "jupyterlab", false),
            ("gone", "jupyterlab", true),
            ("cpu-1c-2g", "gone", true),
        ] {
            let mut w = workload(Notebook, State::Running, owner, class);
            w.image = image.into();
            let spec = workloads(&[w], &catalog, &machine(owner, "box"), &[])
                .remove(0)
                .spec
                .unwrap();
            assert_eq!(spec.retired, retired, "{class} {image}");
        }
    }
}
