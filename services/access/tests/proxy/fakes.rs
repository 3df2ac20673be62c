//! The api and the controller as the proxy sees them: real tonic servers over mutual TLS,
//! answering from tables each test fills in.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use einsora_proto::accounts::v1::InferenceLimits;
use einsora_proto::common::v1::WorkloadKind;
use einsora_proto::internal::v1 as pb;
use einsora_proto::internal::v1::api_internal_service_server::{
    ApiInternalService, ApiInternalServiceServer,
};
use einsora_proto::internal::v1::authenticate_request::Credential;
use einsora_proto::internal::v1::controller_internal_service_server::{
    ControllerInternalService, ControllerInternalServiceServer,
};
use tokio_stream::wrappers::ReceiverStream;
use tonic::service::Routes;
use tonic::{Request, Response, Status, Streaming};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Who {
    pub tenant: &'static str,
    pub user: &'static str,
    pub subject: &'static str,
}

pub const ALICE: Who = Who {
    tenant: "0190a5b2-0000-7000-8000-00000000a11c",
    user: "0190a5b2-0000-7000-8000-0000000000a1",
    subject: "alice@example.com",
};
pub const BOB: Who = Who {
    tenant: "0190a5b2-0000-7000-8000-000000000b0b",
    user: "0190a5b2-0000-7000-8000-0000000000b1",
    subject: "bob@example.com",
};

/// API tokens and one-time tickets, each ticket taken at most once, at its workload only,
/// and the grants behind tickets (`grant-<ticket>`), live until ended.
#[derive(Debug, Default)]
pub struct Api {
    tokens: Mutex<HashMap<String, Who>>,
    tickets: Mutex<HashMap<String, (String, Who)>>,
    ended_grants: Mutex<HashSet<String>>,
    pub authentications: AtomicUsize,
    /// LiveGrants calls answered so far.
    pub grant_checks: AtomicUsize,
    /// Token counts taken (RecordTokenUsage), by batch ID: a batch sent again is taken once.
    pub token_batches: Mutex<HashMap<String, Vec<pb::TokenCount>>>,
    /// RecordTokenUsage calls to fail (UNAVAILABLE) before taking any.
    pub token_failures: AtomicUsize,
    /// Inference keys: whose, and what each may call.
    keys: Mutex<HashMap<String, (Who, pb::InferenceGrant)>>,
    /// Tenants' inference limits, and the tokens recorded for them today.
    tenant_limits: Mutex<HashMap<&'static str, (InferenceLimits, u64)>>,
    /// WakeEndpoint calls, in order.
    pub wakes: Mutex<Vec<pb::WakeEndpointRequest>>,
    /// The controller a wake starts the endpoint on (`Controller::wake`).
    pub controller: std::sync::OnceLock<Arc<Controller>>,
}

impl Api {
    pub fn add_token(&self, token: &str, who: Who) {
        self.tokens.lock().unwrap().insert(token.into(), who);
    }

    pub fn revoke_token(&self, token: &str) {
        self.tokens.lock().unwrap().remove(token);
    }

    /// An inference key of `who`'s for `endpoints` (none: all of the tenant's), with limits.
    pub fn add_key(&self, key: &str, who: Who, endpoints: &[uuid::Uuid], limits: InferenceLimits) {
        let grant = pb::InferenceGrant {
            key_id: format!("id-of-{key}"),
            all_endpoints: endpoints.is_empty(),
            endpoint_ids: endpoints.iter().map(ToString::to_string).collect(),
            limits: Some(limits),
            tokens_today: 0,
        };
        self.keys.lock().unwrap().insert(key.into(), (who, grant));
    }

    pub fn revoke_key(&self, key: &str) {
        self.keys.lock().unwrap().remove(key);
    }

    /// The tenant's inference limits, and the tokens recorded for it today.
    pub fn limit_tenant(&self, who: &Who, limits: InferenceLimits, tokens_today: u64) {
        let entry = (limits, tokens_today);
        self.tenant_limits.lock().unwrap().insert(who.tenant, entry);
    }

    /// The credential that asked for `ticket` ends (a logout, say).
    pub fn end_grant_of(&self, ticket: &str) {
        let grant = format!("grant-{ticket}");
        self.ended_grants.lock().unwrap().insert(grant);
    }

    pub fn add_ticket(&self, ticket: &str, workload: &str, who: Who) {
        let entry = (workload.to_owned(), who);
        self.tickets.lock().unwrap().insert(ticket.into(), entry);
    }
}

#[derive(Debug, Clone)]
pub struct FakeApi(pub Arc<Api>);

