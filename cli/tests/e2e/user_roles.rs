//! Roles over real HTTP, on every route: an owner's, an admin's and a member's answers are each
//! what the role is designed to get (docs/api.md, "Users and roles"). Every route is classified
//! here, so a new route without a case fails the test. A member asking for a workload of anyone
//! else (the owner's, or a member's of another team) gets an answer byte-identical to an unknown
//! ID's on every workload route; an admin reads it. Another tenant's answers on every route are
//! isolation.rs's.

use einsora_core::ids::WorkloadId;
use einsora_proto::schema::Schema;
use serde_json::json;

use crate::harness::cli::{Cli, dev_password};
use crate::harness::solo::Solo;
use crate::harness::support::stderr;
use crate::harness::world::{
    Credential, a_notebook, call, launch, login, tenant, without_request_id,
};

/// Routes only owners and admins may call: a member is refused (403) before anything is read.
const ADMIN_ONLY: &[&str] = &[
    "UserService/UpdateUser",
    "UserService/RemoveUser",
    "UserService/CreatePasswordReset",
    "UserService/CreateInvite",
    "UserService/ListInvites",
    "UserService/RevokeInvite",
    "EnrolmentTokenService/CreateEnrolmentToken",
    "EnrolmentTokenService/ListEnrolmentTokens",
    "EnrolmentTokenService/RevokeEnrolmentToken",
    "MachineService/RevokeMachine",
    "ActivityService/ListActivity",
    "TeamService/CreateTeam",
    "TeamService/DeleteTeam",
    "QuotaService/SetQuota",
    "InferenceKeyService/SetInferenceLimits",
];

/// Routes every user may call (on what their role lets them see).
const EVERYONE: &[&str] = &[
    "WorkloadService/CreateWorkload",
    "WorkloadService/ListWorkloads",
    "WorkloadService/GetWorkload",
    "WorkloadService/DeleteWorkload",
    "WorkloadService/StartWorkload",
    "WorkloadService/StopWorkload",
    "WorkloadService/ListWorkloadEvents",
    "WorkloadService/ListWorkloadLogs",
    "WorkloadService/ExportWorkload",
    "AccessService/OpenWorkload",
    "MachineService/ListMachines",
    "MachineService/GetMachine",
    "MachineService/SetTrustedUsers",
    "CatalogService/GetCatalog",
    "UsageService/ListUsage",
    "UsageService/GetUsageReport",
    "StatusService/GetStatus",
    "AccountService/GetMe",
    "AccountService/ChangePassword",
    "TokenService/CreateToken",
    "TokenService/ListTokens",
    "TokenService/RevokeToken",
    "UserService/ListUsers",
    "TeamService/ListTeams",
    "QuotaService/ListQuotas",
    // A member's own keys; an owner's or admin's, the tenant's.
    "InferenceKeyService/CreateInferenceKey",
    "InferenceKeyService/ListInferenceKeys",
    "InferenceKeyService/RevokeInferenceKey",
    "InferenceKeyService/GetInferenceLimits",
];

/// Routes not called here: their credential is in the body (a password, a link's secret), or
/// calling them ends the session the test goes on with.
const NOT_CALLED: &[&str] = &[
    "AccountService/Login",
    "AccountService/Logout",
    "UserService/AcceptInvite",
    "UserService/ResetPassword",
];

/// A session of a new user of the owner's tenant with `role`, joined with an invite.
fn invited(solo: &Solo, owner: &Credential, email: &str, role: &str) -> Credential {
    let made = call(
        solo,
        owner,
        "POST",
        "/v1/invites",
        Some(json!({ "email": email, "role": role })),
    );
    assert_eq!(made.status, 200, "{}", made.body);
    let secret = made.json()["secret"].as_str().unwrap().to_owned();
    let password = "a password of 12+";
    let body = json!({ "secret": secret, "password": password });
    let joined = call(
        solo,
        &Credential::Nobody,
        "POST",
        "/v1/invites/accept",
        Some(body),
    );
    assert_eq!(joined.status, 200, "{}", joined.body);
    login(solo, email, password)
}

