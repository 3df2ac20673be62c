//! ActivityService: the caller's tenant's activity log (ADR 0012), for its owner. What is
//! written there, and when, is `context`'s and the store's; this only reads it.

use std::sync::Arc;

use einsora_core::ids::UserId;
use einsora_proto::activity::v1::activity_service_server::ActivityService;
use einsora_proto::activity::v1::{self as pb};
use einsora_proto::convert::{optional_time, parse_id, timestamp};
use einsora_store::{Activity, ActivityQuery, Store};
use tonic::{Request, Response, Status};
use uuid::Uuid;

use crate::caller::{Access, Auth, Caller};
use crate::status;

const DEFAULT_PAGE_SIZE: u32 = 100;

#[derive(Debug, Clone)]
pub struct ActivityApi {
    store: Arc<dyn Store>,
    auth: Arc<Auth>,
}

impl ActivityApi {
    pub fn new(store: Arc<dyn Store>, auth: Arc<Auth>) -> Self {
        ActivityApi { store, auth }
    }
}

#[tonic::async_trait]
impl ActivityService for ActivityApi {
    async fn list_activity(
        &self,
        request: Request<pb::ListActivityRequest>,
    ) -> Result<Response<pb::ListActivityResponse>, Status> {
        let caller = self.auth.caller(request.metadata(), Access::Read).await?;
        caller.must_administer("read the activity log")?;
        let query = query(&caller, &request.into_inner())?;
        let page = self.store.activity(&query).await.map_err(status::store)?;
        Ok(Response::new(pb::ListActivityResponse {
            entries: page.entries.iter().map(entry).collect(),
            next_page_token: page.next.map(|id| id.to_string()).unwrap_or_default(),
        }))
    }
}

/// The request's filters, validated.
fn query(caller: &Caller, req: &pb::ListActivityRequest) -> Result<ActivityQuery, Status> {
    let from = optional_time("from", req.from.as_ref()).map_err(status::invalid)?;
    let to = optional_time("to", req.to.as_ref()).map_err(status::invalid)?;
    if let (Some(from), Some(to)) = (from, to)
        && to <= from
    {
        return Err(Status::invalid_argument(
            "to is not valid: it must be after from",
        ));
    }
    if req.page_size > einsora_store::MAX_ACTIVITY_PAGE {
        return Err(Status::invalid_argument(format!(
            "page_size is not valid: at most {}",
            einsora_store::MAX_ACTIVITY_PAGE
        )));
    }
    let words = |c: char| c.is_ascii_lowercase() || c == '_';
    if req.action.len() > 64 || !req.action.chars().all(words) {
        return Err(Status::invalid_argument(
            "action is not valid: an action's name (lowercase letters and _)",
        ));
    }
    let ok = match req.result.as_str() {
        "" => None,
        "ok" => Some(true),
        "refused" => Some(false),
        _ => {
            return Err(Status::invalid_argument(
                "result is not valid: ok or refused",
            ));
        }
    };
    let user: Option<UserId> = match req.user_id.as_str() {
        "" => None,
        raw => Some(parse_id("user_id", raw).map_err(status::invalid)?),
    };
    let hyphenated = |id: &str| id.len() == 36 && Uuid::try_parse(id).is_ok();
    if !req.object_id.is_empty() && !hyphenated(&req.object_id) {
        return Err(Status::invalid_argument(
            "object_id is not valid: an object's ID (a UUID)",
        ));
    }
    let before = match req.page_token.as_str() {
        "" => None,
        raw => Some(Uuid::try_parse(raw).map_err(|_| {
            Status::invalid_argument("page_token is not valid: use a response's next_page_token")
        })?),
    };
    Ok(ActivityQuery {
        tenant: caller.tenant,
        from,
        to,
        action: (!req.action.is_empty()).then(|| req.action.clone()),
        user,
        object_id: (!req.object_id.is_empty()).then(|| req.object_id.to_ascii_lowercase()),
        ok,
        before,
        limit: match req.page_size {
            0 => DEFAULT_PAGE_SIZE,
            n => n,
        },
    })
}

fn entry(a: &Activity) -> pb::ActivityEntry {
    let (object_kind, object_id) = match &a.object {
        Some(o) => (o.kind.clone(), o.id.clone()),
        None => (String::new(), String::new()),
    };
    pb::ActivityEntry {
        id: a.id.to_string(),
        at: Some(timestamp(a.at)),
        user_id: a.user_id.map(|u| u.to_string()).unwrap_or_default(),
        actor: a.actor.clone(),
        action: a.action.clone(),
        object_kind,
        object_id,
        result: a.result.clone(),
        request_id: a.request_id.clone(),
        client_addr: a.client_addr.clone().unwrap_or_default(),
    }
}
