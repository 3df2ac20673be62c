//! Quotas in CPUs and memory over the service as the gateway calls it: only a CPU class's row
//! limits them, a refusal says which limit and in what, and the list shows what each row holds
//! in CPUs and memory.

use einsora_core::role::Role;
use einsora_proto::accounts::v1 as quotas_pb;
use einsora_proto::accounts::v1::quota_service_server::QuotaService;
use tonic::Code;

use crate::{Who, env, error_code, notebook};

fn set(
    scope: quotas_pb::QuotaScope,
    who: Option<&Who>,
    class: &str,
    limit: Option<u32>,
    cpus: Option<u32>,
    memory_gib: Option<u32>,
) -> quotas_pb::SetQuotaRequest {
    quotas_pb::SetQuotaRequest {
        scope: scope.into(),
        subject_id: who.map(|w| w.user.to_string()).unwrap_or_default(),
        gpu_class: class.into(),
        limit,
        cpus,
        memory_gib,
    }
}

/// CPU and memory limits on a GPU class or `*` are refused, naming the field and why; on a CPU
/// class they refuse the create that would pass them, and the list shows them with what is
/// held in CPUs and memory.
#[tokio::test]
async fn cpu_and_memory_limits_are_a_cpu_class_s_and_listed_with_what_is_held() {
    use quotas_pb::QuotaScope::{Tenant, User};
    let env = env().await;
    let owner = env.tenant("acme", None).await;
    let ann = env
        .user(owner.tenant, "ann@acme.example", Role::Member)
        .await;
    let quotas = &env.quotas;

    let on_gpu = quotas.set_quota(owner.req(set(Tenant, None, "h100-80gb", None, Some(8), None)));
    let refused = on_gpu.await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert_eq!(
        refused.message(),
        "cpus: cpus and memory_gib limit CPU classes; h100-80gb is a GPU class"
    );
    let on_default = quotas.set_quota(owner.req(set(Tenant, None, "*", None, None, Some(64))));
    let refused = on_default.await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert_eq!(
        refused.message(),
        "memory_gib: cpus and memory_gib limit CPU classes; `*` stands for every class without \
         a row"
    );
    let by_member = quotas.set_quota(ann.req(set(Tenant, None, "cpu-4c-16g", None, Some(8), None)));
    assert_eq!(by_member.await.unwrap_err().code(), Code::PermissionDenied);
    // A GPU class's limit in GPUs is as before.
    quotas
        .set_quota(owner.req(set(Tenant, None, "h100-80gb", Some(2), None, None)))
        .await
        .unwrap();

    // cpu-4c-16g: 4 CPUs and 16 GiB a workload.
    quotas
        .set_quota(owner.req(set(Tenant, None, "cpu-4c-16g", None, Some(8), None)))
        .await
        .unwrap();
    let ann_memory = set(User, Some(&ann), "cpu-4c-16g", None, None, Some(16));
    quotas.set_quota(owner.req(ann_memory)).await.unwrap();
    env.create(&ann, notebook("one", "cpu-4c-16g"))
        .await
        .unwrap();
    let over = env.create(&ann, notebook("two", "cpu-4c-16g")).await;
    let refused = over.unwrap_err();
    assert_eq!(error_code(&refused), "quota_exceeded", "{refused:?}");
    assert_eq!(
        refused.message(),
        "ann@acme.example's quota for cpu-4c-16g exceeded: 16 GiB of memory held, 16 requested, \
         limit 16"
    );
    env.create(&owner, notebook("three", "cpu-4c-16g"))
        .await
        .unwrap();
    let over = env.create(&owner, notebook("four", "cpu-4c-16g")).await;
    assert_eq!(
        over.unwrap_err().message(),
        "the tenant's quota for cpu-4c-16g exceeded: 8 CPUs held, 4 requested, limit 8"
    );

    let listed = quotas
        .list_quotas(ann.req(quotas_pb::ListQuotasRequest {}))
        .await
        .unwrap()
        .into_inner()
        .quotas;
    let row = |scope: quotas_pb::QuotaScope, class: &str| {
        listed
            .iter()
            .find(|q| q.scope == i32::from(scope) && q.gpu_class == class)
            .unwrap_or_else(|| panic!("{listed:?}"))
            .clone()
    };
    let tenants = row(Tenant, "cpu-4c-16g");
    assert_eq!(
        (tenants.limit, tenants.cpus, tenants.memory_gib),
        (None, Some(8), None)
    );
    assert_eq!(
        (tenants.held, tenants.held_cpus, tenants.held_memory_gib),
        (2, 8, 32)
    );
    let anns = row(User, "cpu-4c-16g");
    assert_eq!((anns.cpus, anns.memory_gib), (None, Some(16)));
    assert_eq!((anns.held_cpus, anns.held_memory_gib), (4, 16));
    let gpus = row(Tenant, "h100-80gb");
    assert_eq!(
        (gpus.limit, gpus.cpus, gpus.held_cpus, gpus.held_memory_gib),
        (Some(2), None, 0, 0)
    );

    // No limit at all: a user's row goes.
    let none = set(User, Some(&ann), "cpu-4c-16g", None, None, None);
    let answer = quotas
        .set_quota(owner.req(none))
        .await
        .unwrap()
        .into_inner();
    assert!(
        !answer.quotas.iter().any(|q| q.scope == i32::from(User)),
        "{answer:?}"
    );
}