#[test]
fn each_role_gets_the_answers_it_is_designed_to_on_every_route() {
    let solo = Solo::start(&[("EINSORA_AUTH_MODE", "dev")]);
    let owner = tenant(&solo, "dev@acme");
    let admin = invited(&solo, &owner.session, "admin@acme.example", "admin");
    let member = invited(&solo, &owner.session, "member@acme.example", "member");
    let elsewhere = invited(&solo, &owner.session, "infra@acme.example", "member");
    for (team, who) in [
        ("ml", "member@acme.example"),
        ("infra", "infra@acme.example"),
    ] {
        in_team(&solo, &owner.session, team, who);
    }
    let owners = launch(&solo, &owner.session, a_notebook("owners"));
    let other_teams = launch(&solo, &elsewhere, a_notebook("infras"));
    let unknown = WorkloadId::new().to_string();

    let mut cases = 0;
    for route in Schema::load().unwrap().http_routes() {
        let rpc = route.grpc_path();
        let short = rpc.rsplit_once(".v1.").map_or(rpc.as_str(), |(_, s)| s);
        let admin_only = ADMIN_ONLY.contains(&short);
        assert!(
            admin_only || EVERYONE.contains(&short) || NOT_CALLED.contains(&short),
            "{short} ({} {}) is new: say which roles may call it",
            route.method,
            route.path
        );
        if NOT_CALLED.contains(&short) {
            continue;
        }
        let path = route.path.replace("{id}", &unknown);
        // An empty body: refused as invalid where a body is needed, after the role is checked.
        let body = (!route.body.is_empty()).then(|| json!({}));
        let as_member = call(&solo, &member, &route.method, &path, body.clone());
        let as_admin = call(&solo, &admin, &route.method, &path, body.clone());
        let as_owner = call(&solo, &owner.session, &route.method, &path, body.clone());
        let what = format!("{} {}", route.method, route.path);
        assert!(
            as_owner.status != 403 && as_owner.status < 500,
            "{what} as the owner: {}",
            as_owner.body
        );
        if admin_only {
            assert_eq!(
                as_member.status, 403,
                "{what} as a member: {}",
                as_member.body
            );
            assert!(
                as_member.body.contains("only an owner or admin"),
                "{what}: the refusal says why: {}",
                as_member.body
            );
        } else {
            assert_ne!(
                as_member.status, 403,
                "{what} as a member: {}",
                as_member.body
            );
        }
        assert_ne!(
            as_admin.status, 403,
            "{what} as an admin: {}",
            as_admin.body
        );
        assert!(
            as_admin.status < 500,
            "{what} as an admin: {}",
            as_admin.body
        );
        assert!(
            as_member.status < 500,
            "{what} as a member: {}",
            as_member.body
        );

        // Another user's workload (the owner's; another team's member's): as unknown to a
        // member, byte for byte; an admin's to read.
        if route.path.starts_with("/v1/workloads/{id}") || route.path.contains("{id}/access") {
            let never = call(&solo, &member, &route.method, &path, body.clone());
            for theirs in [&owners, &other_teams] {
                let theirs = route.path.replace("{id}", theirs);
                let foreign = call(&solo, &member, &route.method, &theirs, body.clone());
                assert_eq!(foreign.status, 404, "{what}: {}", foreign.body);
                assert_eq!(
                    without_request_id(&foreign),
                    without_request_id(&never),
                    "{what}"
                );
                if route.method == "GET" {
                    let seen = call(&solo, &admin, &route.method, &theirs, None);
                    assert_eq!(seen.status, 200, "{what} as an admin: {}", seen.body);
                }
            }
        }
        cases += 1;
    }
    assert!(cases >= 30, "only {cases} routes: did they go missing?");
    let listed = call(&solo, &member, "GET", "/v1/workloads", None);
    assert!(
        !listed.body.contains(&owners) && !listed.body.contains(&other_teams),
        "a member's list: {}",
        listed.body
    );
    let listed = call(&solo, &admin, "GET", "/v1/workloads", None);
    assert!(
        listed.body.contains(&owners) && listed.body.contains(&other_teams),
        "an admin's list: {}",
        listed.body
    );
}