#[tonic::async_trait]
impl ApiInternalService for FakeApi {
    async fn authenticate(
        &self,
        request: Request<pb::AuthenticateRequest>,
    ) -> Result<Response<pb::AuthenticateResponse>, Status> {
        self.0.authentications.fetch_add(1, Ordering::SeqCst);
        let (who, grant) = match request.into_inner().credential {
            Some(Credential::ApiToken(token)) => {
                let who = self.0.tokens.lock().unwrap().get(&token).cloned();
                (who, None)
            }
            Some(Credential::InferenceKey(key)) => {
                match self.0.keys.lock().unwrap().get(&key).cloned() {
                    Some((who, grant)) => (Some(who), Some(grant)),
                    None => (None, None),
                }
            }
            _ => (None, None),
        };
        let who = who.ok_or_else(|| Status::unauthenticated("no"))?;
        let limits = self.0.tenant_limits.lock().unwrap();
        let (tenant_limits, tenant_tokens_today) =
            limits.get(who.tenant).cloned().unwrap_or_default();
        drop(limits);
        Ok(Response::new(pb::AuthenticateResponse {
            tenant_id: who.tenant.into(),
            user_id: who.user.into(),
            subject: who.subject.into(),
            inference_key: grant,
            tenant_limits: Some(tenant_limits),
            tenant_tokens_today,
            ..Default::default()
        }))
    }

    async fn wake_endpoint(
        &self,
        request: Request<pb::WakeEndpointRequest>,
    ) -> Result<Response<pb::WakeEndpointResponse>, Status> {
        let req = request.into_inner();
        let id = req.endpoint_id.clone();
        self.0.wakes.lock().unwrap().push(req);
        let started = match self.0.controller.get() {
            Some(controller) => controller.wake(&id),
            None => false,
        };
        Ok(Response::new(pb::WakeEndpointResponse { started }))
    }

    async fn redeem_ticket(
        &self,
        request: Request<pb::RedeemTicketRequest>,
    ) -> Result<Response<pb::RedeemTicketResponse>, Status> {
        let req = request.into_inner();
        let mut tickets = self.0.tickets.lock().unwrap();
        match tickets.get(&req.ticket) {
            Some((workload, _)) if *workload == req.workload_id => {}
            _ => return Err(Status::unauthenticated("no")),
        }
        let (workload, who) = tickets.remove(&req.ticket).unwrap();
        Ok(Response::new(pb::RedeemTicketResponse {
            workload_id: workload,
            tenant_id: who.tenant.into(),
            user_id: who.user.into(),
            subject: who.subject.into(),
            grant: format!("grant-{}", req.ticket),
        }))
    }

    async fn live_grants(
        &self,
        request: Request<pb::LiveGrantsRequest>,
    ) -> Result<Response<pb::LiveGrantsResponse>, Status> {
        self.0.grant_checks.fetch_add(1, Ordering::SeqCst);
        let ended = self.0.ended_grants.lock().unwrap();
        let live = request
            .into_inner()
            .grants
            .into_iter()
            .filter(|g| g.starts_with("grant-") && !ended.contains(g))
            .collect();
        Ok(Response::new(pb::LiveGrantsResponse { live }))
    }

    async fn record_token_usage(
        &self,
        request: Request<pb::RecordTokenUsageRequest>,
    ) -> Result<Response<pb::RecordTokenUsageResponse>, Status> {
        let failing = self.0.token_failures.load(Ordering::SeqCst);
        if failing > 0 {
            self.0.token_failures.store(failing - 1, Ordering::SeqCst);
            return Err(Status::unavailable("the api is restarting"));
        }
        let batch = request.into_inner();
        let mut batches = self.0.token_batches.lock().unwrap();
        let added = !batches.contains_key(&batch.batch_id);
        batches.entry(batch.batch_id).or_insert(batch.counts);
        Ok(Response::new(pb::RecordTokenUsageResponse { added }))
    }
}

/// Each running, ready workload: its tenant and target; and where the relayed ones' sockets
/// are (standing in for their machines' agents).
#[derive(Debug, Default)]
pub struct Controller {
    targets: Mutex<HashMap<String, (String, pb::ResolveAccessTargetResponse)>>,
    relayed: Mutex<HashMap<String, String>>,
    /// ResolveAccessTarget calls answered so far.
    pub resolutions: AtomicUsize,
    /// Relayed connections made so far.
    pub relays: AtomicUsize,
    /// Answers everything as a standby does: another controller leads.
    pub standby: std::sync::atomic::AtomicBool,
    /// Calls refused as a standby.
    pub refused: AtomicUsize,
    /// Workloads answered as starting (not ready yet), whoever asks.
    starting: Mutex<HashSet<String>>,
    /// Endpoints' served names and whether each is on a CPU class (`ListServedModels`).
    served: Mutex<HashMap<String, (String, bool)>>,
    /// ListServedModels calls answered so far.
    pub listings: AtomicUsize,
    /// Endpoints parked after their idle time (answered PARKED until woken).
    parked: Mutex<HashSet<String>>,
    /// How long a woken endpoint starts for before it is ready.
    pub wake_takes: Mutex<std::time::Duration>,
    /// Endpoints reported used (TouchEndpoints), every report's in order.
    pub touched: Mutex<Vec<String>>,
}

