use einsora_proto::workloads::v1 as pb;
use einsora_proto::workloads::v1::workload_service_server::WorkloadService;
use tonic::Code;

use crate::{assert_code, env};

/// A database that fails while a credential is checked is UNAVAILABLE (the gateway's 503 with
/// Retry-After), not INTERNAL: retrying may help.
#[tokio::test]
async fn a_store_outage_while_authenticating_is_unavailable() {
    let env = env().await;
    let acme = env.tenant("acme", None).await;
    // The table a token is looked up in disappears, as far as the store's queries can tell.
    env.sql("ALTER TABLE api_tokens RENAME TO api_tokens_away");
    let list = env
        .workloads
        .list_workloads(acme.req(pb::ListWorkloadsRequest::default()))
        .await;
    let status = assert_code(list, Code::Unavailable);
    assert!(!status.message().contains("api_tokens"), "{status:?}");
}
