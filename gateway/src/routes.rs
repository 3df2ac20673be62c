//! The route table: every `google.api.http` binding of the protos, resolved against the
//! descriptor pool once at start-up, so a binding the gateway can't serve is an error before
//! the port opens rather than a 500 later.

use std::collections::HashSet;

use axum::http::uri::PathAndQuery;
use axum::http::{Method, StatusCode};
use einsora_proto::schema::{HttpRoute, Schema};
use prost_reflect::{DescriptorPool, FieldDescriptor, Kind, MessageDescriptor};

use crate::json::TIMESTAMP;

pub(crate) const LOGIN: &str = "/einsora.accounts.v1.AccountService/Login";
pub(crate) const LOGOUT: &str = "/einsora.accounts.v1.AccountService/Logout";
/// Besides a login, the routes that carry a password (a new one), under the login's rule for
/// plain HTTP.
const SETS_PASSWORD: [&str; 3] = [
    "/einsora.accounts.v1.AccountService/ChangePassword",
    "/einsora.accounts.v1.UserService/AcceptInvite",
    "/einsora.accounts.v1.UserService/ResetPassword",
];

/// Routes that take no credential (they issue one): an Idempotency-Key, which is per user,
/// means nothing there, and their answers are never kept.
const NO_CREDENTIAL: [&str; 3] = [
    LOGIN,
    "/einsora.accounts.v1.UserService/AcceptInvite",
    "/einsora.accounts.v1.UserService/ResetPassword",
];

/// The request field that turns a streaming route's answer from one JSON object into NDJSON.
pub(crate) const FOLLOW: &str = "follow";

/// Async actions: they record intent and answer 202 with the workload's current state.
const ACCEPTED: [&str; 4] = [
    "/einsora.workloads.v1.WorkloadService/CreateWorkload",
    "/einsora.workloads.v1.WorkloadService/StartWorkload",
    "/einsora.workloads.v1.WorkloadService/StopWorkload",
    "/einsora.workloads.v1.WorkloadService/DeleteWorkload",
];

/// What the HTTP body of a request maps to.
#[derive(Debug)]
pub(crate) enum Body {
    None,
    /// `body: "*"`: every field the path doesn't bind.
    Whole,
    Field(FieldDescriptor),
}

#[derive(Debug)]
pub(crate) struct Route {
    pub(crate) method: Method,
    /// The path template, e.g. `/v1/workloads/{id}` (also axum's syntax).
    pub(crate) path: String,
    pub(crate) grpc_path: PathAndQuery,
    pub(crate) rpc: String,
    pub(crate) input: MessageDescriptor,
    pub(crate) output: MessageDescriptor,
    pub(crate) path_fields: Vec<FieldDescriptor>,
    pub(crate) body: Body,
    /// Fields a query parameter of the same name sets.
    pub(crate) query_fields: Vec<FieldDescriptor>,
    /// The response field that is the HTTP body; `None` for the whole response.
    pub(crate) response_field: Option<FieldDescriptor>,
    pub(crate) success: StatusCode,
    /// A server-streaming RPC: one JSON object, or NDJSON when the request `follow`s.
    pub(crate) streaming: bool,
    /// Its JSON answer holds a field marked `(einsora.options.v1.secret)`, at any depth.
    pub(crate) answer_carries_secret: bool,
}

impl Route {
    pub(crate) fn is(&self, grpc_path: &str) -> bool {
        self.grpc_path.as_str() == grpc_path
    }

    /// Whether its request carries a password: a login's, or a new one.
    pub(crate) fn carries_password(&self) -> bool {
        self.is(LOGIN) || SETS_PASSWORD.iter().any(|p| self.is(p))
    }

    /// Whether an `Idempotency-Key` applies: a POST by a signed-in caller, answered once.
    pub(crate) fn takes_idempotency_key(&self) -> bool {
        self.method == Method::POST && !self.streaming && !NO_CREDENTIAL.iter().any(|p| self.is(p))
    }

