//! Scale-to-zero's start (`ApiInternalService.WakeEndpoint`, the access proxy's): a parked
//! endpoint that parks when idle starts for a request's caller as `start` would (their scope,
//! the quotas), its timeline naming the user and the inference key; one already on its way is
//! left as it is; one that doesn't park, or isn't the caller's to start, is as unknown.

use std::sync::Arc;

use einsora_api::caller::Auth;
use einsora_api::internal::Internal;
use einsora_core::catalog::Catalog;
use einsora_core::lifecycle::State;
use einsora_core::role::Role;
use einsora_proto::accounts::v1 as kpb;
use einsora_proto::accounts::v1::inference_key_service_server::InferenceKeyService;
use einsora_proto::common::v1::EndpointParams;
use einsora_proto::internal::v1 as ipb;
use einsora_proto::internal::v1::api_internal_service_server::ApiInternalService;
use einsora_proto::workloads::v1 as pb;
use einsora_store::QuotaClass;
use tonic::{Code, Request};

use crate::{Env, Who, assert_code, endpoint, env, error_code};

fn parking(name: &str) -> pb::CreateWorkloadRequest {
    let mut req = endpoint(name);
    req.params = Some(pb::create_workload_request::Params::Endpoint(
        EndpointParams {
            model: "org/model".into(),
            slots: None,
            served_name: None,
            park_after_idle_s: Some(600),
        },
    ));
    req
}

fn internal(env: &Env) -> Internal {
    let auth = Arc::new(Auth::new(Arc::clone(&env.store)));
    Internal::new(auth, Arc::new(Catalog::builtin()))
}

async fn wake(
    internal: &Internal,
    who: &Who,
    id: &str,
    key: &str,
) -> Result<ipb::WakeEndpointResponse, tonic::Status> {
    let req = ipb::WakeEndpointRequest {
        tenant_id: who.tenant.to_string(),
        user_id: who.user.to_string(),
        endpoint_id: id.to_owned(),
        key_id: key.to_owned(),
    };
    Ok(internal
        .wake_endpoint(Request::new(req))
        .await?
        .into_inner())
}

async fn parked(env: &Env, who: &Who, req: pb::CreateWorkloadRequest) -> String {
    let id = env.create(who, req).await.unwrap().id;
    let to = [
        State::Provisioning,
        State::Running,
        State::Stopping,
        State::Stopped,
    ];
    env.advance(&id, &to, None).await;
    id
}

#[tokio::test]
async fn a_parked_endpoint_wakes_for_its_callers_request_naming_the_key() {
    let env = env().await;
    let internal = internal(&env);
    let owner = env.tenant("acme", None).await;
    let ann = env
        .user(owner.tenant, "ann@acme.example", Role::Member)
        .await;
    let bob = env
        .user(owner.tenant, "bob@acme.example", Role::Member)
        .await;
    let anns = parked(&env, &ann, parking("anns")).await;

    let keys =
        einsora_api::accounts::InferenceKeys::new(Arc::new(Auth::new(Arc::clone(&env.store))));
    let made = keys
        .create_inference_key(ann.browser(kpb::CreateInferenceKeyRequest {
            name: "laptop".into(),
            all_endpoints: true,
            endpoint_ids: vec![],
            limits: None,
        }))
        .await
        .unwrap()
        .into_inner();
    let key = made.inference_key.unwrap();

    // Another member's is as unknown as a made-up one, and nothing moves.
    let refused = wake(&internal, &bob, &anns, "").await;
    assert_code(refused, Code::NotFound);
    let woken = wake(&internal, &ann, &anns, &key.id).await.unwrap();
    assert!(woken.started);
    let w = env.store.workload(anns.parse().unwrap()).await.unwrap();
    let w = w.unwrap();
    assert_eq!(w.state, State::Pending);
    assert_eq!(
        w.reason,
        format!(
            "woken by a request from ann@acme.example (inference key \"laptop\" ({}…))",
            key.prefix
        )
    );
    // On its way already: left as it is.
    let again = wake(&internal, &ann, &anns, "").await.unwrap();
    assert!(!again.started);
    let events = env.store.events(w.id).await.unwrap();
    assert_eq!(events.len(), 6, "one start, no more");

    // A failed one starts only when asked (the owner, who sees every workload, is refused).
    env.advance(&anns, &[State::Failed], None).await;
    let failed = wake(&internal, &owner, &anns, "").await;
    assert_code(failed, Code::FailedPrecondition);
}

#[tokio::test]
async fn only_endpoints_that_park_wake_and_the_quotas_hold() {
    let env = env().await;
    let internal = internal(&env);
    let who = env.tenant("acme", None).await;
    let plain = parked(&env, &who, endpoint("plain")).await;
    assert_code(wake(&internal, &who, &plain, "").await, Code::NotFound);
    let unknown = crate::unknown_id();
    assert_code(wake(&internal, &who, &unknown, "").await, Code::NotFound);

    let sleeper = parked(&env, &who, parking("sleeper")).await;
    env.store
        .set_quota(who.tenant, &QuotaClass::Class("cpu-4c-16g".into()), Some(1))
        .await
        .unwrap();
    env.create(&who, endpoint("other")).await.unwrap();
    let status = assert_code(
        wake(&internal, &who, &sleeper, "").await,
        Code::FailedPrecondition,
    );
    assert_eq!(error_code(&status), "quota_exceeded");

    // Woken by an API token: the user alone.
    env.store
        .set_quota(who.tenant, &QuotaClass::Class("cpu-4c-16g".into()), None)
        .await
        .unwrap();
    assert!(wake(&internal, &who, &sleeper, "").await.unwrap().started);
    let w = env.store.workload(sleeper.parse().unwrap()).await.unwrap();
    assert_eq!(
        w.unwrap().reason,
        format!("woken by a request from {}", who.email)
    );
}
