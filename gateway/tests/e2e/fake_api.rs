//! A real tonic server with canned answers behind mutual TLS, standing in for the api: the
//! gateway under test is the real one.

use std::sync::{Arc, Mutex};

use einsora_proto::accounts::v1::account_service_server::{AccountService, AccountServiceServer};
use einsora_proto::accounts::v1::*;
use einsora_proto::catalog::v1::catalog_service_server::{CatalogService, CatalogServiceServer};
use einsora_proto::catalog::v1::{Catalog, ComputeClass, GetCatalogRequest, Region};
use einsora_proto::common::v1::{AcceleratorKind, WorkloadState};
use einsora_proto::workloads::v1::workload_service_server::{
    WorkloadService, WorkloadServiceServer,
};
use einsora_proto::workloads::v1::*;
use prost_types::Timestamp;
use tonic::metadata::MetadataMap;
use tonic::service::Routes;
use tonic::{Code, Request, Response, Status};

pub const SESSION_ID: &str = "sid-0123456789abcdef";
pub const CSRF: &str = "csrf-fedcba9876543210";
pub const KNOWN_CLIENT: &str = "v1.4102444800.00112233445566778899aabbccddeeff.proof";

/// What the api received: each call's request metadata.
#[derive(Debug, Clone, Default)]
pub struct Seen(pub Arc<Mutex<Vec<MetadataMap>>>);

impl Seen {
    fn record<T>(&self, request: &Request<T>) {
        self.0.lock().unwrap().push(request.metadata().clone());
    }

    pub fn last(&self) -> MetadataMap {
        self.0.lock().unwrap().last().cloned().expect("a call")
    }
}

pub fn routes(seen: &Seen) -> Routes {
    Routes::new(CatalogServiceServer::new(Fake(seen.clone())))
        .add_service(WorkloadServiceServer::new(Fake(seen.clone())))
        .add_service(AccountServiceServer::new(Fake(seen.clone())))
}

struct Fake(Seen);

type Answer<T> = Result<Response<T>, Status>;

/// An answer naming the principal, as the api does for the gateway's log lines.
fn answer<T>(message: T) -> Answer<T> {
    let mut response = Response::new(message);
    response
        .metadata_mut()
        .insert("x-einsora-tenant", "tenant-1".parse().unwrap());
    response
        .metadata_mut()
        .insert("x-einsora-subject", "user-1".parse().unwrap());
    Ok(response)
}

fn refused(code: Code, message: &str, metadata: &[(&'static str, &'static str)]) -> Status {
    let mut status = Status::new(code, message);
    for (key, value) in metadata {
        status.metadata_mut().insert(*key, value.parse().unwrap());
    }
    status
}

fn me() -> Me {
    Me {
        role: einsora_proto::accounts::v1::Role::Owner as i32,
        user_id: "user-1".into(),
        email: "you@example.com".into(),
        tenant_id: "tenant-1".into(),
        tenant_name: "you".into(),
        credential: None,
    }
}

#[tonic::async_trait]
impl CatalogService for Fake {
    async fn get_catalog(&self, request: Request<GetCatalogRequest>) -> Answer<Catalog> {
        self.0.record(&request);
        answer(Catalog {
            regions: vec![Region {
                name: "local".into(),
                is_default: true,
            }],
            classes: vec![ComputeClass {
                name: "cpu-4c-16g".into(),
                accelerator: AcceleratorKind::Cpu.into(),
                cpus: 4,
                memory_gib: 16,
                ..ComputeClass::default()
            }],
            ..Catalog::default()
        })
    }
}

#[tonic::async_trait]
impl WorkloadService for Fake {
    async fn create_workload(&self, request: Request<CreateWorkloadRequest>) -> Answer<Workload> {
        self.0.record(&request);
        let create = request.into_inner();
        answer(Workload {
            id: "0190a0a0-0000-7000-8000-000000000001".into(),
            kind: create.kind,
            name: create.name,
            gpu_class: create.gpu_class,
            image: create.image,
            region: create.region.unwrap_or_else(|| "local".into()),
            state: WorkloadState::Pending.into(),
            version: 1,
            created_at: Some(Timestamp {
                seconds: 1_738_315_800,
                nanos: 0,
            }),
            ..Workload::default()
        })
    }