    /// Names of the fields the path binds, which the body may not repeat.
    pub(crate) fn path_names(&self) -> Vec<&str> {
        self.path_fields.iter().map(FieldDescriptor::name).collect()
    }
}

#[derive(Debug, thiserror::Error)]
#[error("the HTTP binding {route}: {problem}")]
pub struct RouteError {
    route: String,
    problem: String,
}

/// Every route of `schema`, resolved in `pool`.
pub(crate) fn load(pool: &DescriptorPool, schema: &Schema) -> Result<Vec<Route>, RouteError> {
    let secrets: HashSet<String> = schema.secret_fields().into_iter().collect();
    schema
        .http_routes()
        .into_iter()
        .map(|http| {
            let mut route = resolve(pool, &http).map_err(|problem| RouteError {
                route: format!("{} {} ({})", http.method, http.path, http.grpc_path()),
                problem,
            })?;
            route.answer_carries_secret = match &route.response_field {
                Some(field) => field_carries_secret(field, &secrets, &mut HashSet::new()),
                None => carries_secret(&route.output, &secrets, &mut HashSet::new()),
            };
            Ok(route)
        })
        .collect()
}

/// Whether `message` holds a secret field, itself or in a message it holds.
fn carries_secret(
    message: &MessageDescriptor,
    secrets: &HashSet<String>,
    seen: &mut HashSet<String>,
) -> bool {
    if !seen.insert(message.full_name().to_owned()) {
        return false;
    }
    message
        .fields()
        .any(|field| field_carries_secret(&field, secrets, seen))
}

fn field_carries_secret(
    field: &FieldDescriptor,
    secrets: &HashSet<String>,
    seen: &mut HashSet<String>,
) -> bool {
    secrets.contains(field.full_name())
        || match field.kind() {
            Kind::Message(inner) => carries_secret(&inner, secrets, seen),
            _ => false,
        }
}

