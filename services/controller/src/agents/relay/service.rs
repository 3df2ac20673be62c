//! The relay's side of the agents' port: an agent's listening stream (served while this
//! controller leads, and while the machine's certificate is good: the revocation sweep, as
//! for Sync), and
//! its tunnels, each answering one request of its own machine.

use std::pin::Pin;
use std::sync::Arc;

use einsora_proto::agent::v1 as pb;
use einsora_proto::agent::v1::relay_service_server::{RelayService, RelayServiceServer};
use einsora_runtime::shutdown::Shutdown;
use einsora_store::Store;
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use super::{ANSWER_WITHIN, MAX_FRAME, Relays};
use crate::agents::hub::Hub;
use crate::agents::identity::identity;
use crate::agents::refusal::Refusal;
use crate::agents::trust::Trust;

/// The longest reason for a refusal kept from an agent (it is logged).
const MAX_REFUSAL: usize = 200;

#[derive(Debug, Clone)]
pub struct RelayApi {
    pub store: Arc<dyn Store>,
    pub hub: Arc<Hub>,
    pub relays: Arc<Relays>,
    pub trust: Arc<Trust>,
    pub shutdown: Shutdown,
}

impl RelayApi {
    /// The service, refusing a frame larger than [`MAX_FRAME`] and its framing from its
    /// length, before reading it.
    pub fn into_server(self) -> RelayServiceServer<RelayApi> {
        RelayServiceServer::new(self).max_decoding_message_size(MAX_FRAME + 1024)
    }
}

type Requests = Pin<Box<dyn Stream<Item = Result<pb::OpenRequest, Status>> + Send>>;
type Frames = Pin<Box<dyn Stream<Item = Result<pb::TunnelFrame, Status>> + Send>>;

#[tonic::async_trait]
impl RelayService for RelayApi {
    type ListenStream = Requests;
    type TunnelStream = Frames;

    async fn listen(
        &self,
        request: Request<pb::ListenRequest>,
    ) -> Result<Response<Requests>, Status> {
        let (machine, fingerprint) = identity(&request)?;
        if !self.hub.leading() {
            return Err(Refusal::Standby.into());
        }
        self.store
            .machine_for_certificate(machine, &fingerprint)
            .await
            .map_err(Refusal::from)?
            .ok_or(Refusal::Revoked)?;
        let (tx, rx) = mpsc::channel(8);
        let id = self.relays.listen(machine, tx.clone());
        let watch = self.trust.watch(fingerprint);
        let api = self.clone();
        tokio::spawn(async move {
            let ended = tokio::select! {
                () = api.shutdown.cancelled() => None,
                () = api.hub.standing_by() => Some(Refusal::Standby),
                () = tx.closed() => None,
                () = watch.revoked() => Some(Refusal::Revoked),
            };
            api.relays.unlisten(machine, id);
            if let Some(refusal) = ended {
                let _ = tx.try_send(Err(refusal.into()));
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn tunnel(
        &self,
        request: Request<Streaming<pb::TunnelFrame>>,
    ) -> Result<Response<Frames>, Status> {
        let (machine, _) = identity(&request)?;
        let mut inbound = request.into_inner();
        let first = tokio::time::timeout(ANSWER_WITHIN, inbound.message())
            .await
            .map_err(|_| Status::deadline_exceeded("a tunnel opens with its answer at once"))??;
        let Some(pb::TunnelFrame {
            frame: Some(pb::tunnel_frame::Frame::Answer(answer)),
        }) = first
        else {
            return Err(Status::invalid_argument("a tunnel opens with its answer"));
        };
        let (tx, rx) = mpsc::channel(2);
        let answered = if answer.refused.is_empty() {
            Ok((inbound, tx))
        } else {
            Err(answer.refused.chars().take(MAX_REFUSAL).collect())
        };
        if !self.relays.answer(machine, &answer.id, answered) {
            return Err(Status::not_found(
                "no open request of this machine has that ID (or it was answered, or it expired)",
            ));
        }
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}
