//! `ControllerInternalService`, for the other services over mutual TLS: where a ready workload
//! listens, and a relayed connection to one on another machine (the access proxy). (The api
//! needn't wake a controller: the store's change signal does.)
//!
//! A machine reports where its workloads listen, and a machine may be an attacker: the proxy is
//! only ever handed a socket of the machine it can reach (this host's own agent), and only at
//! the one path that agent lays out for that workload (`einsora_core::run_dirs`). Anything else
//! a machine reports is refused and logged, and nothing is dialled. A workload on any other
//! machine is reached through that machine's agent (`agents::relay`), which opens only its
//! own socket.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use einsora_core::accelerator::AcceleratorKind;
use einsora_core::catalog::Catalog;
use einsora_core::ids::{MachineId, TenantId, WorkloadId};
use einsora_core::kind::WorkloadKind;
use einsora_core::lifecycle::State;
use einsora_core::region::Region;
use einsora_core::run_dirs::RunDirs;
use einsora_proto::common::v1 as common_pb;
use einsora_proto::internal::v1 as pb;
use einsora_proto::internal::v1::controller_internal_service_server::ControllerInternalService;
use einsora_store::{Store, WorkloadFilter};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use crate::agents::Hub;
use crate::agents::relay::{self, Relays};

/// The most endpoints one `TouchEndpoints` names.
const MAX_TOUCHED: usize = 10_000;

#[derive(Debug)]
pub struct Internal {
    store: Arc<dyn Store>,
    hub: Arc<Hub>,
    relays: Arc<Relays>,
    region: Region,
    reachable: Reachable,
    /// Which classes are CPU classes (`ListServedModels`).
    catalog: Arc<Catalog>,
}

impl Internal {
    /// `reachable_agent`: the directories of the agent whose workloads the proxy reaches.
    pub fn new(
        store: Arc<dyn Store>,
        hub: Arc<Hub>,
        relays: Arc<Relays>,
        region: Region,
        reachable_agent: RunDirs,
        catalog: Arc<Catalog>,
    ) -> Self {
        Internal {
            store,
            hub,
            relays,
            region,
            catalog,
            reachable: Reachable {
                dirs: reachable_agent,
                machine: OnceLock::new(),
            },
        }
    }
}

/// The machine the access proxy can reach: this host's agent, known by the machine ID it saved
/// when it joined (read once it is there).
#[derive(Debug)]
struct Reachable {
    dirs: RunDirs,
    machine: OnceLock<MachineId>,
}

impl Reachable {
    fn machine(&self) -> Option<MachineId> {
        if let Some(id) = self.machine.get() {
            return Some(*id);
        }
        let saved = std::fs::read_to_string(self.dirs.state_dir.join("machine-id")).ok()?;
        let id: MachineId = saved.trim().parse().ok()?;
        Some(*self.machine.get_or_init(|| id))
    }

    /// Whether the proxy may be handed `reported` as `workload`'s socket on `machine`: the
    /// machine must be the one the proxy reaches, and the path exactly the one its agent lays
    /// out for the workload on the driver it was placed on.
    fn admit(
        &self,
        machine: MachineId,
        workload: WorkloadId,
        kind: WorkloadKind,
        driver: &str,
        reported: &str,
    ) -> Result<(), Status> {
        if self.machine() != Some(machine) {
            return Err(elsewhere());
        }
        let expected = self.dirs.socket_path(driver, &workload.to_string(), kind);
        if expected.as_deref() != Some(Path::new(reported)) {
            tracing::warn!(
                %machine, %workload, ?reported,
                "its machine reported a socket other than the workload's own; refused, nothing dialled"
            );
            return Err(Status::failed_precondition(
                "its machine reported a socket this installation doesn't open; nothing was dialled",
            ));
        }
        Ok(())
    }
}

fn elsewhere() -> Status {
    Status::failed_precondition("it runs on a machine the access proxy doesn't reach")
}

/// One answer for an unknown workload, another tenant's, and one not ready here: the caller
/// learns nothing it couldn't see already.
fn not_found() -> Status {
    Status::not_found("no such workload is ready here")
}

