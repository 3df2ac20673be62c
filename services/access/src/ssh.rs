//! `GET /_einsora/ssh` at a VM's host, `Upgrade: einsora-ssh`, `Authorization: Ticket tkt_…`:
//! the one-time ticket (`POST /v1/workloads/{id}/access` on a running VM) becomes one SSH
//! session, a byte stream between the client (`einsora ssh`'s ProxyCommand) and the VM's SSH
//! socket on its machine, here or through the relay; no port opens anywhere. The stream is a
//! session like a notebook's: it ends when its credential is revoked, the VM restarts or the
//! session's lifetime ends, and with the proxy.

use axum::body::Body;
use axum::http::header::{AUTHORIZATION, CONNECTION, HeaderValue, UPGRADE};
use axum::http::{Method, Request, StatusCode};
use axum::response::Response;
use einsora_proto::common::v1::WorkloadKind;
use hyper_util::rt::TokioIo;
use uuid::Uuid;

use crate::app::Proxy;
use crate::errors::{Failure, RequestId};

pub(crate) const PATH: &str = "/_einsora/ssh";
/// The protocol the connection upgrades to.
const PROTOCOL: &str = "einsora-ssh";

const SPENT: &str = "this SSH ticket has expired or was already used; `einsora ssh` asks for one \
     per session";

pub(crate) async fn open(
    proxy: &Proxy,
    workload: Uuid,
    mut request: Request<Body>,
    id: &RequestId,
) -> Result<Response, Failure> {
    if request.method() != Method::GET {
        return Err(Failure::method_not_allowed());
    }
    let headers = request.headers();
    let upgrade = headers
        .get(UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case(PROTOCOL));
    let connection = headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case("upgrade"));
    if !upgrade || !connection {
        return Err(Failure::invalid(
            "an SSH session is an upgrade: `Connection: upgrade`, `Upgrade: einsora-ssh`",
        ));
    }
    let ticket = headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Ticket "))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| Failure::unauthenticated(SPENT))?
        .to_owned();
    let (_, target, ended) = crate::open::redeem(
        proxy,
        (workload, WorkloadKind::Vm),
        &ticket,
        id,
        (SPENT, "this VM isn't running"),
    )
    .await?;
    let guest = crate::forward::connect(&target, &proxy.upstream).await?;
    let client = hyper::upgrade::on(&mut request);
    tracing::info!(%workload, attempt = target.attempt, "SSH session opened");
    tokio::spawn(async move {
        let joined = async {
            let client = client.await?;
            let mut client = TokioIo::new(client);
            let mut guest = guest;
            tokio::io::copy_bidirectional(&mut client, &mut guest).await?;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
        };
        tokio::select! {
            result = joined => if let Err(e) = result {
                tracing::debug!(error = %e, "an SSH session ended with an error");
            },
            () = ended.cancelled() => {}
        }
        ended.trigger();
        tracing::info!(%workload, "SSH session closed");
    });
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let headers = response.headers_mut();
    headers.insert(CONNECTION, HeaderValue::from_static("upgrade"));
    headers.insert(UPGRADE, HeaderValue::from_static(PROTOCOL));
    Ok(response)
}
