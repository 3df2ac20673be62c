//! Inference keys and limits over the services as the gateway calls them: who creates, lists and
//! revokes which keys, a key's scope held to endpoints its creator sees, the tenant's limits
//! set by admins only, what Authenticate tells the access proxy, and a key refused by every
//! management service.

use std::sync::Arc;

use einsora_api::accounts::InferenceKeys;
use einsora_api::caller::Auth;
use einsora_api::internal::Internal;
use einsora_core::role::Role;
use einsora_proto::accounts::v1 as kpb;
use einsora_proto::accounts::v1::inference_key_service_server::InferenceKeyService;
use einsora_proto::accounts::v1::token_service_server::TokenService;
use einsora_proto::internal::v1 as ipb;
use einsora_proto::internal::v1::api_internal_service_server::ApiInternalService;
use einsora_proto::internal::v1::authenticate_request::Credential;
use einsora_proto::workloads::v1 as pb;
use einsora_proto::workloads::v1::workload_service_server::WorkloadService;
use tonic::{Code, Request};

use crate::{Env, Who, assert_code, endpoint, env};

fn services(env: &Env) -> (InferenceKeys, Internal) {
    let auth = Arc::new(Auth::new(Arc::clone(&env.store)));
    (
        InferenceKeys::new(Arc::clone(&auth)),
        Internal::new(auth, Arc::new(einsora_core::catalog::Catalog::builtin())),
    )
}

fn create(name: &str, all: bool, ids: &[&str]) -> kpb::CreateInferenceKeyRequest {
    kpb::CreateInferenceKeyRequest {
        name: name.into(),
        all_endpoints: all,
        endpoint_ids: ids.iter().map(|s| (*s).to_owned()).collect(),
        limits: None,
    }
}

fn with_key<T>(key: &str, message: T) -> Request<T> {
    let mut req = Request::new(message);
    let bearer = format!("Bearer {key}").parse().unwrap();
    req.metadata_mut().insert("authorization", bearer);
    req
}

async fn authenticate(internal: &Internal, credential: Credential) -> ipb::AuthenticateResponse {
    let req = Request::new(ipb::AuthenticateRequest {
        credential: Some(credential),
        ..ipb::AuthenticateRequest::default()
    });
    internal.authenticate(req).await.unwrap().into_inner()
}

async fn names(keys: &InferenceKeys, who: &Who) -> Vec<String> {
    let listed = keys
        .list_inference_keys(who.browser(kpb::ListInferenceKeysRequest {}))
        .await
        .unwrap()
        .into_inner();
    listed
        .keys
        .into_iter()
        .map(|k| format!("{}/{}", k.owner_email, k.name))
        .collect()
}

/// A member makes keys for their own endpoints (another's is as unknown as a made-up ID) or
/// all of the tenant's, sees and revokes only their own; an admin sees and revokes any; only
/// a session makes one; the secret is shown once and never listed.
#[tokio::test]
async fn keys_are_made_listed_and_revoked_as_each_role_may() {
    let env = env().await;
    let (keys, internal) = services(&env);
    let owner = env.tenant("acme", None).await;
    let admin = env
        .user(owner.tenant, "admin@acme.example", Role::Admin)
        .await;
    let ann = env
        .user(owner.tenant, "ann@acme.example", Role::Member)
        .await;
    let bob = env
        .user(owner.tenant, "bob@acme.example", Role::Member)
        .await;
    let anns = env.create(&ann, endpoint("anns")).await.unwrap().id;
    let bobs = env.create(&bob, endpoint("bobs")).await.unwrap().id;

    let mut asked = create("chat", false, &[&anns]);
    asked.limits = Some(kpb::InferenceLimits {
        requests_per_minute: Some(3),
        tokens_per_minute: None,
        tokens_per_day: Some(1000),
    });
    let made = keys
        .create_inference_key(ann.browser(asked))
        .await
        .unwrap()
        .into_inner();
    let key = made.key.clone();
    let shown = made.inference_key.unwrap();
    assert!(key.starts_with("isk_") && key.len() == 36, "{key}");
    assert_eq!(shown.prefix, key[..8]);
    assert_eq!(shown.endpoint_ids, std::slice::from_ref(&anns));
    assert!(!shown.all_endpoints);
    assert_eq!(shown.tokens_left_today, Some(1000));

    let unknown = crate::unknown_id();
    for (ids, all) in [
        (vec![bobs.as_str()], false),
        (vec![unknown.as_str()], false),
    ] {
        let refused = keys
            .create_inference_key(ann.browser(create("other", all, &ids)))
            .await;
        let status = assert_code(refused, Code::InvalidArgument);
        assert_eq!(
            status.message(),
            format!("endpoint_ids: you have no endpoint {}", ids[0]),
            "another member's endpoint is as unknown as a made-up one"
        );
    }
    let both = keys
        .create_inference_key(ann.browser(create("x", true, &[&anns])))
        .await;
    assert_code(both, Code::InvalidArgument);
    let neither = keys
        .create_inference_key(ann.browser(create("x", false, &[])))
        .await;
    assert_code(neither, Code::InvalidArgument);
    let by_token = keys
        .create_inference_key(ann.req(create("x", true, &[])))
        .await;
    assert_code(by_token, Code::PermissionDenied);
    let again = keys
        .create_inference_key(ann.browser(create("chat", true, &[])))
        .await;
    assert_code(again, Code::AlreadyExists);
    let bobs_key = keys
        .create_inference_key(bob.browser(create("all", true, &[])))
        .await
        .unwrap()
        .into_inner();

    assert_eq!(names(&keys, &ann).await, ["ann@acme.example/chat"]);
    assert_eq!(
        names(&keys, &admin).await,
        ["ann@acme.example/chat", "bob@acme.example/all"]
    );
    let listed = keys
        .list_inference_keys(owner.browser(kpb::ListInferenceKeysRequest {}))
        .await
        .unwrap()
        .into_inner();
    assert!(
        !format!("{listed:?}").contains(&key[8..]),
        "never the secret"
    );

    // What the access proxy is told of the key.
    let told = authenticate(&internal, Credential::InferenceKey(key.clone())).await;
    assert_eq!(told.user_id, ann.user.to_string());
    assert_eq!(told.subject, "ann@acme.example");
    let grant = told.inference_key.unwrap();
    assert_eq!(grant.key_id, shown.id);
    assert_eq!(
        (grant.all_endpoints, grant.endpoint_ids),
        (false, vec![anns])
    );
    assert_eq!(grant.limits.unwrap().requests_per_minute, Some(3));
    assert!(told.tenant_limits.is_some());
    let as_token = Request::new(ipb::AuthenticateRequest {
        credential: Some(Credential::ApiToken(key.clone())),
        ..ipb::AuthenticateRequest::default()
    });
    assert_code(internal.authenticate(as_token).await, Code::Unauthenticated);

    let revoke = |id: &str| kpb::RevokeInferenceKeyRequest { id: id.into() };
    let bobs_try = keys
        .revoke_inference_key(bob.browser(revoke(&shown.id)))
        .await;
    assert_code(bobs_try, Code::NotFound);
    let revoked = keys
        .revoke_inference_key(admin.browser(revoke(&shown.id)))
        .await
        .unwrap()
        .into_inner();
    assert!(revoked.revoked_at.is_some());
    let gone = Request::new(ipb::AuthenticateRequest {
        credential: Some(Credential::InferenceKey(key)),
        ..ipb::AuthenticateRequest::default()
    });
    assert_code(internal.authenticate(gone).await, Code::Unauthenticated);
    let own = keys
        .revoke_inference_key(bob.browser(revoke(&bobs_key.inference_key.unwrap().id)))
        .await;
    assert!(own.is_ok());
}

