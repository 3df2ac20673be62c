use einsora_core::accelerator::AcceleratorKind;
use einsora_core::catalog::Catalog;
use einsora_core::ids::TenantId;
use einsora_core::kind::WorkloadKind;
use einsora_core::machine::{Device, Machine};
use einsora_core::sharing::SharingLevel;
use einsora_core::workload::Workload;

use einsora_testkit::fixtures::h100;

use super::*;

const GIB: u64 = 1 << 30;

fn machine(
    owner: TenantId,
    name: &str,
    cpus: u32,
    memory_gib: u64,
    devices: Vec<Device>,
) -> Machine {
    Machine {
        cpus,
        memory_bytes: memory_gib * GIB,
        devices,
        ..einsora_testkit::fixtures::machine(owner, name)
    }
}

fn candidate(m: Machine, drivers: &[&str]) -> Candidate {
    Candidate {
        machine: m,
        drivers: drivers.iter().map(|d| (*d).to_owned()).collect(),
        offered: true,
        held: Held::default(),
        vm_limit: None,
    }
}

fn workload(tenant: TenantId, kind: WorkloadKind, class: &str, image: &str) -> Workload {
    let units = Catalog::builtin()
        .class(class)
        .map_or(1, |c| c.devices().max(1));
    Workload {
        tenant_id: tenant,
        owner: Some(einsora_testkit::fixtures::owner_of(tenant)),
        ..crate::placement::tests::workload(kind, class, units, image)
    }
}

fn reason(d: &Decision) -> String {
    match d {
        Decision::Admit { reason, .. } | Decision::Wait(reason) | Decision::Fail(reason) => {
            reason.text()
        }
    }
}

#[test]
fn the_owners_notebook_goes_on_its_machine_with_a_driver_it_has() {
    let catalog = Catalog::builtin();
    let owner = TenantId::new();
    let mut machines = [candidate(machine(owner, "studio", 8, 32, vec![]), &["sim"])];
    let nb = workload(owner, WorkloadKind::Notebook, "cpu-4c-16g", "jupyterlab");
    let decision = place(&nb, &catalog, false, &mut machines);
    assert_eq!(
        reason(&decision),
        "admitted: 1 × cpu-4c-16g on studio with sim"
    );
    let Decision::Admit { admission, .. } = decision else {
        unreachable!()
    };
    assert_eq!(admission.machine_id, Some(machines[0].machine.id));
    assert_eq!(admission.driver.as_deref(), Some("sim"));
    assert_eq!(
        (machines[0].held.cpus, machines[0].held.memory_bytes),
        (4, 16 * GIB)
    );
    // A second one needs 4 more CPUs and 16 GiB: 8 and 32 are taken then.
    assert!(matches!(
        place(&nb, &catalog, false, &mut machines),
        Decision::Admit { .. }
    ));
    assert_eq!(
        reason(&place(&nb, &catalog, false, &mut machines)),
        "waiting for cpu-4c-16g capacity: requested 4 CPU(s), not enough free right now"
    );
    // A trusted tenant (the owner) is told what the roomiest machine has free.
    let mut roomier = [
        candidate(machine(nb.tenant_id, "small", 2, 64, vec![]), &["sim"]),
        candidate(machine(nb.tenant_id, "tight", 8, 8, vec![]), &["sim"]),
    ];
    assert_eq!(
        reason(&place(&nb, &catalog, true, &mut roomier)),
        "waiting for cpu-4c-16g capacity: requested 4 CPU(s), 2 free",
        "the 8-CPU machine lacks the memory, so its CPUs aren't free to it"
    );
}

#[test]
fn another_tenant_finds_no_machine_and_weak_isolation_stays_with_the_owner() {
    let catalog = Catalog::builtin();
    let (owner, guest) = (TenantId::new(), TenantId::new());
    let mut shared = machine(owner, "pool", 8, 32, vec![]);
    shared.sharing = SharingLevel::Community;
    let mut private = [candidate(machine(owner, "studio", 8, 32, vec![]), &["sim"])];
    let nb = workload(guest, WorkloadKind::Notebook, "cpu-4c-16g", "jupyterlab");
    assert_eq!(
        reason(&place(&nb, &catalog, false, &mut private)),
        "waiting for a machine that can run cpu-4c-16g to come online"
    );
    // In a community pool it may be hosted, but sim (weak isolation) is the owner's only.
    let mut pool = [candidate(shared, &["sim"])];
    assert_eq!(
        reason(&place(&nb, &catalog, false, &mut pool)),
        "waiting for a machine that can isolate it: the drivers here that run notebooks on \
         cpu-4c-16g run only the workloads of the user who owns the machine"
    );
}