fn resolve(pool: &DescriptorPool, http: &HttpRoute) -> Result<Route, String> {
    let message = |name: &str| {
        pool.get_message_by_name(name)
            .ok_or_else(|| format!("no message {name}"))
    };
    let (input, output) = (message(&http.input_type)?, message(&http.output_type)?);
    let field = |desc: &MessageDescriptor, name: &str| {
        desc.get_field_by_name(name)
            .ok_or_else(|| format!("{} has no field {name}", desc.full_name()))
    };
    let mut path_fields = Vec::new();
    for var in http.path_variables() {
        if http.path.contains(&format!("{{{var}=")) {
            return Err(format!("the pattern of {{{var}}} is not supported"));
        }
        let f = field(&input, var)?;
        if f.is_list() || f.is_map() || matches!(f.kind(), Kind::Message(_) | Kind::Bytes) {
            return Err(format!(
                "the path binds {var}, which is not a single scalar"
            ));
        }
        path_fields.push(f);
    }
    let body = match http.body.as_str() {
        "" => Body::None,
        "*" => Body::Whole,
        name => Body::Field(field(&input, name)?),
    };
    let query_fields = match &body {
        Body::Whole => Vec::new(),
        Body::None | Body::Field(_) => {
            let bound = |f: &FieldDescriptor| {
                path_fields.contains(f) || matches!(&body, Body::Field(b) if b == f)
            };
            let fields: Vec<_> = input.fields().filter(|f| !bound(f)).collect();
            if let Some(f) = fields.iter().find(|f| !queryable(f)) {
                return Err(format!("field {} can't be a query parameter", f.name()));
            }
            fields
        }
    };
    let response_field = match http.response_body.as_str() {
        "" => None,
        name => Some(field(&output, name)?),
    };
    if http.server_streaming
        && !input
            .get_field_by_name(FOLLOW)
            .is_some_and(|f| f.kind() == Kind::Bool && !f.is_list())
    {
        return Err(format!(
            "it streams, so its request needs a bool field {FOLLOW}"
        ));
    }
    let grpc_path = PathAndQuery::try_from(http.grpc_path()).map_err(|e| e.to_string())?;
    let success = if ACCEPTED.contains(&grpc_path.as_str()) {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    Ok(Route {
        method: Method::from_bytes(http.method.as_bytes()).map_err(|e| e.to_string())?,
        path: http.path.clone(),
        grpc_path,
        rpc: http.rpc.clone(),
        input,
        output,
        path_fields,
        body,
        query_fields,
        response_field,
        success,
        streaming: http.server_streaming,
        answer_carries_secret: false,
    })
}

/// Scalars, enums and Timestamps, singular or repeated; nested messages would need dotted
/// names, which no route uses yet.
fn queryable(field: &FieldDescriptor) -> bool {
    match field.kind() {
        _ if field.is_map() => false,
        Kind::Message(m) => m.full_name() == TIMESTAMP,
        Kind::Bytes => false,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn routes() -> Vec<Route> {
        let pool = DescriptorPool::decode(einsora_proto::FILE_DESCRIPTOR_SET).unwrap();
        load(&pool, &Schema::load().unwrap()).expect("every binding resolves")
    }

    #[test]
    fn async_actions_answer_202_and_the_rest_200() {
        let routes = routes();
        for name in ACCEPTED {
            assert!(routes.iter().any(|r| r.is(name)), "{name} has no route");
        }
        let accepted = routes.iter().filter(|r| r.success == StatusCode::ACCEPTED);
        let accepted: Vec<_> = accepted.map(|r| r.rpc.as_str()).collect();
        assert_eq!(
            accepted,
            [
                "CreateWorkload",
                "DeleteWorkload",
                "StartWorkload",
                "StopWorkload"
            ]
        );
        assert!(routes.iter().any(|r| r.is(LOGIN)) && routes.iter().any(|r| r.is(LOGOUT)));
    }

    #[test]
    fn idempotency_keys_apply_to_signed_in_posts_and_secrets_are_found() {
        let routes = routes();
        let keyed: Vec<_> = routes
            .iter()
            .filter(|r| r.takes_idempotency_key())
            .map(|r| r.rpc.as_str())
            .collect();
        assert!(keyed.contains(&"CreateWorkload") && keyed.contains(&"CreateToken"));
        for route in &routes {
            let no_credential = NO_CREDENTIAL.iter().any(|p| route.is(p));
            assert_eq!(
                route.takes_idempotency_key(),
                route.method == Method::POST && !no_credential,
                "{}",
                route.rpc
            );
        }
        let mut secret: Vec<_> = routes
            .iter()
            .filter(|r| r.answer_carries_secret)
            .map(|r| r.rpc.as_str())
            .collect();
        secret.sort_unstable();
        assert_eq!(
            secret,
            [
                "CreateEnrolmentToken",
                "CreateInferenceKey",
                "CreateInvite",
                "CreatePasswordReset",
                "CreateToken",
                "Login",
                "OpenWorkload",
            ]
        );
    }

    #[test]
    fn queries_take_the_fields_the_path_and_body_leave() {
        let routes = routes();
        let find = |m: &str, p: &str| {
            let found = routes.iter().find(|r| r.method == m && r.path == p);
            found.expect("route")
        };
        let names = |fields: &[FieldDescriptor]| -> Vec<String> {
            fields.iter().map(|f| f.name().to_owned()).collect()
        };
        let get = find("GET", "/v1/workloads/{id}");
        assert_eq!(names(&get.path_fields), ["id"]);
        assert_eq!(names(&get.query_fields), ["include_deleted"]);
        let usage = find("GET", "/v1/usage");
        assert_eq!(
            names(&usage.query_fields),
            ["from", "to", "page_size", "page_token", "tokens"]
        );
        let start = find("POST", "/v1/workloads/{id}/start");
        assert!(matches!(start.body, Body::Whole) && start.query_fields.is_empty());
        let login = find("POST", "/v1/sessions");
        assert_eq!(
            login.response_field.as_ref().map(|f| f.name()),
            Some("session")
        );
    }
}
