//! The HTTP mapping declared in the protos is exactly the pinned routes of DESIGN.md ("Pinned
//! interfaces") plus the few unpinned ones listed here, with the right methods, so a route
//! can't silently drift. `GET /v1/openapi.json` is pinned too, but the gateway serves it
//! itself: it is no RPC.

// A test harness: a failed unwrap is a failed test, and it reads its own environment.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::collections::BTreeSet;

use einsora_proto::schema::{HttpRoute, Schema};

/// DESIGN.md, "Pinned interfaces", routes (minus /v1/openapi.json).
const PINNED: &[(&str, &str)] = &[
    ("POST", "/v1/workloads"),
    ("GET", "/v1/workloads"),
    ("GET", "/v1/workloads/{id}"),
    ("DELETE", "/v1/workloads/{id}"),
    ("POST", "/v1/workloads/{id}/start"),
    ("POST", "/v1/workloads/{id}/stop"),
    ("POST", "/v1/workloads/{id}/access"),
    ("GET", "/v1/workloads/{id}/events"),
    ("GET", "/v1/workloads/{id}/export"),
    ("GET", "/v1/machines"),
    ("GET", "/v1/machines/{id}"),
    ("GET", "/v1/catalog"),
    ("GET", "/v1/usage"),
    ("POST", "/v1/sessions"),
    ("DELETE", "/v1/sessions/current"),
    ("GET", "/v1/me"),
    ("POST", "/v1/tokens"),
    ("GET", "/v1/tokens"),
    ("DELETE", "/v1/tokens/{id}"),
];

/// Routes the issues ask for without pinning their paths.
const UNPINNED: &[(&str, &str)] = &[
    ("GET", "/v1/workloads/{id}/logs"),
    ("POST", "/v1/me/password"),
    ("POST", "/v1/machines/{id}/revoke"),
    ("POST", "/v1/enrolment-tokens"),
    ("GET", "/v1/enrolment-tokens"),
    ("DELETE", "/v1/enrolment-tokens/{id}"),
    ("GET", "/v1/activity"),
    ("GET", "/v1/usage/report"),
    ("GET", "/v1/status"),
    ("GET", "/v1/users"),
    ("PATCH", "/v1/users/{id}"),
    ("DELETE", "/v1/users/{id}"),
    ("POST", "/v1/users/{id}/password-reset"),
    ("POST", "/v1/invites"),
    ("GET", "/v1/invites"),
    ("DELETE", "/v1/invites/{id}"),
    ("POST", "/v1/invites/accept"),
    ("POST", "/v1/password-resets/accept"),
    ("PUT", "/v1/machines/{id}/trusted-users"),
    ("POST", "/v1/teams"),
    ("GET", "/v1/teams"),
    ("DELETE", "/v1/teams/{id}"),
    ("GET", "/v1/quotas"),
    ("PUT", "/v1/quotas"),
    ("POST", "/v1/inference-keys"),
    ("GET", "/v1/inference-keys"),
    ("DELETE", "/v1/inference-keys/{id}"),
    ("GET", "/v1/inference-limits"),
    ("PUT", "/v1/inference-limits"),
];

/// Which RPC serves each pinned route (gRPC path), so a route can't move to another RPC.
const PINNED_RPCS: &[(&str, &str, &str)] = &[
    (
        "POST",
        "/v1/workloads",
        "/einsora.workloads.v1.WorkloadService/CreateWorkload",
    ),
    (
        "GET",
        "/v1/workloads",
        "/einsora.workloads.v1.WorkloadService/ListWorkloads",
    ),
    (
        "GET",
        "/v1/workloads/{id}",
        "/einsora.workloads.v1.WorkloadService/GetWorkload",
    ),
    (
        "DELETE",
        "/v1/workloads/{id}",
        "/einsora.workloads.v1.WorkloadService/DeleteWorkload",
    ),
    (
        "POST",
        "/v1/workloads/{id}/start",
        "/einsora.workloads.v1.WorkloadService/StartWorkload",
    ),
    (
        "POST",
        "/v1/workloads/{id}/stop",
        "/einsora.workloads.v1.WorkloadService/StopWorkload",
    ),
    (
        "POST",
        "/v1/workloads/{id}/access",
        "/einsora.access.v1.AccessService/OpenWorkload",
    ),
    (
        "GET",
        "/v1/workloads/{id}/events",
        "/einsora.workloads.v1.WorkloadService/ListWorkloadEvents",
    ),
    (
        "GET",
        "/v1/workloads/{id}/export",
        "/einsora.workloads.v1.WorkloadService/ExportWorkload",
    ),
    (
        "GET",
        "/v1/machines",
        "/einsora.machines.v1.MachineService/ListMachines",
    ),
    (
        "GET",
        "/v1/machines/{id}",
        "/einsora.machines.v1.MachineService/GetMachine",
    ),
    (
        "GET",
        "/v1/catalog",
        "/einsora.catalog.v1.CatalogService/GetCatalog",
    ),
    (
        "GET",
        "/v1/usage",
        "/einsora.usage.v1.UsageService/ListUsage",
    ),
    (
        "POST",
        "/v1/sessions",
        "/einsora.accounts.v1.AccountService/Login",
    ),
    (
        "DELETE",
        "/v1/sessions/current",
        "/einsora.accounts.v1.AccountService/Logout",
    ),
    ("GET", "/v1/me", "/einsora.accounts.v1.AccountService/GetMe"),
    (
        "POST",
        "/v1/tokens",
        "/einsora.accounts.v1.TokenService/CreateToken",
    ),
    (
        "GET",
        "/v1/tokens",
        "/einsora.accounts.v1.TokenService/ListTokens",
    ),
    (
        "DELETE",
        "/v1/tokens/{id}",
        "/einsora.accounts.v1.TokenService/RevokeToken",
    ),
];