/// Trust is per user: a teammate of the machine's owner (same tenant, another user) is a guest
/// to its weakly isolated drivers, and runs there only on a strongly isolating one.
#[test]
fn a_teammates_workload_needs_strong_isolation_on_the_owners_machine() {
    let catalog = Catalog::builtin();
    let owner = TenantId::new();
    let mut theirs = workload(owner, WorkloadKind::Notebook, "cpu-4c-16g", "jupyterlab");
    theirs.owner = Some(einsora_core::ids::UserId::new());
    let mut mac = [candidate(
        machine(owner, "studio", 8, 32, vec![]),
        &["sim", "docker"],
    )];
    assert_eq!(
        reason(&place(&theirs, &catalog, false, &mut mac)),
        "waiting for a machine that can isolate it: the drivers here that run notebooks on \
         cpu-4c-16g run only the workloads of the user who owns the machine"
    );
    let mine = workload(owner, WorkloadKind::Notebook, "cpu-4c-16g", "jupyterlab");
    assert!(matches!(
        place(&mine, &catalog, false, &mut mac),
        Decision::Admit { .. }
    ));
    // A Mac's container driver isolates strongly: the teammate's notebook runs there.
    let mut m = machine(owner, "studio", 8, 32, vec![]);
    m.os = "macos".into();
    m.arch = "aarch64".into();
    let mut mac = [candidate(m, &["macos-native", "macos-container"])];
    let Decision::Admit { admission, .. } = place(&theirs, &catalog, false, &mut mac) else {
        panic!("{}", reason(&place(&theirs, &catalog, false, &mut mac)));
    };
    assert_eq!(admission.driver.as_deref(), Some("macos-container"));
}

#[test]
fn gpus_are_matched_by_model_and_counted() {
    let catalog = Catalog::builtin();
    let owner = TenantId::new();
    let gpus = vec![h100("GPU-1"), h100("GPU-2")];
    let mut machines = [candidate(machine(owner, "box", 64, 512, gpus), &["sim"])];
    let nb = workload(owner, WorkloadKind::Notebook, "h100-80gb", "jupyterlab");
    for _ in 0..2 {
        assert!(matches!(
            place(&nb, &catalog, false, &mut machines),
            Decision::Admit { .. }
        ));
    }
    assert_eq!(
        reason(&place(&nb, &catalog, true, &mut machines)),
        "waiting for h100-80gb capacity: requested 1 GPU(s), 0 free",
        "the seeds' words, with the real count"
    );
    let other_model = workload(owner, WorkloadKind::Notebook, "l40s-48gb", "jupyterlab");
    assert!(matches!(
        place(&other_model, &catalog, false, &mut machines),
        Decision::Wait(_)
    ));
}

