//! A machine's inventory over its stream: recorded when it fits a machine; refused when it
//! doesn't, which takes the machine out of placement until a good one arrives.

use einsora_core::ids::MachineId;
use einsora_proto::agent::v1 as pb;
use einsora_testkit::eventually_async;
use pb::agent_report::Report;

use super::harness::{PATIENCE, Port};

const TOKEN: &str = "enr_0123456789abcdefghijklmnopqrstuv";

fn inventory(cpus: u32) -> Report {
    Report::Inventory(pb::Inventory {
        os: "linux".into(),
        arch: "x86_64".into(),
        cpus,
        memory_bytes: 8 << 30,
        drivers: vec!["sim".into()],
        ..pb::Inventory::default()
    })
}

/// Waits until the machine's being offered is `wanted`.
async fn offered(port: &Port, machine: MachineId, wanted: bool) {
    eventually_async(format_args!("offered {wanted}"), PATIENCE, async || {
        (port.hub.offered(machine) == wanted).then_some(())
    })
    .await;
}

/// Waits until the store has the machine with `cpus`.
async fn recorded(port: &Port, machine: MachineId, cpus: u32) {
    let (store, tenant) = (&port.tenancy.store, port.tenancy.tenant);
    eventually_async(format_args!("{cpus} CPUs recorded"), PATIENCE, async || {
        let m = store.machine_of(tenant, machine).await.unwrap().unwrap();
        (m.machine.cpus == cpus).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_refused_inventory_takes_the_machine_out_of_placement_until_a_good_one() {
    let port = Port::start(&[]).await;
    port.tenancy.token(TOKEN).await;
    let (machine, cert) = port.enrol(TOKEN).await.unwrap();
    let stream = port.sync(&cert).await.unwrap();
    stream.send(inventory(4)).await;
    recorded(&port, machine, 4).await;
    offered(&port, machine, true).await;

    // No CPUs: no machine has that. What the store had stays, but the machine isn't offered.
    stream.send(inventory(0)).await;
    offered(&port, machine, false).await;
    assert!(port.hub.online(machine), "still online: it is heard from");
    assert_eq!(
        port.tenancy
            .store
            .machine_of(port.tenancy.tenant, machine)
            .await
            .unwrap()
            .unwrap()
            .machine
            .cpus,
        4
    );

    stream.send(inventory(8)).await;
    recorded(&port, machine, 8).await;
    offered(&port, machine, true).await;
}