impl Controller {
    fn refuse_as_standby(&self) -> Result<(), Status> {
        if !self.standby.load(Ordering::SeqCst) {
            return Ok(());
        }
        self.refused.fetch_add(1, Ordering::SeqCst);
        let mut status = Status::unavailable("this controller stands by");
        status.metadata_mut().insert(
            einsora_proto::metadata::ERROR,
            tonic::metadata::MetadataValue::from_static(einsora_proto::metadata::STANDBY),
        );
        Err(status)
    }
}

impl Controller {
    pub fn run(&self, workload: &str, who: &Who, kind: WorkloadKind, socket: &str, token: &str) {
        let target = pb::ResolveAccessTargetResponse {
            workload_id: workload.into(),
            kind: kind.into(),
            attempt: 1,
            socket_path: socket.into(),
            token: token.into(),
            region: "local".into(),
            placed_class: "cpu-small".into(),
            gpu_class: "cpu-small".into(),
            relayed: false,
            // Not said, as by a controller before slots: the proxy's setting alone.
            slots: 0,
        };
        let entry = (who.tenant.to_owned(), target);
        self.targets.lock().unwrap().insert(workload.into(), entry);
    }

    pub fn change(
        &self,
        workload: &str,
        change: impl FnOnce(&mut pb::ResolveAccessTargetResponse),
    ) {
        let mut targets = self.targets.lock().unwrap();
        change(&mut targets.get_mut(workload).unwrap().1);
    }

    /// The workload runs on another machine from now on: the proxy is told to relay, and the
    /// relay reaches its socket.
    pub fn relay(&self, workload: &str) {
        let mut targets = self.targets.lock().unwrap();
        let target = &mut targets.get_mut(workload).unwrap().1;
        let socket = std::mem::take(&mut target.socket_path);
        target.relayed = true;
        self.relayed.lock().unwrap().insert(workload.into(), socket);
    }

    pub fn stop(&self, workload: &str) {
        self.targets.lock().unwrap().remove(workload);
    }

    /// The endpoint serves its model as `name` (the one base URL), on a CPU class or not.
    pub fn serve_as(&self, workload: &str, name: &str, cpu: bool) {
        let entry = (name.to_owned(), cpu);
        self.served.lock().unwrap().insert(workload.into(), entry);
    }

    /// The endpoint is parked after its idle time, until a request wakes it.
    pub fn park(&self, workload: &str) {
        self.parked.lock().unwrap().insert(workload.into());
    }

    /// Starts a parked endpoint: starting for `wake_takes`, then ready. False if it wasn't
    /// parked.
    pub fn wake(self: &Arc<Self>, workload: &str) -> bool {
        if !self.parked.lock().unwrap().remove(workload) {
            return false;
        }
        self.starting(workload, true);
        let takes = *self.wake_takes.lock().unwrap();
        let (me, workload) = (Arc::clone(self), workload.to_owned());
        tokio::spawn(async move {
            tokio::time::sleep(takes).await;
            me.starting(&workload, false);
        });
        true
    }

    /// The workload's engine is starting (`true`) or ready again.
    pub fn starting(&self, workload: &str, starting: bool) {
        let mut all = self.starting.lock().unwrap();
        if starting {
            all.insert(workload.into());
        } else {
            all.remove(workload);
        }
    }
}

#[derive(Debug, Clone)]
pub struct FakeController(pub Arc<Controller>);

