//! The public services (workloads, machines, catalog, usage, access, enrolment tokens) called
//! in-process through their tonic traits, with the metadata the gateway would forward, on a real
//! (SQLite) store; and over real gRPC inside the request context.
//! Tenants are seeded through the store; the controller's steps are the store's transitions.

// A test harness: a failed unwrap is a failed test, and it reads its own environment.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod access;
mod actions;
mod activity;
mod context;
mod create;
mod enrolment;
mod inference_keys;
mod isolation;
mod machines;
mod outage;
mod quotas;
mod reads;
mod usage;
mod users;
mod wake;

use std::sync::Arc;

use einsora_api::access::AccessApi;
use einsora_api::accounts::secrets;
use einsora_api::caller::{Auth, CSRF_HEADER, SESSION_HEADER};
use einsora_api::catalog::CatalogApi;
use einsora_api::enrolment::EnrolmentApi;
use einsora_api::machines::MachinesApi;
use einsora_api::usage::UsageApi;
use einsora_api::workloads::WorkloadsApi;
use einsora_core::catalog::Catalog;
use einsora_core::ids::{MachineId, TenantId, TokenId, UserId, WorkloadId};
use einsora_core::lifecycle::State;
use einsora_core::reasons::Reason;
use einsora_core::role::Role;
use einsora_core::workload::Workload;
use einsora_proto::common::v1::{EndpointParams, WorkloadKind as PbKind};
use einsora_proto::workloads::v1 as pb;
use einsora_proto::workloads::v1::workload_service_server::WorkloadService;
use einsora_runtime::access_url::AccessUrl;
use einsora_store::{
    Admission, NewApiToken, NewSession, NewTenant, NewUser, QuotaClass, Store, Transition,
};
use einsora_testkit::db::TestDb;
use time::{Duration, OffsetDateTime};
use tonic::{Request, Status};

#[derive(Debug)]
pub struct Env {
    pub store: Arc<dyn Store>,
    /// The api's stop: followed logs end with it.
    pub shutdown: einsora_runtime::shutdown::Shutdown,
    pub workloads: WorkloadsApi,
    pub machines: MachinesApi,
    pub catalog: CatalogApi,
    pub usage: UsageApi,
    pub activity: einsora_api::activity::ActivityApi,
    pub access: AccessApi,
    pub enrolment: EnrolmentApi,
    pub users: einsora_api::accounts::Users,
    pub quotas: einsora_api::quotas::QuotasApi,
    db: TestDb,
}

/// A seeded tenant with one user, who calls with an API token (or a browser session).
#[derive(Debug)]
pub struct Who {
    pub tenant: TenantId,
    pub user: UserId,
    pub email: String,
    pub token: String,
    pub session: (String, String),
}

/// What the tests' enrolment tokens say the installation CA hashes to.
pub const CA_FINGERPRINT: [u8; 32] = [0xab; 32];

pub async fn env() -> Env {
    let db = TestDb::sqlite().await;
    let store = Arc::clone(&db.store);
    let auth = Arc::new(Auth::new(Arc::clone(&store)));
    let catalog = Arc::new(Catalog::builtin());
    let shutdown = einsora_runtime::shutdown::Shutdown::new();
    Env {
        workloads: WorkloadsApi::new(
            Arc::clone(&store),
            Arc::clone(&auth),
            Arc::clone(&catalog),
            shutdown.clone(),
        )
        .with_follow_settle(std::time::Duration::from_millis(500)),
        machines: MachinesApi::new(Arc::clone(&store), Arc::clone(&auth)),
        catalog: CatalogApi::new(&catalog, Arc::clone(&auth)),
        usage: UsageApi::new(Arc::clone(&store), Arc::clone(&auth)),
        activity: einsora_api::activity::ActivityApi::new(Arc::clone(&store), Arc::clone(&auth)),
        access: AccessApi::new(Arc::clone(&store), Arc::clone(&auth), AccessUrl::default()),
        quotas: einsora_api::quotas::QuotasApi::new(
            Arc::clone(&store),
            Arc::clone(&auth),
            Arc::clone(&catalog),
        ),
        users: einsora_api::accounts::Users::new(
            Arc::clone(&auth),
            Arc::new(
                einsora_api::accounts::passwords::Passwords::new()
                    .await
                    .unwrap(),
            ),
        ),
        enrolment: EnrolmentApi::new(Arc::clone(&store), auth, catalog, CA_FINGERPRINT),
        store,
        shutdown,
        db,
    }
}

impl Env {
    /// Runs SQL on the database behind the store's back: a state no API makes yet, or an
    /// outage.
    pub fn sql(&self, sql: &str) {
        self.db.execute(sql);
    }

    /// A tenant whose quota is `limit` units of every class (`None`: unlimited).
    pub async fn tenant(&self, slug: &str, limit: Option<u32>) -> Who {
        let store = &*self.store;
        let tenant = TenantId::new();
        let new = NewTenant {
            id: tenant,
            slug: slug.into(),
            name: slug.into(),
            trusted: true,
        };
        store.create_tenant(&new).await.unwrap();
        store
            .set_quota(tenant, &QuotaClass::Default, limit)
            .await
            .unwrap();
        self.user(tenant, &format!("you@{slug}.example"), Role::Owner)
            .await
    }

