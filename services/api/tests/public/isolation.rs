use einsora_core::ids::MachineId;
use einsora_core::lifecycle::State;
use einsora_proto::access::v1 as access_pb;
use einsora_proto::access::v1::access_service_server::AccessService;
use einsora_proto::machines::v1 as machines_pb;
use einsora_proto::machines::v1::machine_service_server::MachineService;
use einsora_proto::workloads::v1 as pb;
use einsora_proto::workloads::v1::workload_service_server::WorkloadService;
use tonic::{Code, Status};

use crate::machines::register;
use crate::{Env, Who, env, notebook, unknown_id};

/// Everything about a status that reaches the gateway.
fn wire(status: Status) -> (Code, String, Vec<u8>, tonic::codegen::http::HeaderMap) {
    (
        status.code(),
        status.message().to_owned(),
        status.details().to_vec(),
        status.metadata().clone().into_headers(),
    )
}

/// Every RPC that takes a workload ID, as `who` calls it with `id`.
async fn workload_rpcs(env: &Env, who: &Who, id: &str) -> Vec<(&'static str, Status)> {
    let id = id.to_owned();
    let w = &env.workloads;
    let get = |include_deleted| pb::GetWorkloadRequest {
        id: id.clone(),
        include_deleted,
    };
    vec![
        (
            "get",
            w.get_workload(who.req(get(false))).await.unwrap_err(),
        ),
        (
            "get deleted",
            w.get_workload(who.req(get(true))).await.unwrap_err(),
        ),
        (
            "events",
            w.list_workload_events(who.req(pb::ListWorkloadEventsRequest { id: id.clone() }))
                .await
                .unwrap_err(),
        ),
        (
            "logs",
            w.list_workload_logs(who.req(pb::ListWorkloadLogsRequest {
                id: id.clone(),
                follow: true,
                ..Default::default()
            }))
            .await
            .err()
            .expect("refused"),
        ),
        (
            "export",
            w.export_workload(who.req(pb::ExportWorkloadRequest { id: id.clone() }))
                .await
                .unwrap_err(),
        ),
        (
            "start",
            w.start_workload(who.req(pb::StartWorkloadRequest { id: id.clone() }))
                .await
                .unwrap_err(),
        ),
        (
            "stop",
            w.stop_workload(who.req(pb::StopWorkloadRequest { id: id.clone() }))
                .await
                .unwrap_err(),
        ),
        (
            "delete",
            w.delete_workload(who.req(pb::DeleteWorkloadRequest { id: id.clone() }))
                .await
                .unwrap_err(),
        ),
        (
            "access",
            env.access
                .open_workload(who.req(access_pb::OpenWorkloadRequest { id: id.clone() }))
                .await
                .unwrap_err(),
        ),
    ]
}

async fn machine_rpcs(env: &Env, who: &Who, id: MachineId) -> Vec<(&'static str, Status)> {
    let id = id.to_string();
    let m = &env.machines;
    vec![
        (
            "machine",
            m.get_machine(who.req(machines_pb::GetMachineRequest { id: id.clone() }))
                .await
                .unwrap_err(),
        ),
        (
            "revoke",
            m.revoke_machine(who.req(machines_pb::RevokeMachineRequest { id }))
                .await
                .unwrap_err(),
        ),
    ]
}

fn assert_alike(foreign: Vec<(&str, Status)>, unknown: Vec<(&str, Status)>) {
    assert_eq!(foreign.len(), unknown.len());
    for ((rpc, f), (_, u)) in foreign.into_iter().zip(unknown) {
        assert_eq!(f.code(), Code::NotFound, "{rpc}: {f:?}");
        assert_eq!(
            wire(f),
            wire(u),
            "{rpc}: another tenant's object must look unknown"
        );
    }
}

#[tokio::test]
async fn another_tenants_objects_are_not_found_exactly_like_unknown_ids() {
    let env = env().await;
    let (owner, intruder) = (
        env.tenant("acme", None).await,
        env.tenant("globex", None).await,
    );
    let machine = register(&env, &owner, "studio", true).await;
    let running = env
        .create(&owner, notebook("running", "cpu-1c-2g"))
        .await
        .unwrap();
    env.advance(
        &running.id,
        &[State::Provisioning, State::Running],
        Some(machine),
    )
    .await;
    let stopped = env
        .create(&owner, notebook("stopped", "cpu-1c-2g"))
        .await
        .unwrap();
    env.advance(
        &stopped.id,
        &[
            State::Provisioning,
            State::Running,
            State::Stopping,
            State::Stopped,
        ],
        None,
    )
    .await;
    let deleted = env
        .create(&owner, notebook("deleted", "cpu-1c-2g"))
        .await
        .unwrap();
    env.advance(&deleted.id, &[State::Deleting, State::Deleted], None)
        .await;
    let before = env.store.events(running.id.parse().unwrap()).await.unwrap();

    for id in [&running.id, &stopped.id, &deleted.id] {
        assert_alike(
            workload_rpcs(&env, &intruder, id).await,
            workload_rpcs(&env, &intruder, &unknown_id()).await,
        );
    }
    assert_alike(
        machine_rpcs(&env, &intruder, machine).await,
        machine_rpcs(&env, &intruder, MachineId::new()).await,
    );

    let list = pb::ListWorkloadsRequest {
        include_deleted: true,
        ..Default::default()
    };
    let theirs = env
        .workloads
        .list_workloads(intruder.req(list))
        .await
        .unwrap();
    assert!(theirs.get_ref().workloads.is_empty());
    let machines = env
        .machines
        .list_machines(intruder.req(machines_pb::ListMachinesRequest {}));
    assert!(machines.await.unwrap().get_ref().machines.is_empty());

    let after = env.store.events(running.id.parse().unwrap()).await.unwrap();
    assert_eq!(before, after, "the intruder changed nothing");
    let owned = env
        .store
        .workload(running.id.parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(owned.state, State::Running);
    let m = env
        .store
        .machine_of(owner.tenant, machine)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(m.revoked_at, None);
}

#[tokio::test]
async fn every_public_rpc_needs_a_credential() {
    let env = env().await;
    let anonymous = Who {
        token: "tsk_notatokenatall".into(),
        ..env.tenant("acme", None).await
    };
    for (rpc, status) in workload_rpcs(&env, &anonymous, &unknown_id()).await {
        assert_eq!(status.code(), Code::Unauthenticated, "{rpc}");
    }
    for (rpc, status) in machine_rpcs(&env, &anonymous, MachineId::new()).await {
        assert_eq!(status.code(), Code::Unauthenticated, "{rpc}");
    }
}