/// Each GPU workload is given its own devices, by UUID: two notebooks on a 2-GPU machine get
/// different ones, a third waits with the real free count, and a device freed (its workload
/// stopped, so it no longer holds it) is the one the waiter gets. A device held by a workload
/// admitted before devices were recorded (a count only) is never given twice either.
#[test]
fn gpu_workloads_are_given_free_devices_by_uuid() {
    let catalog = Catalog::builtin();
    let owner = TenantId::new();
    let gpus = vec![h100("GPU-1"), h100("GPU-2")];
    let mut machines = [candidate(machine(owner, "box", 64, 512, gpus), &["sim"])];
    let nb = workload(owner, WorkloadKind::Notebook, "h100-80gb", "jupyterlab");
    let given = |d: &Decision| match d {
        Decision::Admit { admission, .. } => admission.devices.clone(),
        other => panic!("not admitted: {other:?}"),
    };
    let first = given(&place(&nb, &catalog, false, &mut machines));
    let second = given(&place(&nb, &catalog, false, &mut machines));
    assert_eq!(
        (first.as_slice(), second.as_slice()),
        (&["GPU-1".to_owned()][..], &["GPU-2".to_owned()][..])
    );
    assert_eq!(
        reason(&place(&nb, &catalog, true, &mut machines)),
        "waiting for h100-80gb capacity: requested 1 GPU(s), 0 free"
    );
    // The first stops: what its machine's workloads hold no longer has GPU-1.
    let held = &mut machines[0].held;
    held.device_uuids.remove("GPU-1");
    *held.devices.get_mut("h100-80gb").unwrap() -= 1;
    assert_eq!(
        given(&place(&nb, &catalog, false, &mut machines)),
        ["GPU-1"]
    );

    // Two held: one recorded as GPU-2, one by a workload from before devices were recorded
    // (a count only). GPU-1 looks free by UUID, but the count says it isn't.
    let gpus = vec![h100("GPU-1"), h100("GPU-2")];
    let mut machines = [candidate(machine(owner, "box", 64, 512, gpus), &["sim"])];
    machines[0].held.devices.insert("h100-80gb".into(), 2);
    machines[0].held.device_uuids.insert("GPU-2".into());
    assert!(matches!(
        place(&nb, &catalog, false, &mut machines),
        Decision::Wait(_)
    ));
    // CPU classes are given none.
    let cpu = workload(owner, WorkloadKind::Notebook, "cpu-1c-2g", "jupyterlab");
    assert_eq!(
        given(&place(&cpu, &catalog, false, &mut machines)),
        Vec::<String>::new()
    );
}

/// GPUs a workload can't have for want of its class's CPUs or memory aren't free to it: a
/// machine with idle H100s but too few CPUs for the class says none are.
#[test]
fn gpus_without_the_cpus_or_memory_for_their_class_are_not_free() {
    let catalog = Catalog::builtin();
    let owner = TenantId::new();
    let nb = workload(owner, WorkloadKind::Notebook, "h100-80gb", "jupyterlab");
    for (cpus, memory_gib) in [(2, 512), (64, 24)] {
        let gpus = vec![h100("GPU-1"), h100("GPU-2")];
        let mut machines = [candidate(
            machine(owner, "box", cpus, memory_gib, gpus),
            &["sim"],
        )];
        assert_eq!(
            reason(&place(&nb, &catalog, true, &mut machines)),
            "waiting for h100-80gb capacity: requested 1 GPU(s), 0 free",
            "{cpus} CPUs, {memory_gib} GiB"
        );
    }
}

/// A machine without a GPU class's devices can't run it, however idle: a GPU workload waits for
/// a machine that can (never CPU instead), as on a machine whose agent can't use its GPUs
/// (they are kept from placement: `reconcile::admit`).
#[test]
fn a_gpu_workload_waits_for_a_machine_with_its_devices() {
    let catalog = Catalog::builtin();
    let owner = TenantId::new();
    let mut machines = [candidate(
        machine(owner, "cpu-box", 64, 512, vec![]),
        &["sim"],
    )];
    let nb = workload(owner, WorkloadKind::Notebook, "h100-80gb", "jupyterlab");
    assert_eq!(
        reason(&place(&nb, &catalog, true, &mut machines)),
        "waiting for a machine that can run h100-80gb to come online"
    );
}

#[test]
fn a_macs_gpu_is_the_largest_apple_class_its_memory_holds() {
    let catalog = Catalog::builtin();
    let owner = TenantId::new();
    let gpu = Device {
        vendor: AcceleratorKind::Apple,
        model: "Apple M2 Max".into(),
        uuid: "apple-gpu-0".into(),
        memory_bytes: 32 * GIB,
    };
    let mac = machine(owner, "mac", 12, 32, vec![gpu]);
    let mut machines = [candidate(mac, &["macos-native"])];
    let fits = workload(
        owner,
        WorkloadKind::Notebook,
        "apple-silicon-32gb",
        "jupyterlab",
    );
    assert_eq!(
        reason(&place(&fits, &catalog, false, &mut machines)),
        "admitted: 1 × apple-silicon-32gb on mac with macos-native"
    );
    machines[0].held = Held::default();
    let smaller = workload(
        owner,
        WorkloadKind::Notebook,
        "apple-silicon-16gb",
        "jupyterlab",
    );
    assert!(matches!(
        place(&smaller, &catalog, false, &mut machines),
        Decision::Wait(_)
    ));
}