fn routes() -> (Schema, Vec<HttpRoute>) {
    let schema = Schema::load().expect("FILE_DESCRIPTOR_SET decodes");
    let routes = schema.http_routes();
    (schema, routes)
}

fn find<'a>(routes: &'a [HttpRoute], method: &str, path: &str) -> Option<&'a HttpRoute> {
    routes.iter().find(|r| r.method == method && r.path == path)
}

#[test]
fn every_pinned_route_is_declared_with_its_method() {
    let (_, routes) = routes();
    for &(method, path) in PINNED {
        assert!(
            find(&routes, method, path).is_some(),
            "{method} {path} is not declared"
        );
    }
}

#[test]
fn declared_routes_are_exactly_the_pinned_and_listed_ones() {
    let (_, routes) = routes();
    let declared: BTreeSet<(String, String)> = routes
        .iter()
        .map(|r| (r.method.clone(), r.path.clone()))
        .collect();
    assert_eq!(declared.len(), routes.len(), "a route is declared twice");
    let expected: BTreeSet<(String, String)> = PINNED
        .iter()
        .chain(UNPINNED)
        .map(|&(m, p)| (m.to_owned(), p.to_owned()))
        .collect();
    assert_eq!(declared, expected);
}

#[test]
fn pinned_routes_are_served_by_their_rpcs() {
    let (_, routes) = routes();
    assert_eq!(PINNED_RPCS.len(), PINNED.len());
    for &(method, path, rpc) in PINNED_RPCS {
        let route = find(&routes, method, path).expect("declared");
        assert_eq!(route.grpc_path(), rpc, "{method} {path}");
    }
}

#[test]
fn path_variables_and_bodies_name_real_fields() {
    let (schema, routes) = routes();
    for r in &routes {
        let input = schema.message(&r.input_type).expect("input message exists");
        let output = schema
            .message(&r.output_type)
            .expect("output message exists");
        for var in r.path_variables() {
            assert!(
                input.fields.iter().any(|f| f == var),
                "{} {}: no field {var}",
                r.method,
                r.path
            );
        }
        match r.method.as_str() {
            "GET" | "DELETE" => assert_eq!(r.body, "", "{} {} has a body", r.method, r.path),
            _ => assert!(
                r.body == "*" || input.fields.contains(&r.body),
                "{} {}: body {:?}",
                r.method,
                r.path,
                r.body
            ),
        }
        assert!(
            r.response_body.is_empty() || output.fields.contains(&r.response_body),
            "{} {}: response_body {:?}",
            r.method,
            r.path,
            r.response_body
        );
    }
}

#[test]
fn login_answers_with_the_session_and_never_the_session_id() {
    let (schema, routes) = routes();
    let login = find(&routes, "POST", "/v1/sessions").unwrap();
    assert_eq!(login.response_body, "session");
    let session = schema.message("einsora.accounts.v1.Session").unwrap();
    assert!(!session.fields.iter().any(|f| f == "session_id"));
}

/// The one streaming route follows a workload's output; the gateway answers it as one JSON
/// object, or as NDJSON when the request `follow`s (its request has the field).
#[test]
fn only_the_logs_route_streams() {
    let (schema, routes) = routes();
    let streaming: Vec<&str> = routes
        .iter()
        .filter(|r| r.server_streaming)
        .map(|r| r.rpc.as_str())
        .collect();
    assert_eq!(streaming, ["ListWorkloadLogs"]);
    let request = schema
        .message("einsora.workloads.v1.ListWorkloadLogsRequest")
        .unwrap();
    assert!(request.fields.iter().any(|f| f == "follow"));
}

#[test]
fn every_public_rpc_has_a_route_and_no_other_has_one() {
    let (_, routes) = routes();
    let public = [
        "einsora.workloads.v1.WorkloadService",
        "einsora.machines.v1.MachineService",
        "einsora.catalog.v1.CatalogService",
        "einsora.access.v1.AccessService",
        "einsora.accounts.v1.AccountService",
        "einsora.accounts.v1.TokenService",
        "einsora.accounts.v1.InferenceKeyService",
        "einsora.accounts.v1.UserService",
        "einsora.accounts.v1.TeamService",
        "einsora.accounts.v1.QuotaService",
        "einsora.usage.v1.UsageService",
        "einsora.enrolment.v1.EnrolmentTokenService",
        "einsora.activity.v1.ActivityService",
        "einsora.status.v1.StatusService",
    ];
    for r in &routes {
        assert!(
            public.contains(&r.service.as_str()),
            "{} is routed",
            r.grpc_path()
        );
    }
    let rpcs_with_routes: BTreeSet<String> = routes.iter().map(|r| r.grpc_path()).collect();
    assert_eq!(
        rpcs_with_routes.len(),
        routes.len(),
        "an RPC has two routes"
    );
    // 9 workloads + 4 machines + 1 catalog + 1 access + 4 accounts + 3 tokens + 9 users + 3
    // teams + 2 quotas + 2 usage (records, report) + 3 enrolment tokens + 1 activity + 1
    // status + 5 inference keys and limits.
    assert_eq!(rpcs_with_routes.len(), 48);
}

#[test]
fn path_variables_are_parsed_from_templates() {
    let route = HttpRoute {
        method: "GET".into(),
        path: "/v1/a/{id}/b/{name=things/*}".into(),
        body: String::new(),
        response_body: String::new(),
        service: "s".into(),
        rpc: "r".into(),
        input_type: "i".into(),
        output_type: "o".into(),
        server_streaming: false,
    };
    assert_eq!(route.path_variables(), ["id", "name"]);
    assert_eq!(route.grpc_path(), "/s/r");
}
