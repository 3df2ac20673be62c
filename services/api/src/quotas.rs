//! `TeamService` and `QuotaService`: a tenant's teams, and the quotas of the tenant, its teams
//! and its users (docs/api.md "Teams and quotas"). Owners and admins change them; everyone
//! reads them. The check every create and start makes is the store's (`check_quota`).

use std::sync::Arc;

use einsora_core::accelerator::AcceleratorKind;
use einsora_core::catalog::{Catalog, ComputeClass};
use einsora_core::ids::{TeamId, UserId};
use einsora_proto::accounts::v1 as pb;
use einsora_proto::accounts::v1::quota_service_server::QuotaService;
use einsora_proto::accounts::v1::team_service_server::TeamService;
use einsora_proto::convert::{parse_id, timestamp};
use einsora_store::{QuotaClass, QuotaLimits, QuotaRecord, QuotaSubject, Store, TeamRecord};
use tonic::{Request, Response, Status};

use crate::accounts::check_name;
use crate::caller::{Access, Auth};
use crate::{scoped, status};

/// The quota row that stands for every class without one of its own (the tenant's only).
const DEFAULT_CLASS: &str = "*";

#[derive(Debug, Clone)]
pub struct QuotasApi {
    store: Arc<dyn Store>,
    auth: Arc<Auth>,
    catalog: Arc<Catalog>,
}

impl QuotasApi {
    pub fn new(store: Arc<dyn Store>, auth: Arc<Auth>, catalog: Arc<Catalog>) -> Self {
        QuotasApi {
            store,
            auth,
            catalog,
        }
    }

    async fn all(
        &self,
        tenant: einsora_core::ids::TenantId,
    ) -> Result<pb::ListQuotasResponse, Status> {
        let quotas = self.store.quotas_of(tenant).await.map_err(status::store)?;
        Ok(pb::ListQuotasResponse {
            quotas: quotas.iter().map(|q| self.quota(q)).collect(),
        })
    }

    /// The class a quota row is for: one of the catalog's, or `*` for the tenant.
    fn class(&self, name: &str, scope: QuotaScope) -> Result<QuotaClass, Status> {
        if name == DEFAULT_CLASS {
            return match scope {
                QuotaScope::Tenant => Ok(QuotaClass::Default),
                _ => Err(Status::invalid_argument(
                    "gpu_class: only the tenant has a default (`*`) quota: name a class",
                )),
            };
        }
        if self.catalog.class(name).is_none() {
            return Err(Status::invalid_argument(format!(
                "gpu_class: {name:?} is not a class of this installation (see GET /v1/catalog)"
            )));
        }
        Ok(QuotaClass::Class(name.to_owned()))
    }

    /// The CPU class a row is for, if it is one: only a CPU class's row limits CPUs and memory.
    fn cpu_class(&self, class: &QuotaClass) -> Option<&ComputeClass> {
        match class {
            QuotaClass::Class(name) => self
                .catalog
                .class(name)
                .filter(|c| c.accelerator() == AcceleratorKind::Cpu),
            QuotaClass::Default => None,
        }
    }

    /// A request's limits for `class`: CPUs and memory only for a CPU class of the catalog.
    fn limits(&self, req: &pb::SetQuotaRequest, class: &QuotaClass) -> Result<QuotaLimits, Status> {
        let field = match (req.cpus, req.memory_gib) {
            (Some(_), _) => Some("cpus"),
            (None, Some(_)) => Some("memory_gib"),
            (None, None) => None,
        };
        if let Some(field) = field
            && self.cpu_class(class).is_none()
        {
            let what = match class {
                QuotaClass::Default => "`*` stands for every class without a row".to_owned(),
                QuotaClass::Class(name) => format!("{name} is a GPU class"),
            };
            return Err(Status::invalid_argument(format!(
                "{field}: cpus and memory_gib limit CPU classes; {what}"
            )));
        }
        Ok(QuotaLimits {
            units: req.limit,
            cpus: req.cpus,
            memory_gib: req.memory_gib,
        })
    }

    fn quota(&self, q: &QuotaRecord) -> pb::Quota {
        let (scope, subject_id) = match q.subject {
            QuotaSubject::Tenant => (pb::QuotaScope::Tenant, String::new()),
            QuotaSubject::Team(id) => (pb::QuotaScope::Team, id.to_string()),
            QuotaSubject::User(id) => (pb::QuotaScope::User, id.to_string()),
        };
        // What its units hold in CPUs and memory, by the class's shape now.
        let shape = self.cpu_class(&q.class);
        let held_by = |per: fn(&ComputeClass) -> u32| {
            shape.map_or(0, |c| q.held.saturating_mul(u64::from(per(c))))
        };
        pb::Quota {
            scope: scope.into(),
            subject_id,
            subject: q.label.clone(),
            gpu_class: match &q.class {
                QuotaClass::Class(c) => c.clone(),
                QuotaClass::Default => DEFAULT_CLASS.to_owned(),
            },
            limit: q.limits.units,
            held: q.held,
            cpus: q.limits.cpus,
            memory_gib: q.limits.memory_gib,
            held_cpus: held_by(ComputeClass::cpus),
            held_memory_gib: held_by(ComputeClass::memory_gib),
        }
    }
}