#[test]
fn a_notebook_that_ran_before_waits_for_its_machine_and_driver() {
    let catalog = Catalog::builtin();
    let owner = TenantId::new();
    let home = candidate(machine(owner, "home", 8, 32, vec![]), &["sim"]);
    let elsewhere = candidate(machine(owner, "elsewhere", 8, 32, vec![]), &["sim"]);
    let mut nb = workload(owner, WorkloadKind::Notebook, "cpu-1c-2g", "jupyterlab");
    nb.machine_id = Some(home.machine.id);
    nb.driver = Some("sim".into());
    let mut machines = [home, elsewhere];
    machines[0].offered = false;
    assert_eq!(
        reason(&place(&nb, &catalog, false, &mut machines)),
        "waiting for its machine to come online: its disk is there"
    );
    machines[0].offered = true;
    assert_eq!(
        reason(&place(&nb, &catalog, false, &mut machines)),
        "admitted: 1 × cpu-1c-2g on home with sim"
    );
}

#[test]
fn a_drivers_per_machine_limit_holds() {
    let catalog = Catalog::builtin();
    let owner = TenantId::new();
    let mut mac = machine(owner, "mac", 16, 64, vec![]);
    mac.os = "macos".into();
    let mut machines = [candidate(mac, &["macos-vz"])];
    let vm = workload(owner, WorkloadKind::Vm, "cpu-1c-2g", "ubuntu-24.04");
    let limit = einsora_core::driver::lookup("macos-vz")
        .unwrap()
        .per_machine_limit
        .unwrap();
    for _ in 0..limit {
        assert!(matches!(
            place(&vm, &catalog, false, &mut machines),
            Decision::Admit { .. }
        ));
    }
    assert_eq!(
        place(&vm, &catalog, false, &mut machines),
        waiting_for_room()
    );
}

/// What a cpu-1c-2g VM kept off by a driver's limit waits with.
fn waiting_for_room() -> Decision {
    Decision::Wait(Reason::WaitingForDriverRoom {
        kind: WorkloadKind::Vm,
        class: "cpu-1c-2g".into(),
    })
}

/// A machine's owner may allow fewer VMs at once than its CPUs and memory take
/// (EINSORA_VM_LIMIT): no more are placed there, and the next waits saying why, or goes to
/// another machine with room.
#[test]
fn an_owners_vm_limit_holds_for_drivers_that_run_vms() {
    let catalog = Catalog::builtin();
    let owner = TenantId::new();
    let mut host = candidate(
        machine(owner, "host", 16, 64, vec![]),
        &["libvirt", "docker"],
    );
    host.vm_limit = Some(1);
    let mut machines = [host];
    let vm = workload(owner, WorkloadKind::Vm, "cpu-1c-2g", "tiny");
    assert!(matches!(
        place(&vm, &catalog, false, &mut machines),
        Decision::Admit { .. }
    ));
    assert_eq!(
        place(&vm, &catalog, false, &mut machines),
        waiting_for_room()
    );
    // Not a limit on its other drivers' workloads.
    let notebook = workload(owner, WorkloadKind::Notebook, "cpu-1c-2g", "jupyterlab");
    assert!(matches!(
        place(&notebook, &catalog, false, &mut machines),
        Decision::Admit { .. }
    ));
    // A second machine with room takes the next VM.
    let other = candidate(machine(owner, "other", 16, 64, vec![]), &["libvirt"]);
    let mut machines = [machines[0].clone(), other];
    match place(&vm, &catalog, false, &mut machines) {
        Decision::Admit { admission, .. } => {
            assert_eq!(admission.machine_id, Some(machines[1].machine.id));
        }
        other => panic!("{other:?}"),
    }
}