/// A running workload whose machine hasn't said where it listens, or isn't connected to relay
/// it (yet, or again after a restart of either side): worth a retry, and marked so the proxy
/// tells it from an outage.
fn not_ready() -> Status {
    let mut status =
        Status::unavailable("its machine hasn't reported it ready, or isn't connected");
    status.metadata_mut().insert(
        einsora_proto::metadata::ERROR,
        tonic::metadata::MetadataValue::from_static(einsora_proto::metadata::NOT_READY),
    );
    status
}

/// An endpoint of the caller's parked after its idle time (scale-to-zero): marked so the proxy
/// wakes it.
fn parked() -> Status {
    let mut status = Status::unavailable("it is parked after its idle time");
    status.metadata_mut().insert(
        einsora_proto::metadata::ERROR,
        tonic::metadata::MetadataValue::from_static(einsora_proto::metadata::PARKED),
    );
    status
}

#[tonic::async_trait]
impl ControllerInternalService for Internal {
    async fn resolve_access_target(
        &self,
        request: Request<pb::ResolveAccessTargetRequest>,
    ) -> Result<Response<pb::ResolveAccessTargetResponse>, Status> {
        // A standby hears from no machine: the one leading knows where workloads listen.
        self.leading()?;
        let req = request.into_inner();
        let id: WorkloadId = req.workload_id.parse().map_err(|_| not_found())?;
        let tenant: TenantId = req.tenant_id.parse().map_err(|_| not_found())?;
        let (w, machine) = self.running(id, tenant).await?;
        Ok(Response::new(self.target(w, machine)?))
    }

    async fn list_served_models(
        &self,
        request: Request<pb::ListServedModelsRequest>,
    ) -> Result<Response<pb::ListServedModelsResponse>, Status> {
        self.leading()?;
        let tenant: TenantId = request
            .into_inner()
            .tenant_id
            .parse()
            .map_err(|_| not_found())?;
        let filter = WorkloadFilter {
            tenant: Some(tenant),
            region: Some(self.region.clone()),
            states: vec![
                State::Pending,
                State::Queued,
                State::Provisioning,
                State::Running,
                // Parked when idle: listed while nothing else serves its name (below).
                State::Stopped,
            ],
            include_deleted: false,
        };
        let running = match self.store.workloads(&filter).await {
            Ok(running) => running,
            Err(e) => return Err(crate::status::store(&e, "listing a tenant's endpoints")),
        };
        let mut models = Vec::new();
        for w in running {
            if w.kind != WorkloadKind::Endpoint {
                continue;
            }
            let parked = w.state == State::Stopped;
            if parked && crate::reconcile::idle::park_after(&w).is_none() {
                continue;
            }
            let served_name = served_name(&w);
            let cpu = self.on_cpu(&w);
            let workload_id = w.id.to_string();
            // Starting, not ready, its machine not connected, or its socket refused: listed
            // without a target, as ResolveAccessTarget would answer none.
            let target = match (w.state, w.machine_id) {
                (State::Running, Some(machine)) => self.target(w, machine).ok(),
                _ => None,
            };
            models.push(pb::ServedModel {
                served_name,
                target,
                cpu,
                workload_id,
                parked,
            });
        }
        // A parked endpoint is there to be woken only while no other serves its name.
        let awake: std::collections::HashSet<String> = models
            .iter()
            .filter(|m| !m.parked)
            .map(|m| m.served_name.clone())
            .collect();
        models.retain(|m| !m.parked || !awake.contains(&m.served_name));
        Ok(Response::new(pb::ListServedModelsResponse { models }))
    }

    async fn touch_endpoints(
        &self,
        request: Request<pb::TouchEndpointsRequest>,
    ) -> Result<Response<pb::TouchEndpointsResponse>, Status> {
        // The one leading answers, as for the proxy's other calls (it asks that one first).
        self.leading()?;
        let ids = request.into_inner().endpoint_ids;
        if ids.len() > MAX_TOUCHED {
            return Err(Status::invalid_argument(format!(
                "report at most {MAX_TOUCHED} endpoints at once"
            )));
        }
        let ids: Vec<WorkloadId> = ids.iter().filter_map(|id| id.parse().ok()).collect();
        let now = time::OffsetDateTime::now_utc();
        if let Err(e) = self.store.touch_endpoints(&ids, now).await {
            return Err(crate::status::store(&e, "recording endpoints' requests"));
        }
        Ok(Response::new(pb::TouchEndpointsResponse {}))
    }

