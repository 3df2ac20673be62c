//! WorkloadService: records intent and answers at once; the controller does the rest.

mod create;
pub mod logs;

use std::sync::Arc;

use einsora_core::catalog::Catalog;
use einsora_core::ids::WorkloadId;
use einsora_core::lifecycle::State;
use einsora_core::reasons::{Reason, UserAction};
use einsora_proto::convert::{CreateWorkload, timestamp};
use einsora_proto::workloads::v1::workload_service_server::WorkloadService;
use einsora_proto::workloads::v1::{self as pb};
use einsora_store::{MAX_PAGE_LINES, OutputQuery, Store, Transition, UnitShape, WorkloadPage};

use time::OffsetDateTime;
use tonic::metadata::MetadataMap;
use tonic::{Request, Response, Status};

use einsora_runtime::shutdown::Shutdown;

use crate::caller::{Access, Auth};
use crate::{scoped, status, wire};

const DEFAULT_PAGE_SIZE: u32 = 100;
const MAX_PAGE_SIZE: u32 = 500;

#[derive(Debug, Clone)]
pub struct WorkloadsApi {
    store: Arc<dyn Store>,
    auth: Arc<Auth>,
    catalog: Arc<Catalog>,
    /// Ends followed logs when the api stops.
    shutdown: Shutdown,
    follows: Arc<logs::Follows>,
    settle: std::time::Duration,
}

impl WorkloadsApi {
    pub fn new(
        store: Arc<dyn Store>,
        auth: Arc<Auth>,
        catalog: Arc<Catalog>,
        shutdown: Shutdown,
    ) -> Self {
        WorkloadsApi {
            store,
            auth,
            catalog,
            shutdown,
            follows: Arc::default(),
            settle: logs::SETTLE,
        }
    }

    /// How long a followed log goes on once its workload has stopped with nothing new
    /// (tests scale it down).
    pub fn with_follow_settle(self, settle: std::time::Duration) -> Self {
        WorkloadsApi { settle, ..self }
    }

    /// Start, stop or delete, as the caller asked; the store refuses a step the lifecycle
    /// doesn't have.
    async fn act(
        &self,
        metadata: &MetadataMap,
        raw_id: &str,
        action: UserAction,
    ) -> Result<Response<pb::Workload>, Status> {
        let caller = self.auth.caller(metadata, Access::Write).await?;
        let id: WorkloadId = scoped::id(raw_id)?;
        let scope = caller.scope();
        let reason = Reason::Requested {
            action,
            by: caller.actor,
        };
        let (store, reason, catalog) = (&*self.store, &reason, &*self.catalog);
        let w = scoped::write_workload(store, &scope, id, |w| async move {
            let to = match action {
                UserAction::Start => {
                    // Its class's shape as the catalog says now (none for a class it no longer
                    // has), for the quotas' CPU and memory limits.
                    let shape = catalog
                        .class(&w.gpu_class)
                        .map(UnitShape::of)
                        .unwrap_or_default();
                    return store.start(&w, shape, reason).await.map_err(status::store);
                }
                UserAction::Stop => State::Stopping,
                UserAction::Delete => State::Deleting,
            };
            let change = Transition {
                workload: &w,
                to,
                reason,
                admission: None,
                fence: None,
            };
            store.transition(&change).await.map_err(status::store)
        })
        .await?;
        Ok(Response::new(wire::workload(&w)?))
    }
}

#[tonic::async_trait]
impl WorkloadService for WorkloadsApi {
    async fn create_workload(
        &self,
        request: Request<pb::CreateWorkloadRequest>,
    ) -> Result<Response<pb::Workload>, Status> {
        let caller = self.auth.caller(request.metadata(), Access::Write).await?;
        let req = CreateWorkload::try_from(request.into_inner()).map_err(status::invalid)?;
        let mut new = create::check(&self.catalog, caller.tenant, req).map_err(status::invalid)?;
        new.owner = Some(caller.user);
        // The controller's work on it joins this request's trace.
        new.trace_context = einsora_runtime::telemetry::traces::traceparent();
        let reason = Reason::Created { by: caller.actor };
        let w = self
            .store
            .create_workload(&new, &reason)
            .await
            .map_err(status::store)?;
        Ok(Response::new(wire::workload(&w)?))
    }

    async fn list_workloads(
        &self,
        request: Request<pb::ListWorkloadsRequest>,
    ) -> Result<Response<pb::ListWorkloadsResponse>, Status> {
        let caller = self.auth.caller(request.metadata(), Access::Read).await?;
        let req = request.into_inner();
        let limit = match req.page_size {
            0 => DEFAULT_PAGE_SIZE,
            n => n.min(MAX_PAGE_SIZE),
        };
        let before = match req.page_token.as_str() {
            "" => None,
            token => Some(token.parse::<WorkloadId>().map_err(|_| bad_page_token())?),
        };
        let page = WorkloadPage {
            include_deleted: req.include_deleted,
            owner: caller.scope().owner,
            before,
            limit: limit + 1,
        };
        let mut found = self
            .store
            .workloads_of(caller.tenant, &page)
            .await
            .map_err(status::store)?;
        let more = found.len() > limit as usize;
        found.truncate(limit as usize);
        let next_page_token = match found.last() {
            Some(last) if more => last.id.to_string(),
            _ => String::new(),
        };
        Ok(Response::new(pb::ListWorkloadsResponse {
            workloads: wire::workloads(&found)?,
            next_page_token,
        }))
    }

