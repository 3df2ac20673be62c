//! The relay's broker (a Lab's machines): the access proxy asks for a connection to a
//! workload on another machine; the broker sends that machine's listening agent an open
//! request with a random ID, and pairs the tunnel the agent opens in answer, checked to come
//! from the same machine, with the proxy's stream. Agents dial out, so a machine behind NAT is
//! reachable. A machine has one listening stream (a newer one replaces it), at most
//! [`TUNNELS_PER_MACHINE`] tunnels at once, and [`ANSWER_WITHIN`] to answer.

mod join;
mod service;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use einsora_core::ids::{MachineId, WorkloadId};
use einsora_proto::agent::v1 as pb;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};
use tonic::{Status, Streaming};

pub use join::join;
pub use service::RelayApi;

/// Tunnels one machine may have open at once: a notebook's page opens a handful of
/// connections, a busy endpoint its clients' requests.
pub const TUNNELS_PER_MACHINE: usize = 64;
/// How long an agent has to answer an open request.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(10);
/// The most bytes a frame carries; a larger one ends its tunnel.
pub const MAX_FRAME: usize = einsora_proto::RELAY_MAX_FRAME;

/// Why no tunnel to a workload was opened.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    #[error("its machine isn't connected to this controller for relaying")]
    NotListening,
    #[error("its machine has {TUNNELS_PER_MACHINE} relayed connections open already")]
    TooMany,
    #[error("its machine didn't answer within {ANSWER_WITHIN:?}")]
    NoAnswer,
    #[error("its machine refused: {0}")]
    Refused(String),
    #[error("no random bytes for the request's ID: {0}")]
    Random(String),
}

impl From<RelayError> for Status {
    fn from(e: RelayError) -> Status {
        let message = e.to_string();
        match e {
            RelayError::TooMany => Status::resource_exhausted(message),
            RelayError::NotListening | RelayError::NoAnswer | RelayError::Refused(_) => {
                Status::unavailable(message)
            }
            RelayError::Random(_) => Status::internal(message),
        }
    }
}

/// A machine's end of one relayed connection: what its agent sends, and where to send it bytes
/// (dropping it ends the agent's side). Holds one of the machine's tunnel permits.
#[derive(Debug)]
pub struct AgentTunnel {
    pub inbound: Streaming<pb::TunnelFrame>,
    pub outbound: mpsc::Sender<Result<pb::TunnelFrame, Status>>,
    _permit: OwnedSemaphorePermit,
}

#[derive(Debug, Default)]
pub struct Relays {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    listening: HashMap<MachineId, Listener>,
    pending: HashMap<[u8; 16], Pending>,
    next_listener: u64,
}

#[derive(Debug)]
struct Listener {
    id: u64,
    requests: mpsc::Sender<Result<pb::OpenRequest, Status>>,
    tunnels: Arc<Semaphore>,
}

#[derive(Debug)]
struct Pending {
    machine: MachineId,
    reply: oneshot::Sender<Answered>,
}

/// What an agent's answer carried to the waiting request.
type Answered = Result<
    (
        Streaming<pb::TunnelFrame>,
        mpsc::Sender<Result<pb::TunnelFrame, Status>>,
    ),
    String,
>;

impl Relays {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the machine's agent listens for open requests now.
    pub fn listening(&self, machine: MachineId) -> bool {
        self.state()
            .listening
            .get(&machine)
            .is_some_and(|l| !l.requests.is_closed())
    }

    /// A tunnel to `workload`'s socket (of `attempt`) on `machine`, once its agent answered.
    pub async fn open(
        &self,
        machine: MachineId,
        workload: WorkloadId,
        attempt: u32,
    ) -> Result<AgentTunnel, RelayError> {
        let mut id = [0u8; 16];
        getrandom::fill(&mut id).map_err(|e| RelayError::Random(e.to_string()))?;
        let (reply, answer) = oneshot::channel();
        let (requests, permit) = {
            let mut state = self.state();
            let listener = state
                .listening
                .get(&machine)
                .filter(|l| !l.requests.is_closed())
                .ok_or(RelayError::NotListening)?;
            let permit = Arc::clone(&listener.tunnels)
                .try_acquire_owned()
                .map_err(|_| RelayError::TooMany)?;
            let requests = listener.requests.clone();
            state.pending.insert(id, Pending { machine, reply });
            (requests, permit)
        };
        let request = pb::OpenRequest {
            id: id.to_vec(),
            workload_id: workload.to_string(),
            attempt,
        };
        let answered = async {
            requests
                .send(Ok(request))
                .await
                .map_err(|_| RelayError::NotListening)?;
            answer.await.map_err(|_| RelayError::NotListening)
        };
        let answered = tokio::time::timeout(ANSWER_WITHIN, answered).await;
        // Answered or not, the ID is spent.
        self.state().pending.remove(&id);
        let (inbound, outbound) = match answered {
            Err(_) => return Err(RelayError::NoAnswer),
            Ok(Err(e)) => return Err(e),
            Ok(Ok(Err(why))) => return Err(RelayError::Refused(why)),
            Ok(Ok(Ok(tunnel))) => tunnel,
        };
        Ok(AgentTunnel {
            inbound,
            outbound,
            _permit: permit,
        })
    }

    /// The machine listens from now on `requests` (replacing an older listener); the ID
    /// [`Relays::unlisten`] takes.
    fn listen(
        &self,
        machine: MachineId,
        requests: mpsc::Sender<Result<pb::OpenRequest, Status>>,
    ) -> u64 {
        let mut state = self.state();
        state.next_listener += 1;
        let id = state.next_listener;
        let tunnels = match state.listening.get(&machine) {
            // The machine's open tunnels still count against it.
            Some(older) => Arc::clone(&older.tunnels),
            None => Arc::new(Semaphore::new(TUNNELS_PER_MACHINE)),
        };
        state.listening.insert(
            machine,
            Listener {
                id,
                requests,
                tunnels,
            },
        );
        id
    }

    /// The listener `id` of the machine stopped (unless a newer one replaced it already).
    fn unlisten(&self, machine: MachineId, id: u64) {
        let mut state = self.state();
        if state.listening.get(&machine).is_some_and(|l| l.id == id) {
            state.listening.remove(&machine);
        }
    }

    /// Hands an agent's answer to the request it names, if that request is pending and was
    /// sent to `machine`: a machine can't answer another's.
    fn answer(&self, machine: MachineId, id: &[u8], answered: Answered) -> bool {
        let Ok(id) = <[u8; 16]>::try_from(id) else {
            return false;
        };
        let mut state = self.state();
        match state.pending.get(&id) {
            Some(p) if p.machine == machine => {}
            _ => return false,
        }
        let pending = state.pending.remove(&id).expect("just found");
        pending.reply.send(answered).is_ok()
    }
}