/// A quota row's owner, as the API names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum QuotaScope {
    Tenant,
    Team,
    User,
}

fn team(t: &TeamRecord) -> pb::Team {
    pb::Team {
        id: t.id.to_string(),
        name: t.name.clone(),
        created_at: Some(timestamp(t.created_at)),
        members: t.members,
    }
}

#[tonic::async_trait]
impl TeamService for QuotasApi {
    async fn create_team(
        &self,
        request: Request<pb::CreateTeamRequest>,
    ) -> Result<Response<pb::Team>, Status> {
        let caller = self.auth.caller(request.metadata(), Access::Write).await?;
        caller.must_administer("make teams")?;
        let name = request.into_inner().name;
        check_name(&name)?;
        let made = self
            .store
            .create_team(caller.tenant, TeamId::new(), &name)
            .await
            .map_err(status::store)?;
        Ok(Response::new(team(&made)))
    }

    async fn list_teams(
        &self,
        request: Request<pb::ListTeamsRequest>,
    ) -> Result<Response<pb::ListTeamsResponse>, Status> {
        let caller = self.auth.caller(request.metadata(), Access::Read).await?;
        let teams = self
            .store
            .teams(caller.tenant)
            .await
            .map_err(status::store)?;
        Ok(Response::new(pb::ListTeamsResponse {
            teams: teams.iter().map(team).collect(),
        }))
    }

    async fn delete_team(
        &self,
        request: Request<pb::DeleteTeamRequest>,
    ) -> Result<Response<pb::DeleteTeamResponse>, Status> {
        let caller = self.auth.caller(request.metadata(), Access::Write).await?;
        caller.must_administer("delete teams")?;
        let id: TeamId = scoped::id(&request.get_ref().id)?;
        let deleted = self
            .store
            .delete_team(caller.tenant, id)
            .await
            .map_err(status::store)?;
        if !deleted {
            return Err(status::not_found());
        }
        Ok(Response::new(pb::DeleteTeamResponse {}))
    }
}

#[tonic::async_trait]
impl QuotaService for QuotasApi {
    async fn list_quotas(
        &self,
        request: Request<pb::ListQuotasRequest>,
    ) -> Result<Response<pb::ListQuotasResponse>, Status> {
        let caller = self.auth.caller(request.metadata(), Access::Read).await?;
        Ok(Response::new(self.all(caller.tenant).await?))
    }

    async fn set_quota(
        &self,
        request: Request<pb::SetQuotaRequest>,
    ) -> Result<Response<pb::ListQuotasResponse>, Status> {
        let caller = self.auth.caller(request.metadata(), Access::Write).await?;
        caller.must_administer("set quotas")?;
        let req = request.into_inner();
        let scope = pb::QuotaScope::try_from(req.scope).unwrap_or(pb::QuotaScope::Unspecified);
        let (scope, subject) = match scope {
            pb::QuotaScope::Unspecified => {
                return Err(Status::invalid_argument(
                    "scope: use one of tenant, team, user",
                ));
            }
            pb::QuotaScope::Tenant => (QuotaScope::Tenant, QuotaSubject::Tenant),
            pb::QuotaScope::Team => {
                let id: TeamId =
                    parse_id("subject_id", &req.subject_id).map_err(status::invalid)?;
                (QuotaScope::Team, QuotaSubject::Team(id))
            }
            pb::QuotaScope::User => {
                let id: UserId =
                    parse_id("subject_id", &req.subject_id).map_err(status::invalid)?;
                (QuotaScope::User, QuotaSubject::User(id))
            }
        };
        if scope == QuotaScope::Tenant && !req.subject_id.is_empty() {
            return Err(Status::invalid_argument(
                "subject_id: the tenant's quota names no subject",
            ));
        }
        let class = self.class(&req.gpu_class, scope)?;
        let limits = self.limits(&req, &class)?;
        self.store
            .set_quota_of(caller.tenant, subject, &class, limits)
            .await
            .map_err(status::store)?;
        tracing::info!(class = %req.gpu_class, ?limits, "quota set");
        Ok(Response::new(self.all(caller.tenant).await?))
    }
}