    async fn get_workload(&self, request: Request<GetWorkloadRequest>) -> Answer<Workload> {
        self.0.record(&request);
        Err(Status::not_found(format!(
            "no workload {}",
            request.get_ref().id
        )))
    }

    async fn stop_workload(&self, request: Request<StopWorkloadRequest>) -> Answer<Workload> {
        self.0.record(&request);
        let metadata = [("x-einsora-error", "invalid_transition")];
        Err(refused(
            Code::FailedPrecondition,
            "a stopped workload can't stop",
            &metadata,
        ))
    }

    async fn list_workloads(
        &self,
        _: Request<ListWorkloadsRequest>,
    ) -> Answer<ListWorkloadsResponse> {
        Err(refused(
            Code::ResourceExhausted,
            "slow down",
            &[("retry-after", "7")],
        ))
    }

    async fn delete_workload(&self, _: Request<DeleteWorkloadRequest>) -> Answer<Workload> {
        Err(Status::internal(
            "the store said: disk full at /var/secret/path",
        ))
    }

    async fn start_workload(&self, _: Request<StartWorkloadRequest>) -> Answer<Workload> {
        Err(Status::unimplemented("canned"))
    }

    async fn list_workload_events(
        &self,
        _: Request<ListWorkloadEventsRequest>,
    ) -> Answer<ListWorkloadEventsResponse> {
        Err(Status::unimplemented("canned"))
    }

    type ListWorkloadLogsStream = std::pin::Pin<
        Box<dyn futures::Stream<Item = Result<ListWorkloadLogsResponse, Status>> + Send>,
    >;

    /// One page; following, two and then an error (the stream's last line).
    async fn list_workload_logs(
        &self,
        request: Request<ListWorkloadLogsRequest>,
    ) -> Answer<Self::ListWorkloadLogsStream> {
        self.0.record(&request);
        let page = |n: u64| ListWorkloadLogsResponse {
            lines: vec![LogLine {
                number: n,
                attempt: 1,
                stream: "stdout".into(),
                text: format!("line {n}"),
                ..Default::default()
            }],
            dropped: 0,
            next_after: n,
        };
        let mut pages = vec![Ok(page(1))];
        if request.get_ref().follow {
            pages.extend([Ok(page(2)), Err(Status::not_found("no workload w1"))]);
        }
        answer(Box::pin(futures::stream::iter(pages)) as Self::ListWorkloadLogsStream)
    }

    async fn export_workload(&self, _: Request<ExportWorkloadRequest>) -> Answer<WorkloadExport> {
        Err(Status::unimplemented("canned"))
    }
}

#[tonic::async_trait]
impl AccountService for Fake {
    async fn login(&self, request: Request<LoginRequest>) -> Answer<LoginResponse> {
        self.0.record(&request);
        let login = request.into_inner();
        if login.password != "correct horse" {
            return Err(Status::unauthenticated("wrong email or password"));
        }
        let mut response = answer(LoginResponse {
            session_id: SESSION_ID.into(),
            session: Some(Session {
                me: Some(me()),
                csrf_token: CSRF.into(),
                expires_at: Some(Timestamp {
                    seconds: 1_738_920_600,
                    nanos: 0,
                }),
            }),
        })?;
        let proof = KNOWN_CLIENT.parse().unwrap();
        response
            .metadata_mut()
            .insert("x-einsora-known-client", proof);
        Ok(response)
    }

    async fn logout(&self, request: Request<LogoutRequest>) -> Answer<LogoutResponse> {
        self.0.record(&request);
        answer(LogoutResponse {})
    }

    async fn get_me(&self, request: Request<GetMeRequest>) -> Answer<Me> {
        self.0.record(&request);
        match request.metadata().get("x-einsora-session") {
            Some(session) if session == SESSION_ID => answer(me()),
            _ => Err(Status::unauthenticated("log in first")),
        }
    }

    async fn change_password(
        &self,
        _: Request<ChangePasswordRequest>,
    ) -> Answer<ChangePasswordResponse> {
        Err(Status::unimplemented("canned"))
    }
}