    async fn get_workload(
        &self,
        request: Request<pb::GetWorkloadRequest>,
    ) -> Result<Response<pb::Workload>, Status> {
        let caller = self.auth.caller(request.metadata(), Access::Read).await?;
        let req = request.into_inner();
        let id = scoped::id(&req.id)?;
        let w = scoped::workload(&*self.store, &caller.scope(), id, req.include_deleted).await?;
        let mut workload = wire::workload(&w)?;
        // Only while it runs: a stopped or deleted workload's GPUs may be another's now.
        let running = w.state == einsora_core::lifecycle::State::Running;
        if let Some(machine) = w.machine_id.filter(|_| running && !w.devices.is_empty()) {
            let (samples, at) = self
                .store
                .gpu_use_on(machine)
                .await
                .map_err(status::store)?;
            workload.gpu_use = wire::gpu_use(&samples, &w.devices, at);
        }
        Ok(Response::new(workload))
    }

    async fn delete_workload(
        &self,
        request: Request<pb::DeleteWorkloadRequest>,
    ) -> Result<Response<pb::Workload>, Status> {
        let id = request.get_ref().id.clone();
        self.act(request.metadata(), &id, UserAction::Delete).await
    }

    async fn start_workload(
        &self,
        request: Request<pb::StartWorkloadRequest>,
    ) -> Result<Response<pb::Workload>, Status> {
        let id = request.get_ref().id.clone();
        self.act(request.metadata(), &id, UserAction::Start).await
    }

    async fn stop_workload(
        &self,
        request: Request<pb::StopWorkloadRequest>,
    ) -> Result<Response<pb::Workload>, Status> {
        let id = request.get_ref().id.clone();
        self.act(request.metadata(), &id, UserAction::Stop).await
    }

    async fn list_workload_events(
        &self,
        request: Request<pb::ListWorkloadEventsRequest>,
    ) -> Result<Response<pb::ListWorkloadEventsResponse>, Status> {
        let caller = self.auth.caller(request.metadata(), Access::Read).await?;
        let id = scoped::id(&request.get_ref().id)?;
        let w = scoped::workload(&*self.store, &caller.scope(), id, true).await?;
        let events = self.store.events(w.id).await.map_err(status::store)?;
        Ok(Response::new(pb::ListWorkloadEventsResponse {
            events: events.iter().map(wire::event).collect(),
        }))
    }

    type ListWorkloadLogsStream = logs::LogStream;

    async fn list_workload_logs(
        &self,
        request: Request<pb::ListWorkloadLogsRequest>,
    ) -> Result<Response<logs::LogStream>, Status> {
        let caller = self.auth.caller(request.metadata(), Access::Read).await?;
        let req = logs::LogRequest::try_from(request.get_ref())?;
        let w = scoped::workload(&*self.store, &caller.scope(), req.id, true).await?;
        let read = self.store.read_output(w.id, &req.query).await;
        let first = logs::page(&read.map_err(status::store)?, req.query.after.unwrap_or(0));
        if !req.follow {
            return Ok(Response::new(Box::pin(tokio_stream::once(Ok(first)))));
        }
        let follower = logs::Follower {
            store: self.store.clone(),
            auth: self.auth.clone(),
            metadata: request.metadata().clone(),
            scope: caller.scope(),
            id: w.id,
            since: req.query.since,
            shutdown: self.shutdown.clone(),
            settle: self.settle,
        };
        Ok(Response::new(follower.stream(&self.follows, first)?))
    }

    async fn export_workload(
        &self,
        request: Request<pb::ExportWorkloadRequest>,
    ) -> Result<Response<pb::WorkloadExport>, Status> {
        let caller = self.auth.caller(request.metadata(), Access::Read).await?;
        let id = scoped::id(&request.get_ref().id)?;
        let store = &*self.store;
        let w = scoped::workload(store, &caller.scope(), id, true).await?;
        let events = store.events(w.id).await.map_err(status::store)?;
        let usage = store
            .workload_usage(caller.tenant, w.id)
            .await
            .map_err(status::store)?;
        let machine_name = match w.machine_id {
            None => None,
            Some(m) => store
                .machine_of(caller.tenant, m)
                .await
                .map_err(status::store)?
                .map(|r| r.machine.name),
        };
        // Its whole output as kept, page by page.
        let (mut output_logs, mut after) = (Vec::new(), None);
        let output_dropped = loop {
            let query = OutputQuery {
                after,
                tail: None,
                limit: MAX_PAGE_LINES,
                since: None,
            };
            let page = store
                .read_output(w.id, &query)
                .await
                .map_err(status::store)?;
            let Some(last) = page.lines.last().map(|l| l.seq) else {
                break page.dropped_lines;
            };
            output_logs.extend(page.lines.iter().map(wire::log_line));
            after = Some(last);
        };
        Ok(Response::new(pb::WorkloadExport {
            output_logs,
            output_dropped,
            workload: Some(wire::workload(&w)?),
            events: events.iter().map(wire::event).collect(),
            usage: usage.iter().map(wire::usage).collect(),
            machine_name: machine_name.unwrap_or_default(),
            exported_at: Some(timestamp(OffsetDateTime::now_utc())),
        }))
    }
}

fn bad_page_token() -> Status {
    Status::invalid_argument(
        "page_token is not valid: use the next_page_token of a previous response",
    )
}