/// An inference key (`isk_…`) calls endpoints and manages nothing: every management route
/// answers it 401, as an unknown token, the owner's own key included; at the access proxy the
/// same key authenticates (an unknown endpoint is 404 to it, where a made-up key is 401).
#[test]
fn an_inference_key_manages_nothing_on_any_route() {
    let solo = Solo::start(&[("EINSORA_AUTH_MODE", "dev")]);
    let owner = tenant(&solo, "dev@acme");
    let made = call(
        &solo,
        &owner.session,
        "POST",
        "/v1/inference-keys",
        Some(json!({ "name": "everything", "all_endpoints": true })),
    );
    assert_eq!(made.status, 200, "{}", made.body);
    let key = made.json()["key"].as_str().unwrap().to_owned();
    assert!(key.starts_with("isk_"), "{key}");
    let as_key = Credential::Token(key.clone());
    let unknown = WorkloadId::new().to_string();
    let mut cases = 0;
    for route in Schema::load().unwrap().http_routes() {
        let rpc = route.grpc_path();
        let short = rpc.rsplit_once(".v1.").map_or(rpc.as_str(), |(_, s)| s);
        // Their credential is in the body (a password, a link's secret).
        if [
            "AccountService/Login",
            "UserService/AcceptInvite",
            "UserService/ResetPassword",
        ]
        .contains(&short)
        {
            continue;
        }
        let path = route.path.replace("{id}", &unknown);
        let body = (!route.body.is_empty()).then(|| json!({}));
        let answer = call(&solo, &as_key, &route.method, &path, body);
        let what = format!("{} {}", route.method, route.path);
        assert_eq!(answer.status, 401, "{what}: {}", answer.body);
        assert_eq!(
            answer.json()["error"]["code"],
            "unauthenticated",
            "{what}: {}",
            answer.body
        );
        cases += 1;
    }
    assert!(cases >= 40, "only {cases} routes: did they go missing?");
    // The key is live: the proxy knows it, and finds no such endpoint.
    let models = |bearer: &str| {
        let auth = format!("Bearer {bearer}");
        let path = format!("/e/{unknown}/v1/models");
        let port = solo.access.rsplit(':').next().unwrap();
        let host = format!("localhost:{port}");
        einsora_testkit::http::exchange(
            &solo.access,
            &einsora_testkit::http::request("GET", &path, &host, &[("Authorization", &auth)], ""),
        )
    };
    assert_eq!(models(&key).status, 404);
    let made_up = format!("isk_{}", "x".repeat(32));
    assert_eq!(models(&made_up).status, 401);
}

/// Makes a team named `team` and puts `email` in it.
fn in_team(solo: &Solo, owner: &Credential, team: &str, email: &str) {
    let made = call(
        solo,
        owner,
        "POST",
        "/v1/teams",
        Some(json!({ "name": team })),
    );
    assert_eq!(made.status, 200, "{}", made.body);
    let id = made.json()["id"].as_str().unwrap().to_owned();
    let users = call(solo, owner, "GET", "/v1/users", None).json();
    let user = users["users"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["email"] == email)
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let moved = call(
        solo,
        owner,
        "PATCH",
        &format!("/v1/users/{user}"),
        Some(json!({ "team_id": id })),
    );
    assert_eq!(moved.status, 200, "{}", moved.body);
}

/// Teams and quotas through the CLI: the owner makes a team, puts a member in it and gives it a
/// quota of none; the member's launch is refused naming the team's quota, and `einsora quotas
/// list` shows each row with what it holds.
#[test]
fn teams_and_quotas_are_managed_from_the_cli_and_hold_on_launch() {
    let solo = Solo::start(&[("EINSORA_AUTH_MODE", "dev")]);
    let owner_cli = Cli::new(&solo, "owner");
    owner_cli.login("dev@acme", &dev_password(&solo, "dev@acme"));
    let owner = tenant(&solo, "dev@acme");
    invited(&solo, &owner.session, "ann@acme.example", "member");
    let ann = Cli::new(&solo, "ann");
    ann.login("ann@acme.example", "a password of 12+");

    let made = owner_cli.json(&["teams", "create", "ml"]);
    assert_eq!(made["teams"][0]["name"], "ml", "{made}");
    let moved = owner_cli.json(&["users", "set-team", "ann@acme.example", "ml"]);
    assert_eq!(moved["team_id"], made["teams"][0]["id"], "{moved}");
    owner_cli.ok(&["quotas", "set", "cpu-1c-2g", "0", "--team", "ml"]);
    owner_cli.ok(&[
        "quotas",
        "set",
        "cpu-1c-2g",
        "5",
        "--user",
        "ann@acme.example",
    ]);

    let refused = ann.run(
        &[
            "launch",
            "--kind",
            "notebook",
            "--name",
            "nb",
            "--class",
            "cpu-1c-2g",
            "--image",
            "jupyterlab",
        ],
        None,
    );
    assert!(!refused.status.success());
    let said = stderr(&refused);
    assert!(
        said.contains("team \"ml\"'s quota for cpu-1c-2g exceeded: 0 held, 1 requested, limit 0"),
        "{said}"
    );
    let listed = ann.json(&["quotas", "list"]);
    let rows = listed["quotas"].as_array().unwrap();
    let row = |scope: &str| rows.iter().find(|q| q["scope"] == scope).cloned();
    assert_eq!(row("team").unwrap()["limit"], 0, "{listed}");
    assert_eq!(
        row("user").unwrap()["subject"],
        "ann@acme.example",
        "{listed}"
    );
    // A member sets nothing.
    let denied = ann.run(&["quotas", "set", "cpu-1c-2g", "9", "--team", "ml"], None);
    assert!(
        stderr(&denied).contains("only an owner or admin"),
        "{}",
        stderr(&denied)
    );
}
