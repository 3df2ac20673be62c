//! The two lookups the proxy makes, over mutual TLS: the api says who a ticket or API token
//! belongs to, the controller says where a tenant's ready workload listens now; and a relayed
//! connection, through the controller, to a workload on another machine.

use std::collections::HashSet;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use einsora_proto::common::v1::WorkloadKind;
use einsora_proto::internal::v1 as pb;
use einsora_proto::internal::v1::api_internal_service_client::ApiInternalServiceClient;
use einsora_proto::internal::v1::controller_internal_service_client::ControllerInternalServiceClient;
use tonic::transport::Channel;
use tonic::{Code, Status};
use uuid::Uuid;

use crate::errors::{Failure, RequestId};

const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// When to retry a workload that is starting: its server may take a while.
const STARTING: Duration = Duration::from_secs(5);

/// Who a ticket, API token or inference key belongs to.
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    pub(crate) tenant_id: String,
    pub(crate) user_id: String,
    pub(crate) subject: String,
    /// An inference key's scope and limits (`keys.rs`); `None` for an API token or a ticket.
    pub(crate) key: Option<crate::keys::KeyGrant>,
    /// The tenant's inference limits (endpoints' callers only).
    pub(crate) tenant_limits: crate::keys::TenantLimits,
    /// The request let through those limits and the key's: its answer's headers, and where
    /// its tokens are counted (`ratelimit.rs`); `None` where no limit applies.
    pub(crate) limited: Option<crate::ratelimit::Admitted>,
}

/// How the proxy reaches a workload.
#[derive(Debug, Clone)]
pub(crate) enum Route {
    /// Its socket, on this host.
    Socket(PathBuf),
    /// Through the controller and its machine's agent, for the tenant that asked.
    Relayed { tenant_id: String },
}

