use einsora_core::ids::MachineId;
use einsora_core::lifecycle::State;
use einsora_proto::machines::v1 as pb;
use einsora_proto::machines::v1::machine_service_server::MachineService;
use time::{Duration, OffsetDateTime};
use tonic::Code;

use einsora_testkit::fixtures::registration;

use crate::{Env, Who, assert_code, env, notebook};

/// Registers a machine of `who`'s, as its agent would; seen just now, or 10 minutes ago.
pub async fn register(env: &Env, who: &Who, name: &str, online: bool) -> MachineId {
    let ago = if online {
        Duration::ZERO
    } else {
        Duration::minutes(10)
    };
    let reg = registration(who.tenant, name, Some(OffsetDateTime::now_utc() - ago));
    env.store.put_machine(&reg).await.unwrap();
    reg.machine.id
}

#[tokio::test]
async fn machines_are_the_callers_own_with_status_and_workloads() {
    let env = env().await;
    let who = env.tenant("acme", None).await;
    let other = env.tenant("globex", None).await;
    let studio = register(&env, &who, "studio", true).await;
    let old = register(&env, &who, "old", false).await;
    let theirs = register(&env, &other, "theirs", true).await;
    let w = env.create(&who, notebook("nb", "l40s-48gb")).await.unwrap();
    env.advance(&w.id, &[State::Provisioning, State::Running], Some(studio))
        .await;

    let list = env
        .machines
        .list_machines(who.req(pb::ListMachinesRequest {}))
        .await;
    let list = list.unwrap().into_inner().machines;
    let seen: Vec<_> = list
        .iter()
        .map(|m| (m.name.as_str(), m.status, m.workload_count))
        .collect();
    let (online, offline) = (
        pb::MachineStatus::Online as i32,
        pb::MachineStatus::Offline as i32,
    );
    assert_eq!(seen, [("studio", online, 1), ("old", offline, 0)]);
    assert_eq!(list[0].devices[0].model, "NVIDIA L40S");
    assert_eq!(
        list[0].devices[0].workload_ids,
        std::slice::from_ref(&w.id),
        "the workload holding the device"
    );
    assert_eq!(list[0].drivers, ["docker"]);
    let models: Vec<_> = list[0]
        .models
        .iter()
        .map(|m| (m.path.as_str(), m.size_bytes))
        .collect();
    assert_eq!(
        models,
        [("team/tiny.gguf", 4096)],
        "the model files it offers"
    );

    let get = |id: MachineId| who.req(pb::GetMachineRequest { id: id.to_string() });
    let one = env
        .machines
        .get_machine(get(old))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(one.id, old.to_string());
    assert_code(env.machines.get_machine(get(theirs)).await, Code::NotFound);

    let revoke = who.req(pb::RevokeMachineRequest {
        id: old.to_string(),
    });
    let revoked = env
        .machines
        .revoke_machine(revoke)
        .await
        .unwrap()
        .into_inner();
    assert_eq!(revoked.status, pb::MachineStatus::Revoked as i32);
    assert!(revoked.revoked_at.is_some());
}

/// A machine the controller flagged says so, with the latest reason and both times; an
/// unflagged one has no flag.
#[tokio::test]
async fn a_flagged_machine_shows_why_and_since_when() {
    let env = env().await;
    let who = env.tenant("acme", None).await;
    let noisy = register(&env, &who, "noisy", true).await;
    register(&env, &who, "quiet", true).await;
    let at = |s| OffsetDateTime::from_unix_timestamp(s).unwrap();
    for (what, when) in [
        ("report_flood", 1_700_000_000),
        ("stream_flood", 1_700_000_060),
    ] {
        env.store.flag_machine(noisy, what, at(when)).await.unwrap();
    }
    let get = |id: MachineId| who.req(pb::GetMachineRequest { id: id.to_string() });
    let flagged = env
        .machines
        .get_machine(get(noisy))
        .await
        .unwrap()
        .into_inner();
    let flag = flagged.flag.expect("flagged");
    assert_eq!(flag.reason, "stream_flood");
    let seconds = |t: Option<prost_types::Timestamp>| t.map(|t| t.seconds);
    assert_eq!(
        (seconds(flag.since), seconds(flag.last)),
        (Some(1_700_000_000), Some(1_700_000_060))
    );
    let list = env
        .machines
        .list_machines(who.req(pb::ListMachinesRequest {}))
        .await
        .unwrap()
        .into_inner()
        .machines;
    let flags: Vec<_> = list
        .iter()
        .map(|m| (m.name.as_str(), m.flag.as_ref().map(|f| f.reason.as_str())))
        .collect();
    assert_eq!(flags, [("noisy", Some("stream_flood")), ("quiet", None)]);
}
