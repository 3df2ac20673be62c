use einsora_core::lifecycle::State;
use einsora_proto::common::v1::WorkloadState as PbState;
use einsora_proto::workloads::v1 as pb;
use einsora_proto::workloads::v1::workload_service_server::WorkloadService;
use einsora_store::QuotaClass;
use tonic::Code;

use crate::{Env, Who, assert_code, env, error_code, notebook};

async fn stop(env: &Env, who: &Who, id: &str) -> Result<pb::Workload, tonic::Status> {
    let req = pb::StopWorkloadRequest { id: id.into() };
    env.workloads
        .stop_workload(who.req(req))
        .await
        .map(|r| r.into_inner())
}

async fn start(env: &Env, who: &Who, id: &str) -> Result<pb::Workload, tonic::Status> {
    let req = pb::StartWorkloadRequest { id: id.into() };
    env.workloads
        .start_workload(who.req(req))
        .await
        .map(|r| r.into_inner())
}

async fn delete(env: &Env, who: &Who, id: &str) -> Result<pb::Workload, tonic::Status> {
    let req = pb::DeleteWorkloadRequest { id: id.into() };
    env.workloads
        .delete_workload(who.req(req))
        .await
        .map(|r| r.into_inner())
}

fn invalid_transition<T: std::fmt::Debug>(result: Result<T, tonic::Status>) -> String {
    let status = assert_code(result, Code::FailedPrecondition);
    assert_eq!(error_code(&status), "invalid_transition");
    status.message().to_owned()
}

#[tokio::test]
async fn steps_the_diagram_forbids_are_invalid_transitions() {
    let env = env().await;
    let who = env.tenant("acme", None).await;
    let w = env.create(&who, notebook("nb", "cpu-1c-2g")).await.unwrap();

    let message = invalid_transition(stop(&env, &who, &w.id).await);
    assert_eq!(message, "a workload can't go from pending to stopping");
    invalid_transition(start(&env, &who, &w.id).await);

    env.advance(&w.id, &[State::Provisioning, State::Running], None)
        .await;
    let stopping = stop(&env, &who, &w.id).await.unwrap();
    assert_eq!(stopping.state, PbState::Stopping as i32);
    assert_eq!(
        stopping.state_reason,
        format!("stop requested by {}", who.by_token())
    );
    invalid_transition(stop(&env, &who, &w.id).await);

    env.advance(&w.id, &[State::Stopped], None).await;
    let started = start(&env, &who, &w.id).await.unwrap();
    assert_eq!(started.state, PbState::Pending as i32);

    let deleting = delete(&env, &who, &w.id).await.unwrap();
    assert_eq!(deleting.state, PbState::Deleting as i32);
    invalid_transition(delete(&env, &who, &w.id).await);
    env.advance(&w.id, &[State::Deleted], None).await;
    assert_code(delete(&env, &who, &w.id).await, Code::NotFound);
}

#[tokio::test]
async fn a_browser_session_names_itself_and_start_rechecks_quota() {
    let env = env().await;
    let who = env.tenant("acme", None).await;
    env.store
        .set_quota(who.tenant, &QuotaClass::Class("cpu-1c-2g".into()), Some(1))
        .await
        .unwrap();
    let a = env.create(&who, notebook("a", "cpu-1c-2g")).await.unwrap();
    env.advance(&a.id, &[State::Provisioning, State::Running], None)
        .await;
    let req = pb::StopWorkloadRequest { id: a.id.clone() };
    let stopping = env.workloads.stop_workload(who.browser(req)).await.unwrap();
    assert_eq!(
        stopping.into_inner().state_reason,
        format!("stop requested by {} (browser session)", who.email)
    );
    env.advance(&a.id, &[State::Stopped], None).await;

    env.create(&who, notebook("b", "cpu-1c-2g")).await.unwrap();
    let status = assert_code(start(&env, &who, &a.id).await, Code::FailedPrecondition);
    assert_eq!(error_code(&status), "quota_exceeded");
}