    /// Another user of `tenant`, with `role`, an API token and a browser session.
    pub async fn user(&self, tenant: TenantId, email: &str, role: Role) -> Who {
        let store = &*self.store;
        let user = UserId::new();
        let new = NewUser {
            role,
            id: user,
            tenant_id: tenant,
            email: email.into(),
            display_name: email.into(),
            phc: "$argon2id$unused".into(),
        };
        store.create_user(&new).await.unwrap();
        let token = secrets::new_token().unwrap();
        let new = NewApiToken {
            id: TokenId::new(),
            user_id: user,
            tenant_id: tenant,
            name: "laptop".into(),
            prefix: secrets::display_prefix(&token),
            token_hash: secrets::sha256(&token),
            expires_at: None,
        };
        store.create_api_token(&new).await.unwrap();
        let (session, csrf) = (
            secrets::new_secret().unwrap(),
            secrets::new_secret().unwrap(),
        );
        let new = NewSession {
            id_hash: secrets::sha256(&session),
            user_id: user,
            csrf_hash: secrets::sha256(&csrf),
            address: "192.0.2.1".into(),
            client: einsora_core::reasons::SessionClient::Browser,
            expires_at: OffsetDateTime::now_utc() + Duration::days(1),
        };
        store.create_session(&new).await.unwrap();
        Who {
            tenant,
            user,
            email: email.into(),
            token,
            session: (session, csrf),
        }
    }

    pub async fn create(
        &self,
        who: &Who,
        req: pb::CreateWorkloadRequest,
    ) -> Result<pb::Workload, Status> {
        let created = self.workloads.create_workload(who.req(req)).await?;
        Ok(created.into_inner())
    }

    /// Moves a workload along the diagram as the controller would, placed on `machine` (given
    /// its device `GPU-0` when its class has devices).
    pub async fn advance(&self, id: &str, to: &[State], machine: Option<MachineId>) -> Workload {
        let mut w = self
            .store
            .workload(id.parse().unwrap())
            .await
            .unwrap()
            .unwrap();
        for &step in to {
            let admission = Admission {
                placed_class: w.gpu_class.clone(),
                machine_id: machine,
                driver: machine.map(|_| "sim".into()),
                devices: machine
                    .filter(|_| !w.gpu_class.starts_with("cpu"))
                    .map(|_| vec!["GPU-0".to_owned()])
                    .unwrap_or_default(),
            };
            w = self
                .store
                .transition(&Transition {
                    workload: &w,
                    to: step,
                    reason: &Reason::Ready,
                    admission: (step == State::Provisioning).then_some(&admission),
                    fence: None,
                })
                .await
                .unwrap();
        }
        w
    }
}

impl Who {
    /// A request with this user's API token.
    pub fn req<T>(&self, message: T) -> Request<T> {
        let mut req = Request::new(message);
        let bearer = format!("Bearer {}", self.token).parse().unwrap();
        req.metadata_mut().insert("authorization", bearer);
        req
    }

    /// A request from this user's browser session, with its CSRF token.
    pub fn browser<T>(&self, message: T) -> Request<T> {
        let mut req = Request::new(message);
        let md = req.metadata_mut();
        md.insert(SESSION_HEADER, self.session.0.parse().unwrap());
        md.insert(CSRF_HEADER, self.session.1.parse().unwrap());
        req
    }

    /// How timelines name this user calling with the API token.
    pub fn by_token(&self) -> String {
        let prefix = secrets::display_prefix(&self.token);
        format!("{} (API token \"laptop\" ({prefix}…))", self.email)
    }
}

pub fn notebook(name: &str, class: &str) -> pb::CreateWorkloadRequest {
    pb::CreateWorkloadRequest {
        kind: PbKind::Notebook as i32,
        name: name.into(),
        gpu_class: class.into(),
        image: "jupyterlab".into(),
        ..pb::CreateWorkloadRequest::default()
    }
}

pub fn endpoint(name: &str) -> pb::CreateWorkloadRequest {
    pb::CreateWorkloadRequest {
        kind: PbKind::Endpoint as i32,
        image: "openai-endpoint".into(),
        params: Some(pb::create_workload_request::Params::Endpoint(
            EndpointParams {
                model: "org/model".into(),
                slots: None,
                served_name: None,
                park_after_idle_s: None,
            },
        )),
        ..notebook(name, "cpu-4c-16g")
    }
}

pub fn unknown_id() -> String {
    WorkloadId::new().to_string()
}

pub use einsora_testkit::grpc::assert_code;

/// The 409 code a FAILED_PRECONDITION carries.
pub fn error_code(status: &Status) -> &str {
    status
        .metadata()
        .get(einsora_api::status::ERROR_KEY)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}
