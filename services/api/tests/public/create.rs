use einsora_core::lifecycle::State;
use einsora_proto::common::v1::{WorkloadKind as PbKind, WorkloadState as PbState};
use einsora_proto::workloads::v1 as pb;
use einsora_store::QuotaClass;
use tonic::Code;

use crate::{assert_code, endpoint, env, error_code, notebook};

#[tokio::test]
async fn create_records_a_pending_workload_and_who_created_it() {
    let env = env().await;
    let who = env.tenant("acme", None).await;
    let w = env.create(&who, notebook("nb", "l40s-48gb")).await.unwrap();
    assert_eq!(w.state, PbState::Pending as i32);
    assert_eq!(
        (w.region.as_str(), w.gpu_class.as_str()),
        ("local", "l40s-48gb")
    );
    assert_eq!(w.tenant_id, who.tenant.to_string());
    assert_eq!(w.state_reason, format!("created by {}", who.by_token()));
    assert!(matches!(w.params, Some(pb::workload::Params::Notebook(_))));

    let stored = env
        .store
        .workload(w.id.parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!((stored.units, stored.state), (1, State::Pending));

    let e = env.create(&who, endpoint("chat")).await.unwrap();
    assert_eq!(e.kind, PbKind::Endpoint as i32);
    let Some(pb::workload::Params::Endpoint(p)) = e.params else {
        panic!("endpoint params: {:?}", e.params);
    };
    assert_eq!(p.model, "org/model");
    let cpu = env
        .store
        .workload(e.id.parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cpu.units, 1, "a CPU class counts one unit");
}

#[tokio::test]
async fn create_refuses_each_bad_field_by_name() {
    let env = env().await;
    let who = env.tenant("acme", None).await;
    let cases: Vec<(&str, pb::CreateWorkloadRequest)> = vec![
        (
            "kind",
            pb::CreateWorkloadRequest {
                kind: 0,
                ..notebook("nb", "l40s-48gb")
            },
        ),
        ("name", notebook("Not A Label", "l40s-48gb")),
        ("gpu_class", notebook("nb", "tpu-v5")),
        (
            "region",
            pb::CreateWorkloadRequest {
                region: Some("mars".into()),
                ..notebook("nb", "l40s-48gb")
            },
        ),
        (
            "image",
            pb::CreateWorkloadRequest {
                image: "ubuntu-24.04".into(),
                ..notebook("nb", "l40s-48gb")
            },
        ),
        (
            "image",
            pb::CreateWorkloadRequest {
                kind: PbKind::Vm as i32,
                image: "ubuntu-24.04".into(),
                ..notebook("vm", "apple-silicon-32gb")
            },
        ),
        (
            "endpoint.model",
            pb::CreateWorkloadRequest {
                params: None,
                ..endpoint("chat")
            },
        ),
        (
            "fallback[0]",
            pb::CreateWorkloadRequest {
                fallback: vec!["tpu-v5".into()],
                ..notebook("nb", "l40s-48gb")
            },
        ),
    ];
    for (field, req) in cases {
        let status = assert_code(env.create(&who, req).await, Code::InvalidArgument);
        assert!(
            status.message().starts_with(&format!("{field} ")),
            "{field}: {}",
            status.message()
        );
    }
    let listed = env.store.workloads(&Default::default()).await.unwrap();
    assert!(listed.is_empty(), "nothing was recorded");
}

#[tokio::test]
async fn create_over_quota_is_quota_exceeded_and_a_taken_name_a_conflict() {
    let env = env().await;
    let who = env.tenant("acme", None).await;
    env.store
        .set_quota(who.tenant, &QuotaClass::Class("l40s-48gb".into()), Some(1))
        .await
        .unwrap();
    env.create(&who, notebook("first", "l40s-48gb"))
        .await
        .unwrap();
    let status = assert_code(
        env.create(&who, notebook("second", "l40s-48gb")).await,
        Code::FailedPrecondition,
    );
    assert_eq!(error_code(&status), "quota_exceeded");
    assert!(
        status.message().contains("l40s-48gb"),
        "{}",
        status.message()
    );
    env.create(&who, notebook("second", "cpu-1c-2g"))
        .await
        .unwrap();

    let taken = assert_code(
        env.create(&who, notebook("first", "cpu-1c-2g")).await,
        Code::AlreadyExists,
    );
    assert!(taken.message().contains("\"first\""), "{}", taken.message());
}