/// Everyone reads the tenant's limits; only owners and admins set them, whole; an API token's
/// Authenticate answer carries them for the access proxy.
#[tokio::test]
async fn tenant_limits_are_read_by_everyone_and_set_by_admins() {
    let env = env().await;
    let (keys, internal) = services(&env);
    let owner = env.tenant("acme", None).await;
    let admin = env
        .user(owner.tenant, "admin@acme.example", Role::Admin)
        .await;
    let ann = env
        .user(owner.tenant, "ann@acme.example", Role::Member)
        .await;
    let set = |rpm: Option<u32>, day: Option<u32>| kpb::SetInferenceLimitsRequest {
        limits: Some(kpb::InferenceLimits {
            requests_per_minute: rpm,
            tokens_per_minute: None,
            tokens_per_day: day,
        }),
    };
    let refused = keys
        .set_inference_limits(ann.browser(set(Some(1), None)))
        .await;
    let status = assert_code(refused, Code::PermissionDenied);
    assert!(
        status.message().contains("only an owner or admin"),
        "{status:?}"
    );
    let answer = keys
        .set_inference_limits(admin.browser(set(Some(60), Some(5000))))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(answer.tokens_left_today, Some(5000));
    let read = keys
        .get_inference_limits(ann.req(kpb::GetInferenceLimitsRequest {}))
        .await
        .unwrap()
        .into_inner();
    let limits = read.limits.unwrap();
    assert_eq!(
        (limits.requests_per_minute, limits.tokens_per_day),
        (Some(60), Some(5000))
    );
    let told = authenticate(&internal, Credential::ApiToken(ann.token.clone())).await;
    assert_eq!(told.tenant_limits.unwrap().requests_per_minute, Some(60));
    assert!(
        told.inference_key.is_none(),
        "an API token has no key's grant"
    );

    keys.set_inference_limits(owner.browser(set(None, None)))
        .await
        .unwrap();
    let cleared = keys
        .get_inference_limits(ann.req(kpb::GetInferenceLimitsRequest {}))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(cleared.limits.unwrap(), kpb::InferenceLimits::default());
    assert_eq!(cleared.tokens_left_today, None);
}

/// An inference key is no credential for managing anything: every service refuses it as an
/// unknown token (the e2e user_roles test tries it on every route over HTTP).
#[tokio::test]
async fn an_inference_key_manages_nothing() {
    let env = env().await;
    let (keys, _) = services(&env);
    let owner = env.tenant("acme", None).await;
    let key = keys
        .create_inference_key(owner.browser(create("all", true, &[])))
        .await
        .unwrap()
        .into_inner()
        .key;
    let list = env
        .workloads
        .list_workloads(with_key(&key, pb::ListWorkloadsRequest::default()))
        .await;
    assert_code(list, Code::Unauthenticated);
    let launch = env
        .workloads
        .create_workload(with_key(&key, endpoint("mine")))
        .await;
    assert_code(launch, Code::Unauthenticated);
    let listed = keys
        .list_inference_keys(with_key(&key, kpb::ListInferenceKeysRequest {}))
        .await;
    assert_code(listed, Code::Unauthenticated);
    let made = keys
        .create_inference_key(with_key(&key, create("more", true, &[])))
        .await;
    assert_code(made, Code::Unauthenticated);
    let limits = kpb::SetInferenceLimitsRequest { limits: None };
    let set = keys.set_inference_limits(with_key(&key, limits)).await;
    assert_code(set, Code::Unauthenticated);
    let tokens = einsora_api::accounts::Tokens::new(Arc::new(Auth::new(Arc::clone(&env.store))));
    let minted = tokens
        .list_tokens(with_key(&key, kpb::ListTokensRequest {}))
        .await;
    assert_code(minted, Code::Unauthenticated);
}