/// The owner's limit counts the machine's VMs whichever driver runs them, and nothing else:
/// with two drivers that run VMs it still holds, and notebooks on one of them don't count.
/// Where another machine had room but not the CPUs, the wait is for capacity, not room.
#[test]
fn an_owners_vm_limit_counts_vms_across_drivers_and_only_vms() {
    let catalog = Catalog::builtin();
    let owner = TenantId::new();
    let mut host = candidate(machine(owner, "host", 16, 64, vec![]), &["libvirt", "sim"]);
    host.vm_limit = Some(1);
    let mut machines = [host];
    let notebook = workload(owner, WorkloadKind::Notebook, "cpu-1c-2g", "jupyterlab");
    for _ in 0..2 {
        assert!(matches!(
            place(&notebook, &catalog, false, &mut machines),
            Decision::Admit { .. }
        ));
    }
    let vm = workload(owner, WorkloadKind::Vm, "cpu-1c-2g", "debian-12");
    assert!(matches!(
        place(&vm, &catalog, false, &mut machines),
        Decision::Admit { .. }
    ));
    assert_eq!(
        place(&vm, &catalog, false, &mut machines),
        waiting_for_room()
    );

    let busy = candidate(machine(owner, "busy", 1, 64, vec![]), &["libvirt"]);
    let mut machines = [machines[0].clone(), busy];
    machines[1].held.cpus = 1;
    assert!(matches!(
        place(&vm, &catalog, false, &mut machines),
        Decision::Wait(Reason::WaitingForCapacity { .. })
    ));
}

/// A CPU notebook on a Mac's native driver holds its Apple GPU too, exclusively, since its code
/// can use Metal (seeds: "Native CPU on Macs"); its usage stays on its CPU class. Each waits
/// while the other holds the GPU, saying why.
#[test]
fn a_cpu_notebook_on_a_macs_native_driver_reserves_its_apple_gpu() {
    let catalog = Catalog::builtin();
    let owner = TenantId::new();
    let gpu = Device {
        vendor: AcceleratorKind::Apple,
        model: "Apple M2 Max".into(),
        uuid: "apple-gpu-0".into(),
        memory_bytes: 64 * GIB,
    };
    let mac = || {
        [candidate(
            machine(owner, "studio", 16, 64, vec![gpu.clone()]),
            &["macos-native"],
        )]
    };
    let cpu = workload(owner, WorkloadKind::Notebook, "cpu-1c-2g", "jupyterlab");
    let metal = workload(
        owner,
        WorkloadKind::Notebook,
        "apple-silicon-64gb",
        "jupyterlab",
    );

    let mut machines = mac();
    let admitted = place(&cpu, &catalog, true, &mut machines);
    let Decision::Admit { admission, .. } = &admitted else {
        panic!("{}", reason(&admitted));
    };
    assert_eq!(
        admission.placed_class, "cpu-1c-2g",
        "usage stays on its CPU class"
    );
    assert_eq!(admission.devices, ["apple-gpu-0"]);
    assert_eq!(
        reason(&admitted),
        "admitted: 1 × cpu-1c-2g on studio with macos-native; its Apple GPU is reserved too, \
         since native code can use Metal"
    );
    // The Mac has the CPUs and memory for both: the GPU is what the Metal notebook waits for.
    assert_eq!(
        reason(&place(&metal, &catalog, true, &mut machines)),
        "waiting for apple-silicon-64gb capacity: requested 1 GPU(s), 0 free"
    );
    let waiting = "waiting for cpu-1c-2g on a Mac whose Apple GPU is in use: native code can \
                   use Metal, so it needs the GPU free too";
    assert_eq!(reason(&place(&cpu, &catalog, true, &mut machines)), waiting);

    // The other way round, and with a holder admitted before devices were recorded (a count).
    let mut machines = mac();
    assert!(matches!(
        place(&metal, &catalog, true, &mut machines),
        Decision::Admit { .. }
    ));
    assert_eq!(reason(&place(&cpu, &catalog, true, &mut machines)), waiting);
    // Any Apple class's count: the GPU is one, whichever class its holder was admitted on.
    let mut machines = mac();
    machines[0]
        .held
        .devices
        .insert("apple-silicon-16gb".into(), 1);
    assert_eq!(reason(&place(&cpu, &catalog, true, &mut machines)), waiting);

    // With macos-container beside it (a Linux VM, no Metal), the CPU notebook goes there
    // while the GPU is taken, holding none.
    let both = machine(owner, "studio", 16, 64, vec![gpu.clone()]);
    let mut machines = [candidate(both, &["macos-native", "macos-container"])];
    assert!(matches!(
        place(&metal, &catalog, true, &mut machines),
        Decision::Admit { .. }
    ));
    let Decision::Admit {
        admission, reason, ..
    } = place(&cpu, &catalog, true, &mut machines)
    else {
        panic!("not admitted beside a busy GPU");
    };
    assert!(admission.devices.is_empty());
    assert_eq!(
        reason.text(),
        "admitted: 1 × cpu-1c-2g on studio with macos-container"
    );
}