#[tonic::async_trait]
impl ControllerInternalService for FakeController {
    async fn resolve_access_target(
        &self,
        request: Request<pb::ResolveAccessTargetRequest>,
    ) -> Result<Response<pb::ResolveAccessTargetResponse>, Status> {
        self.0.refuse_as_standby()?;
        let req = request.into_inner();
        self.0.resolutions.fetch_add(1, Ordering::SeqCst);
        let parked = self.0.parked.lock().unwrap().contains(&req.workload_id);
        let theirs = (self.0.targets.lock().unwrap().get(&req.workload_id))
            .is_some_and(|(tenant, _)| *tenant == req.tenant_id);
        if parked && theirs {
            let mut status = Status::unavailable("it is parked after its idle time");
            status.metadata_mut().insert(
                einsora_proto::metadata::ERROR,
                tonic::metadata::MetadataValue::from_static(einsora_proto::metadata::PARKED),
            );
            return Err(status);
        }
        if self.0.starting.lock().unwrap().contains(&req.workload_id) {
            let mut status = Status::unavailable("its machine hasn't reported it ready");
            status.metadata_mut().insert(
                einsora_proto::metadata::ERROR,
                tonic::metadata::MetadataValue::from_static(einsora_proto::metadata::NOT_READY),
            );
            return Err(status);
        }
        let targets = self.0.targets.lock().unwrap();
        match targets.get(&req.workload_id) {
            Some((tenant, target)) if *tenant == req.tenant_id => Ok(Response::new(target.clone())),
            _ => Err(Status::not_found("no such workload")),
        }
    }

    async fn list_served_models(
        &self,
        request: Request<pb::ListServedModelsRequest>,
    ) -> Result<Response<pb::ListServedModelsResponse>, Status> {
        self.0.refuse_as_standby()?;
        let tenant = request.into_inner().tenant_id;
        self.0.listings.fetch_add(1, Ordering::SeqCst);
        let targets = self.0.targets.lock().unwrap();
        let starting = self.0.starting.lock().unwrap();
        let served = self.0.served.lock().unwrap();
        let parked = self.0.parked.lock().unwrap();
        let models = served
            .iter()
            .filter_map(|(workload, (name, cpu))| {
                let (owner, target) = targets.get(workload)?;
                let asleep = parked.contains(workload);
                (*owner == tenant).then(|| pb::ServedModel {
                    served_name: name.clone(),
                    target: (!starting.contains(workload) && !asleep).then(|| target.clone()),
                    cpu: *cpu,
                    workload_id: workload.clone(),
                    parked: asleep,
                })
            })
            .collect();
        Ok(Response::new(pb::ListServedModelsResponse { models }))
    }

    async fn touch_endpoints(
        &self,
        request: Request<pb::TouchEndpointsRequest>,
    ) -> Result<Response<pb::TouchEndpointsResponse>, Status> {
        self.0.refuse_as_standby()?;
        let ids = request.into_inner().endpoint_ids;
        self.0.touched.lock().unwrap().extend(ids);
        Ok(Response::new(pb::TouchEndpointsResponse {}))
    }

    type RelayStream = Frames;

    async fn relay(
        &self,
        request: Request<Streaming<pb::RelayFrame>>,
    ) -> Result<Response<Frames>, Status> {
        self.0.refuse_as_standby()?;
        let mut frames = request.into_inner();
        let Some(pb::RelayFrame {
            frame: Some(pb::relay_frame::Frame::To(to)),
        }) = frames.message().await?
        else {
            return Err(Status::invalid_argument("a relay names its workload first"));
        };
        let socket = {
            let targets = self.0.targets.lock().unwrap();
            let ours = targets
                .get(&to.workload_id)
                .is_some_and(|(tenant, target)| {
                    *tenant == to.tenant_id && target.relayed && target.attempt == to.attempt
                });
            let relayed = self.0.relayed.lock().unwrap();
            match relayed.get(&to.workload_id) {
                Some(socket) if ours => socket.clone(),
                _ => return Err(Status::not_found("no such workload")),
            }
        };
        let stream = tokio::net::UnixStream::connect(&socket)
            .await
            .map_err(|e| Status::unavailable(format!("its machine refused: {e}")))?;
        self.0.relays.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = tokio::sync::mpsc::channel(2);
        let (up, down) = tokio::sync::mpsc::channel(2);
        tokio::spawn(einsora_runtime::relay_io::carry(stream, up, frames));
        // The proxy's frames carry on as `Ok` items.
        tokio::spawn(async move {
            let mut down = down;
            while let Some(frame) = down.recv().await {
                if tx.send(Ok(frame)).await.is_err() {
                    break;
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

type Frames =
    std::pin::Pin<Box<dyn tokio_stream::Stream<Item = Result<pb::RelayFrame, Status>> + Send>>;

pub fn api_routes(api: &Arc<Api>) -> Routes {
    Routes::new(ApiInternalServiceServer::new(FakeApi(Arc::clone(api))))
}

pub fn controller_routes(controller: &Arc<Controller>) -> Routes {
    Routes::new(ControllerInternalServiceServer::new(FakeController(
        Arc::clone(controller),
    )))
}