/// Where a ready workload listens, and with which token.
#[derive(Clone)]
pub(crate) struct Target {
    pub(crate) kind: WorkloadKind,
    pub(crate) workload: Uuid,
    pub(crate) attempt: u32,
    pub(crate) route: Route,
    /// SECRET: the workload's own token.
    pub(crate) token: String,
    pub(crate) region: String,
    pub(crate) placed_class: String,
    pub(crate) gpu_class: String,
    /// An endpoint's slots: requests its engine serves at once (0: not said).
    pub(crate) slots: u32,
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Target")
            .field("kind", &self.kind)
            .field("workload", &self.workload)
            .field("attempt", &self.attempt)
            .field("route", &self.route)
            .field("region", &self.region)
            .field("placed_class", &self.placed_class)
            .field("slots", &self.slots)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
pub(crate) enum LookupError {
    /// UNAUTHENTICATED or NOT_FOUND: the credential or workload isn't the caller's to use.
    Refused,
    /// FAILED_PRECONDITION: the workload is the caller's, but the proxy may not reach it (on
    /// another machine, or its machine reported a socket that isn't the workload's); the
    /// controller's reason, in the vocabulary of the seeds.
    Unreachable(String),
    /// The workload is running but its machine hasn't said where it listens yet.
    NotReady,
    /// An endpoint parked after its idle time: a request wakes it (`wake.rs`).
    Parked,
    /// The service didn't answer; its status is for the operator's log only.
    Unavailable(Status),
}

impl LookupError {
    /// 503 for an unavailable service (logged here), else `refused`.
    pub(crate) fn failure(self, service: &'static str, refused: Failure) -> Failure {
        match self {
            LookupError::Refused => refused,
            LookupError::Unreachable(why) => Failure::unreachable(why),
            // The workload's state, not a fault: said to the caller, not logged as a failure.
            LookupError::NotReady => {
                tracing::debug!(service, "the workload isn't ready yet");
                Failure::unavailable("it is starting and isn't ready yet; try again shortly")
                    .retry_after(STARTING)
            }
            LookupError::Parked => {
                Failure::unavailable("it is parked after its idle time; try again shortly")
                    .retry_after(STARTING)
            }
            LookupError::Unavailable(status) => {
                tracing::warn!(service, code = ?status.code(), message = status.message(), "lookup failed");
                Failure::unavailable("the service is unavailable right now; try again shortly")
            }
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Upstream {
    api: ApiInternalServiceClient<Channel>,
    /// The region's controllers; only the one leading answers (`ask`).
    controllers: Arc<[ControllerInternalServiceClient<Channel>]>,
    /// Which of them answered last.
    leading: Arc<AtomicUsize>,
    /// Connections to workloads kept alive between requests.
    pub(crate) kept: Arc<crate::kept::Kept>,
}

impl Upstream {
    pub(crate) fn new(api: Channel, controllers: Vec<Channel>) -> Self {
        Upstream {
            api: ApiInternalServiceClient::new(api),
            controllers: controllers
                .into_iter()
                .map(ControllerInternalServiceClient::new)
                .collect(),
            leading: Arc::default(),
            kept: Arc::default(),
        }
    }

    /// `call` made of the region's controllers, from the one that answered last: a standby
    /// (or one that can't be reached) hands it to the next. What the last one tried said if
    /// none answered, the first real failure before a standby's refusal.
    async fn ask<T, F, A>(&self, call: F) -> Result<tonic::Response<T>, Status>
    where
        F: Fn(ControllerInternalServiceClient<Channel>) -> A,
        A: Future<Output = Result<tonic::Response<T>, Status>>,
    {
        let first = self.leading.load(Ordering::Relaxed);
        let count = self.controllers.len();
        let mut failed: Option<Status> = None;
        for i in 0..count {
            let at = (first + i) % count;
            let answer = tokio::time::timeout(CALL_TIMEOUT, call(self.controllers[at].clone()))
                .await
                .unwrap_or_else(|_| Err(Status::deadline_exceeded("no answer in time")));
            match answer {
                Err(status) if is_standby(&status) => {
                    failed.get_or_insert(status);
                }
                Err(status) if unreachable(&status) && count > 1 => failed = Some(status),
                answer => {
                    self.leading.store(at, Ordering::Relaxed);
                    return answer;
                }
            }
        }
        Err(failed.unwrap_or_else(|| Status::unavailable("no controller is configured")))
    }

    pub(crate) async fn authenticate(
        &self,
        api_token: &str,
        id: &RequestId,
    ) -> Result<Caller, LookupError> {
        let request = pb::AuthenticateRequest {
            credential: Some(crate::keys::credential(api_token)),
            ..Default::default()
        };
        let answer = call(self.api.clone().authenticate(request_with(request, id))).await?;
        Ok(Caller {
            key: crate::keys::grant(&answer),
            tenant_limits: crate::keys::tenant_limits(&answer),
            limited: None,
            tenant_id: answer.tenant_id,
            user_id: answer.user_id,
            subject: answer.subject,
        })
    }

    /// Takes a ticket presented at `workload`'s host; the api makes it work once. The caller,
    /// and the grant the session it opens lives as long as.
    pub(crate) async fn redeem(
        &self,
        workload: Uuid,
        ticket: &str,
        id: &RequestId,
    ) -> Result<(Caller, String), LookupError> {
        let request = pb::RedeemTicketRequest {
            workload_id: workload.to_string(),
            ticket: ticket.to_owned(),
        };
        let answer = call(self.api.clone().redeem_ticket(request_with(request, id))).await?;
        if !answer.workload_id.is_empty() && answer.workload_id != workload.to_string() {
            return Err(LookupError::Refused);
        }
        if answer.grant.is_empty() {
            return Err(LookupError::Refused);
        }
        let caller = Caller {
            tenant_id: answer.tenant_id,
            user_id: answer.user_id,
            subject: answer.subject,
            key: None,
            tenant_limits: crate::keys::TenantLimits::default(),
            limited: None,
        };
        Ok((caller, answer.grant))
    }

    /// Which of `grants` still stand.
    pub(crate) async fn live_grants(
        &self,
        grants: Vec<String>,
    ) -> Result<HashSet<String>, LookupError> {
        let request = pb::LiveGrantsRequest { grants };
        let answer = call(
            self.api
                .clone()
                .live_grants(request_with(request, &RequestId::new())),
        )
        .await?;
        Ok(answer.live.into_iter().collect())
    }

    pub(crate) async fn resolve(
        &self,
        workload: Uuid,
        tenant_id: &str,
        id: &RequestId,
    ) -> Result<Target, LookupError> {
        let request = pb::ResolveAccessTargetRequest {
            workload_id: workload.to_string(),
            tenant_id: tenant_id.to_owned(),
        };
        // `ask` gives each controller its own time; none is added here.
        let asked = self.ask(|mut controller| {
            let request = request_with(request.clone(), id);
            async move { controller.resolve_access_target(request).await }
        });
        let answer = answered(asked.await)?;
        target_of(answer, workload, tenant_id)
    }

    /// The tenant's endpoints, running or starting, with the names they serve, and where
    /// those the proxy may reach listen now (the one base URL, `gateway.rs`).
    pub(crate) async fn served(
        &self,
        tenant_id: &str,
        id: &RequestId,
    ) -> Result<Vec<Served>, LookupError> {
        let request = pb::ListServedModelsRequest {
            tenant_id: tenant_id.to_owned(),
        };
        let asked = self.ask(|mut controller| {
            let request = request_with(request.clone(), id);
            async move { controller.list_served_models(request).await }
        });
        let answer = answered(asked.await)?;
        let served = answer.models.into_iter().filter_map(|m| {
            let workload = Uuid::try_parse(&m.workload_id).ok()?;
            // A target it can't make sense of is as none: that endpoint isn't reached.
            let target = m.target.and_then(|t| {
                let target = target_of(t, workload, tenant_id).ok()?;
                (target.kind == WorkloadKind::Endpoint).then(|| Arc::new(target))
            });
            Some(Served {
                workload,
                name: m.served_name,
                cpu: m.cpu,
                parked: m.parked,
                target,
            })
        });
        Ok(served.collect())
    }
}

/// One of a tenant's endpoints as the one base URL sees it.
#[derive(Debug, Clone)]
pub(crate) struct Served {
    pub(crate) workload: Uuid,
    /// The name it serves its model under.
    pub(crate) name: String,
    /// It runs on a CPU class: a fallback for its name's GPU replicas.
    pub(crate) cpu: bool,
    /// Parked after its idle time, and nothing else serves its name: a request wakes it.
    pub(crate) parked: bool,
    /// Where it listens; `None` while it starts or can't be reached.
    pub(crate) target: Option<Arc<Target>>,
}

/// What the controller said of `workload`, as a target for the tenant that asked.
fn target_of(
    answer: pb::ResolveAccessTargetResponse,
    workload: Uuid,
    tenant_id: &str,
) -> Result<Target, LookupError> {
    let route = match (answer.relayed, answer.socket_path.is_empty()) {
        (true, _) => Route::Relayed {
            tenant_id: tenant_id.to_owned(),
        },
        (false, false) => Route::Socket(PathBuf::from(&answer.socket_path)),
        (false, true) => return Err(LookupError::Refused),
    };
    Ok(Target {
        kind: answer.kind(),
        workload,
        attempt: answer.attempt,
        route,
        token: answer.token,
        region: answer.region,
        placed_class: answer.placed_class,
        gpu_class: answer.gpu_class,
        slots: answer.slots,
    })
}

impl Upstream {
    /// A connection to `workload`'s `attempt` on another machine, through the controller
    /// (`ControllerInternalService.Relay`): the proxy's end of it, as a local stream, once the
    /// machine's agent opened the workload's socket.
    pub(crate) async fn relay(
        &self,
        workload: Uuid,
        tenant_id: &str,
        attempt: u32,
    ) -> Result<tokio::io::DuplexStream, Status> {
        let to = pb::RelayTo {
            workload_id: workload.to_string(),
            tenant_id: tenant_id.to_owned(),
            attempt,
        };
        // A stream for each controller tried: the first frame names the workload.
        let (tx, down) = self
            .ask(|mut controller| {
                let (tx, rx) = tokio::sync::mpsc::channel(2);
                let first = pb::RelayFrame {
                    frame: Some(pb::relay_frame::Frame::To(to.clone())),
                };
                let _ = tx.try_send(first);
                let mut request =
                    tonic::Request::new(tokio_stream::wrappers::ReceiverStream::new(rx));
                einsora_runtime::telemetry::traces::inject_metadata(request.metadata_mut());
                async move {
                    let opened = controller.relay(request).await?;
                    Ok(opened.map(|down| (tx, down)))
                }
            })
            .await?
            .into_inner();
        let (ours, theirs) = tokio::io::duplex(einsora_proto::RELAY_MAX_FRAME);
        tokio::spawn(einsora_runtime::relay_io::carry(theirs, tx, down));
        Ok(ours)
    }
}

impl Upstream {
    /// Hands the api a batch of token counts (`tally.rs`); added once, however often sent.
    pub(crate) async fn record_token_usage(
        &self,
        batch: pb::RecordTokenUsageRequest,
    ) -> Result<(), Status> {
        let request = request_with(batch, &RequestId::new());
        let mut api = self.api.clone();
        match tokio::time::timeout(CALL_TIMEOUT, api.record_token_usage(request)).await {
            Ok(answer) => answer.map(drop),
            Err(_) => Err(Status::deadline_exceeded("no answer in time")),
        }
    }
}

impl Upstream {
    /// Asks the api to start a parked endpoint for `caller` (`ApiInternalService.WakeEndpoint`):
    /// `true` if this started it, `false` if it was on its way already.
    pub(crate) async fn wake(
        &self,
        endpoint: Uuid,
        caller: &Caller,
        id: &RequestId,
    ) -> Result<bool, LookupError> {
        let request = pb::WakeEndpointRequest {
            tenant_id: caller.tenant_id.clone(),
            user_id: caller.user_id.clone(),
            endpoint_id: endpoint.to_string(),
            key_id: caller
                .key
                .as_ref()
                .map(|k| k.key_id.clone())
                .unwrap_or_default(),
        };
        let answer = call(self.api.clone().wake_endpoint(request_with(request, id))).await?;
        Ok(answer.started)
    }

    /// Tells the controller which endpoints were used since the last report (`touch.rs`).
    pub(crate) async fn touch(&self, endpoints: &[Uuid]) -> Result<(), LookupError> {
        let request = pb::TouchEndpointsRequest {
            endpoint_ids: endpoints.iter().map(Uuid::to_string).collect(),
        };
        let id = RequestId::new();
        let asked = self.ask(|mut controller| {
            let request = request_with(request.clone(), &id);
            async move { controller.touch_endpoints(request).await }
        });
        answered(asked.await).map(drop)
    }
}

fn request_with<T>(message: T, id: &RequestId) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.set_timeout(CALL_TIMEOUT);
    if let Ok(value) = id.as_str().parse() {
        request.metadata_mut().insert("x-request-id", value);
    }
    einsora_runtime::telemetry::traces::inject_metadata(request.metadata_mut());
    request
}

/// A controller's refusal as a standby: another leads.
fn is_standby(status: &Status) -> bool {
    marked(status, einsora_proto::metadata::STANDBY)
}

fn marked(status: &Status, mark: &str) -> bool {
    status.code() == Code::Unavailable
        && status
            .metadata()
            .get(einsora_proto::metadata::ERROR)
            .is_some_and(|v| v == mark)
}

/// No answer at all from that controller (down, or not there; tonic's own transport errors
/// are UNKNOWN): another may be up.
fn unreachable(status: &Status) -> bool {
    let code = status.code();
    matches!(
        code,
        Code::Unavailable | Code::DeadlineExceeded | Code::Unknown
    ) && status
        .metadata()
        .get(einsora_proto::metadata::ERROR)
        .is_none()
}

async fn call<T>(
    answer: impl Future<Output = Result<tonic::Response<T>, Status>>,
) -> Result<T, LookupError> {
    match tokio::time::timeout(CALL_TIMEOUT, answer).await {
        Ok(answer) => answered(answer),
        Err(_) => Err(LookupError::Unavailable(Status::deadline_exceeded(
            "no answer in time",
        ))),
    }
}

/// A service's answer, or why there is none, in the proxy's terms.
fn answered<T>(answer: Result<tonic::Response<T>, Status>) -> Result<T, LookupError> {
    match answer {
        Ok(answer) => Ok(answer.into_inner()),
        Err(status) if matches!(status.code(), Code::Unauthenticated | Code::NotFound) => {
            Err(LookupError::Refused)
        }
        Err(status) if status.code() == Code::FailedPrecondition => {
            Err(LookupError::Unreachable(status.message().to_owned()))
        }
        Err(status) if marked(&status, einsora_proto::metadata::NOT_READY) => {
            Err(LookupError::NotReady)
        }
        Err(status) if marked(&status, einsora_proto::metadata::PARKED) => Err(LookupError::Parked),
        Err(status) => Err(LookupError::Unavailable(status)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The controller's "not ready yet" is the workload's state, told apart from an outage by
    /// its mark: the caller is told to retry, and nothing is logged as a failure.
    #[tokio::test]
    async fn not_ready_is_told_apart_from_an_unavailable_service() {
        let mut marked = Status::unavailable("its machine hasn't reported it ready yet");
        marked.metadata_mut().insert(
            einsora_proto::metadata::ERROR,
            tonic::metadata::MetadataValue::from_static(einsora_proto::metadata::NOT_READY),
        );
        let answer = call::<()>(async { Err(marked) }).await;
        assert!(matches!(answer, Err(LookupError::NotReady)), "{answer:?}");
        let down = call::<()>(async { Err(Status::unavailable("connection refused")) }).await;
        assert!(matches!(down, Err(LookupError::Unavailable(_))), "{down:?}");
    }
}
