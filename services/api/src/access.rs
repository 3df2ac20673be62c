//! AccessService: the only API that hands out a way into a workload. A running notebook on a
//! machine gets a one-time ticket (stored as its SHA-256, valid 60 s) in a link to its own
//! origin, and its timeline notes who asked; a running endpoint gets its base URL. The
//! workload's own token never leaves the agent backend.

use std::sync::Arc;

use einsora_core::ids::WorkloadId;
use einsora_core::kind::WorkloadKind;
use einsora_core::lifecycle::State;
use einsora_core::reasons::Reason;
use einsora_core::workload::Workload;
use einsora_proto::access::v1::access_grant::Grant;
use einsora_proto::access::v1::access_service_server::AccessService;
use einsora_proto::access::v1::{self as pb};
use einsora_proto::convert::timestamp;
use einsora_store::{NewTicket, Store};
use time::{Duration, OffsetDateTime};
use tonic::{Request, Response, Status};

use crate::accounts::secrets;
use crate::caller::{Access, Auth, Caller};
use crate::grants;
use crate::scoped;
use crate::status::{self, Precondition};
use einsora_runtime::access_url::AccessUrl;

pub const TICKET_PREFIX: &str = "tkt_";
pub const TICKET_TTL: Duration = Duration::seconds(60);

#[derive(Debug, Clone)]
pub struct AccessApi {
    store: Arc<dyn Store>,
    auth: Arc<Auth>,
    url: AccessUrl,
}

impl AccessApi {
    pub fn new(store: Arc<dyn Store>, auth: Arc<Auth>, url: AccessUrl) -> Self {
        AccessApi { store, auth, url }
    }

    /// Notes who opened the notebook or VM, then issues the ticket: nobody gets in unrecorded.
    /// The ticket keeps the credential that asked for it: what it opens ends with that
    /// credential.
    async fn open_with_ticket(
        &self,
        caller: &Caller,
        granted_by: einsora_store::Grant,
        w: &Workload,
    ) -> Result<Grant, Status> {
        let reason = Reason::AccessOpened {
            by: caller.actor.clone(),
        };
        self.store
            .note(w, &reason, None)
            .await
            .map_err(status::store)?;
        let ticket = format!(
            "{TICKET_PREFIX}{}",
            secrets::new_secret().map_err(status::internal)?
        );
        let expires_at = OffsetDateTime::now_utc() + TICKET_TTL;
        let new = NewTicket {
            ticket_hash: secrets::sha256(&ticket),
            workload_id: w.id,
            tenant_id: caller.tenant,
            user_id: caller.user,
            expires_at,
            granted_by,
        };
        self.store
            .create_ticket(&new)
            .await
            .map_err(status::store)?;
        let expires_at = Some(timestamp(expires_at));
        Ok(match w.kind {
            WorkloadKind::Vm => Grant::Ssh(pb::VmSsh {
                url: self.url.vm_ssh_url(w.id),
                ticket,
                expires_at,
            }),
            _ => Grant::Notebook(pb::NotebookLink {
                link: self.url.notebook_link(w.id, &ticket),
                expires_at,
            }),
        })
    }
}

#[tonic::async_trait]
impl AccessService for AccessApi {
    async fn open_workload(
        &self,
        request: Request<pb::OpenWorkloadRequest>,
    ) -> Result<Response<pb::AccessGrant>, Status> {
        let authenticated = self
            .auth
            .authenticate(request.metadata(), Access::Write)
            .await?;
        let granted_by = grants::of(&authenticated.credential);
        let id: WorkloadId = scoped::id(&request.get_ref().id)?;
        let caller = &authenticated.caller;
        let grant = scoped::write_workload(&*self.store, &caller.scope(), id, |w| async move {
            refuse_unless_open(&w)?;
            match w.kind {
                WorkloadKind::Notebook | WorkloadKind::Vm => {
                    self.open_with_ticket(caller, granted_by, &w).await
                }
                WorkloadKind::Endpoint => Ok(Grant::Endpoint(pb::EndpointAccess {
                    base_url: self.url.endpoint_base(w.id),
                })),
            }
        })
        .await?;
        Ok(Response::new(pb::AccessGrant {
            workload_id: id.to_string(),
            grant: Some(grant),
        }))
    }
}

/// Only a running notebook or VM on a machine, or a running endpoint, can be opened.
fn refuse_unless_open(w: &Workload) -> Result<(), Status> {
    let problem = if w.state != State::Running {
        format!("the {} isn't running (it is {})", w.kind, w.state)
    } else if w.kind != WorkloadKind::Endpoint && w.machine_id.is_none() {
        format!(
            "this {} doesn't run on a machine the access proxy reaches",
            w.kind
        )
    } else {
        return Ok(());
    };
    Err(status::failed(Precondition::Conflict, problem))
}

#[cfg(test)]
mod tests {
    use einsora_core::attempt::Attempt;
    use einsora_core::ids::{MachineId, TenantId};
    use einsora_core::region::Region;

    use super::*;

    fn workload(kind: WorkloadKind, state: State, placed: bool) -> Workload {
        Workload {
            owner: None,
            id: WorkloadId::new(),
            tenant_id: TenantId::new(),
            kind,
            name: "w".into(),
            gpu_class: "cpu-1c-2g".into(),
            placed_class: placed.then(|| "cpu-1c-2g".into()),
            units: 1,
            image: "jupyterlab".into(),
            region: Region::new("local").unwrap(),
            machine_id: placed.then(MachineId::new),
            driver: None,
            devices: Vec::new(),
            attempt: Attempt::NONE,
            fallback: vec![],
            fallback_after_s: None,
            params: "{}".into(),
            state,
            reason: String::new(),
            version: 1,
            created_at: OffsetDateTime::UNIX_EPOCH,
            updated_at: OffsetDateTime::UNIX_EPOCH,
        }
    }

    #[test]
    fn only_running_notebooks_and_vms_on_machines_and_running_endpoints_open() {
        use WorkloadKind::*;
        assert!(refuse_unless_open(&workload(Notebook, State::Running, true)).is_ok());
        assert!(refuse_unless_open(&workload(Vm, State::Running, true)).is_ok());
        assert!(refuse_unless_open(&workload(Endpoint, State::Running, false)).is_ok());
        for w in [
            workload(Notebook, State::Running, false),
            workload(Notebook, State::Provisioning, true),
            workload(Notebook, State::Stopped, true),
            workload(Endpoint, State::Pending, false),
            workload(Vm, State::Stopped, true),
            workload(Vm, State::Running, false),
        ] {
            let err = refuse_unless_open(&w).unwrap_err();
            assert_eq!(
                err.code(),
                tonic::Code::FailedPrecondition,
                "{} {}",
                w.kind,
                w.state
            );
            assert_eq!(
                err.metadata().get(status::ERROR_KEY).unwrap(),
                "conflict",
                "{} {}",
                w.kind,
                w.state
            );
        }
    }
}
