//! The api and the controller as the proxy sees them: real tonic servers over mutual TLS,
//! answering from tables each test fills in.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

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
}

impl Api {
    pub fn add_token(&self, token: &str, who: Who) {
        self.tokens.lock().unwrap().insert(token.into(), who);
    }

    pub fn revoke_token(&self, token: &str) {
        self.tokens.lock().unwrap().remove(token);
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
        let Some(Credential::ApiToken(token)) = request.into_inner().credential else {
            return Err(Status::unauthenticated("no"));
        };
        let who = self.0.tokens.lock().unwrap().get(&token).cloned();
        let who = who.ok_or_else(|| Status::unauthenticated("no"))?;
        Ok(Response::new(pb::AuthenticateResponse {
            tenant_id: who.tenant.into(),
            user_id: who.user.into(),
            subject: who.subject.into(),
            ..Default::default()
        }))
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
        let targets = self.0.targets.lock().unwrap();
        match targets.get(&req.workload_id) {
            Some((tenant, target)) if *tenant == req.tenant_id => Ok(Response::new(target.clone())),
            _ => Err(Status::not_found("no such workload")),
        }
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