    type RelayStream = Relayed;

    async fn relay(
        &self,
        request: Request<Streaming<pb::RelayFrame>>,
    ) -> Result<Response<Relayed>, Status> {
        self.leading()?;
        let mut proxy = request.into_inner();
        let Some(pb::RelayFrame {
            frame: Some(pb::relay_frame::Frame::To(to)),
        }) = proxy.message().await?
        else {
            return Err(Status::invalid_argument(
                "a relay's first frame names its workload",
            ));
        };
        let id: WorkloadId = to.workload_id.parse().map_err(|_| not_found())?;
        let tenant: TenantId = to.tenant_id.parse().map_err(|_| not_found())?;
        let (w, machine) = self.running(id, tenant).await?;
        // The attempt the proxy's session is bound to, and no other: a restarted workload is
        // opened anew.
        if w.attempt.get() != to.attempt || self.reachable.machine() == Some(machine) {
            return Err(not_found());
        }
        let tunnel = self.relays.open(machine, w.id, to.attempt).await?;
        let (tx, rx) = tokio::sync::mpsc::channel(2);
        tokio::spawn(relay::join(proxy, tx, tunnel));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

type Relayed =
    std::pin::Pin<Box<dyn tokio_stream::Stream<Item = Result<pb::RelayFrame, Status>> + Send>>;

impl Internal {
    /// Where `w` (the caller's, running on `machine`) listens, if the proxy may reach it now.
    fn target(
        &self,
        w: einsora_core::workload::Workload,
        machine: MachineId,
    ) -> Result<pb::ResolveAccessTargetResponse, Status> {
        let relayed = self.reachable.machine() != Some(machine);
        // Not connected now (a partition, an agent or controller restarting): worth a retry,
        // as a workload not ready yet is; a machine gone for good fails its workloads.
        if relayed && !self.relays.listening(machine) {
            return Err(not_ready());
        }
        // Running, but its machine hasn't said where it listens (yet, or again after a
        // restart of either side): worth a retry, unlike a workload that isn't running.
        let target = self
            .hub
            .target(machine, w.id, w.attempt.get())
            .ok_or_else(not_ready)?;
        if !relayed {
            self.reachable.admit(
                machine,
                w.id,
                w.kind,
                w.driver.as_deref().unwrap_or_default(),
                &target.socket_path,
            )?;
        }
        let placed_class = w
            .placed_class
            .clone()
            .unwrap_or_else(|| w.gpu_class.clone());
        Ok(pb::ResolveAccessTargetResponse {
            workload_id: w.id.to_string(),
            kind: common_pb::WorkloadKind::from(w.kind).into(),
            attempt: w.attempt.get(),
            // A relayed workload's path is its machine's: the proxy never dials it.
            socket_path: if relayed {
                String::new()
            } else {
                target.socket_path
            },
            token: target.token,
            region: w.region.to_string(),
            placed_class,
            slots: slots(&w),
            gpu_class: w.gpu_class,
            relayed,
        })
    }

    /// Whether it was placed on a CPU class (the requested one when none is recorded).
    fn on_cpu(&self, w: &einsora_core::workload::Workload) -> bool {
        let class = w.placed_class.as_deref().unwrap_or(&w.gpu_class);
        self.catalog
            .class(class)
            .is_some_and(|c| c.accelerator() == AcceleratorKind::Cpu)
    }

    fn leading(&self) -> Result<(), Status> {
        if self.hub.leading() {
            return Ok(());
        }
        Err(crate::agents::standby(
            "this controller stands by: ask the one leading its region".to_owned(),
        ))
    }

    /// The tenant's workload, running in this region, and its machine; NOT_FOUND for anything
    /// else, alike.
    async fn running(
        &self,
        id: WorkloadId,
        tenant: TenantId,
    ) -> Result<(einsora_core::workload::Workload, MachineId), Status> {
        let w = match self.store.workload(id).await {
            Ok(Some(w)) => w,
            Ok(None) => return Err(not_found()),
            Err(e) => return Err(crate::status::store(&e, "resolving a workload's access")),
        };
        let ours = w.tenant_id == tenant && w.region == self.region;
        // The caller's, starting (its engine loading, say): worth a retry, as one whose
        // machine hasn't reported it ready yet is.
        if ours && starting(w.state) {
            return Err(not_ready());
        }
        // The caller's, parked after its idle time: a request wakes it.
        if ours && w.state == State::Stopped && crate::reconcile::idle::park_after(&w).is_some() {
            return Err(parked());
        }
        let here = ours && w.state == State::Running;
        let machine = w.machine_id.filter(|_| here).ok_or_else(not_found)?;
        Ok((w, machine))
    }
}

/// On its way to running: admitted or waiting to be, or its server starting.
fn starting(state: State) -> bool {
    matches!(state, State::Pending | State::Queued | State::Provisioning)
}

/// The name an endpoint serves its model under, as its parameters say.
fn served_name(w: &einsora_core::workload::Workload) -> String {
    match einsora_proto::convert::WorkloadParams::from_json(w.kind, &w.params) {
        Ok(einsora_proto::convert::WorkloadParams::Endpoint { served_name, .. }) => served_name,
        _ => String::new(),
    }
}

/// An endpoint's slots, as its parameters say (the default where they don't read); 0 for the
/// other kinds.
fn slots(w: &einsora_core::workload::Workload) -> u32 {
    if w.kind != WorkloadKind::Endpoint {
        return 0;
    }
    match einsora_proto::convert::WorkloadParams::from_json(w.kind, &w.params) {
        Ok(einsora_proto::convert::WorkloadParams::Endpoint { slots, .. }) => slots,
        _ => einsora_proto::convert::DEFAULT_SLOTS,
    }
}

#[cfg(test)]
mod served_tests;

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::time::Duration;

    use einsora_core::agent::{Mode, StatusCode};

    use super::*;
    use crate::agents::hub::{AccessTarget, Reported};

    /// This host's agent, joined as `machine`, in a fresh state directory.
    fn reachable(machine: MachineId) -> (tempfile::TempDir, Reachable) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("machine-id"), format!("{machine}\n")).unwrap();
        let reachable = Reachable {
            dirs: RunDirs {
                state_dir: dir.path().to_owned(),
                macos_root: dir.path().join("m"),
            },
            machine: OnceLock::new(),
        };
        (dir, reachable)
    }

    fn refused(result: Result<(), Status>) -> String {
        let status = result.expect_err("refused");
        assert_eq!(status.code(), tonic::Code::FailedPrecondition, "{status:?}");
        status.message().to_owned()
    }

    #[test]
    fn only_the_exact_socket_its_agent_lays_out_is_handed_to_the_proxy() {
        let machine = MachineId::new();
        let (dir, reachable) = reachable(machine);
        let (w, sibling) = (WorkloadId::new(), WorkloadId::new());
        let run = dir.path().join("run");
        let own = run.join(w.to_string()).join("jl.sock");
        assert!(
            reachable
                .admit(
                    machine,
                    w,
                    WorkloadKind::Notebook,
                    "docker",
                    own.to_str().unwrap()
                )
                .is_ok()
        );
        let attacks = [
            "/var/run/docker.sock".to_owned(),
            run.join(sibling.to_string())
                .join("jl.sock")
                .display()
                .to_string(),
            format!("run/{w}/jl.sock"),
            format!("{}/{sibling}/../{w}/jl.sock", run.display()),
            run.join(w.to_string())
                .join("llm.sock")
                .display()
                .to_string(),
            String::new(),
        ];
        for reported in &attacks {
            let why =
                refused(reachable.admit(machine, w, WorkloadKind::Notebook, "docker", reported));
            assert!(why.contains("nothing was dialled"), "{reported}: {why}");
        }
        // macos-native lays its run directories out apart, by compact ID: only its own path
        // there, and never another driver's path for it.
        let mac =
            reachable
                .dirs
                .socket_path("macos-native", &w.to_string(), WorkloadKind::Notebook);
        let mac = mac.unwrap();
        assert!(mac.starts_with(dir.path().join("m")), "{}", mac.display());
        let on = |driver, path: &std::path::Path| {
            reachable.admit(
                machine,
                w,
                WorkloadKind::Notebook,
                driver,
                path.to_str().unwrap(),
            )
        };
        assert!(on("macos-native", &mac).is_ok());
        refused(on("macos-native", &own));
        refused(on("docker", &mac));
    }

    /// `admit` is asked only of the proxy's own machine's workloads (others are relayed); of
    /// another's, it refuses all the same.
    #[test]
    fn a_socket_of_another_machine_is_never_admitted() {
        let machine = MachineId::new();
        let (dir, reachable) = reachable(machine);
        let w = WorkloadId::new();
        let path = dir.path().join("run").join(w.to_string()).join("llm.sock");
        let why = refused(reachable.admit(
            MachineId::new(),
            w,
            WorkloadKind::Endpoint,
            "docker",
            path.to_str().unwrap(),
        ));
        assert!(
            why.contains("a machine the access proxy doesn't reach"),
            "{why}"
        );
        let unjoined = Reachable {
            dirs: RunDirs {
                state_dir: dir.path().join("nowhere"),
                macos_root: dir.path().join("m"),
            },
            machine: OnceLock::new(),
        };
        let path = path.to_str().unwrap();
        refused(unjoined.admit(machine, w, WorkloadKind::Endpoint, "docker", path));
    }

    /// A machine reporting a target for a workload it doesn't hold: the hub keeps it under
    /// that machine, and the workload's own machine is the only one ever asked.
    #[test]
    fn a_target_reported_by_a_machine_that_doesnt_hold_the_workload_is_never_used() {
        let hub = Hub::new(Duration::from_secs(45));
        let (holder, liar) = (MachineId::new(), MachineId::new());
        let w = WorkloadId::new();
        hub.connected(holder);
        hub.connected(liar);
        let reported = Reported {
            attempt: 1,
            mode: Mode::Run,
            code: StatusCode::Ready,
            target: Some(AccessTarget {
                socket_path: "/var/run/docker.sock".into(),
                token: "t".into(),
            }),
        };
        hub.report(liar, HashMap::from([(w, reported)]));
        assert!(hub.target(holder, w, 1).is_none());
    }

    /// The proxy is told an endpoint's slots as its parameters say (the default for a row
    /// written before slots), and none of another kind's.
    #[test]
    fn an_endpoints_slots_come_from_its_parameters() {
        let now = time::OffsetDateTime::now_utc();
        let tenant = TenantId::new();
        let of = |kind, params: &str| einsora_core::workload::Workload {
            id: WorkloadId::new(),
            tenant_id: tenant,
            owner: None,
            kind,
            name: "w".into(),
            gpu_class: "cpu".into(),
            placed_class: None,
            units: 1,
            image: "openai-endpoint".into(),
            region: Region::new("local").unwrap(),
            machine_id: None,
            driver: None,
            devices: Vec::new(),
            attempt: einsora_core::attempt::Attempt::NONE,
            fallback: vec![],
            fallback_after_s: None,
            params: params.into(),
            state: State::Running,
            reason: String::new(),
            version: 1,
            created_at: now,
            updated_at: now,
        };
        let endpoint = WorkloadKind::Endpoint;
        assert_eq!(slots(&of(endpoint, r#"{"model":"m.gguf","slots":3}"#)), 3);
        assert_eq!(slots(&of(endpoint, r#"{"model":"m.gguf"}"#)), 1);
        assert_eq!(slots(&of(endpoint, "not json")), 1);
        assert_eq!(slots(&of(WorkloadKind::Notebook, "{}")), 0);
        for state in [State::Pending, State::Queued, State::Provisioning] {
            assert!(starting(state), "{state:?}");
        }
        for state in [
            State::Running,
            State::Stopping,
            State::Stopped,
            State::Failed,
        ] {
            assert!(!starting(state), "{state:?}");
        }
    }
}