/// An Intel Mac has no Apple GPU to hold.
#[test]
fn a_mac_without_an_apple_gpu_holds_none() {
    let catalog = Catalog::builtin();
    let owner = TenantId::new();
    let intel = machine(owner, "imac", 8, 32, vec![]);
    let mut machines = [candidate(intel, &["macos-native"])];
    let cpu = workload(owner, WorkloadKind::Notebook, "cpu-1c-2g", "jupyterlab");
    for _ in 0..2 {
        let Decision::Admit { admission, .. } = place(&cpu, &catalog, true, &mut machines) else {
            panic!("not admitted");
        };
        assert!(admission.devices.is_empty());
    }
}

/// Only macos-native's CPU workloads hold a GPU: a Linux machine's CPU notebook holds none.
#[test]
fn a_cpu_notebook_elsewhere_holds_no_gpu() {
    let catalog = Catalog::builtin();
    let owner = TenantId::new();
    let linux = machine(owner, "box", 16, 64, vec![h100("GPU-1")]);
    let mut machines = [candidate(linux, &["linux-native"])];
    let cpu = workload(owner, WorkloadKind::Notebook, "cpu-1c-2g", "jupyterlab");
    let Decision::Admit {
        admission, reason, ..
    } = place(&cpu, &catalog, true, &mut machines)
    else {
        panic!("not admitted");
    };
    assert!(admission.devices.is_empty());
    assert_eq!(
        reason.text(),
        "admitted: 1 × cpu-1c-2g on box with linux-native"
    );
}

/// A fallback goes where its own class would: on the tenant's machines with a driver for it;
/// its reason says it is a fallback and for what.
#[test]
fn a_fallback_takes_a_cpu_class_on_a_machine_without_the_requested_gpu() {
    let catalog = Catalog::builtin();
    let owner = TenantId::new();
    let mut machines = [candidate(
        machine(owner, "box", 32, 128, vec![]),
        &["docker"],
    )];
    let nb = Workload {
        fallback: vec!["h100-80gb".into(), "cpu".into()],
        fallback_after_s: Some(600),
        ..workload(owner, WorkloadKind::Notebook, "l40s-48gb", "jupyterlab")
    };
    assert_eq!(
        reason(&place(&nb, &catalog, false, &mut machines)),
        "waiting for a machine that can run l40s-48gb to come online"
    );
    let Some(decision) = place_fallback(&nb, &catalog, &mut machines, |_| true) else {
        panic!("the CPU class fits");
    };
    assert_eq!(
        reason(&decision),
        "admitted: 1 × cpu-16c-64g on box with docker; a fallback: l40s-48gb had no room for 10m0s"
    );
    let Decision::Admit { admission, .. } = decision else {
        unreachable!()
    };
    assert_eq!(admission.placed_class, "cpu-16c-64g");
    assert!(admission.devices.is_empty());
    assert_eq!(
        (machines[0].held.cpus, machines[0].held.memory_bytes),
        (16, 64 * GIB)
    );
    // One more fits in the rest; then none does.
    assert!(place_fallback(&nb, &catalog, &mut machines, |_| true).is_some());
    assert_eq!(place_fallback(&nb, &catalog, &mut machines, |_| true), None);
}

/// A GPU fallback takes a device of its own class, by UUID.
#[test]
fn a_gpu_fallback_takes_a_device_of_the_fallback_class() {
    let catalog = Catalog::builtin();
    let owner = TenantId::new();
    let mut machines = [candidate(
        machine(owner, "box", 32, 256, vec![h100("GPU-h")]),
        &["docker"],
    )];
    let endpoint = Workload {
        fallback: vec!["h100-80gb".into()],
        ..workload(
            owner,
            WorkloadKind::Endpoint,
            "l40s-48gb",
            "openai-endpoint",
        )
    };
    let decision = place_fallback(&endpoint, &catalog, &mut machines, |_| true).unwrap();
    assert_eq!(
        reason(&decision),
        "admitted: 1 × h100-80gb, served by vllm on box with docker; a fallback: l40s-48gb had no room"
    );
    let Decision::Admit { admission, .. } = decision else {
        unreachable!()
    };
    assert_eq!(admission.devices, ["GPU-h"]);
}
