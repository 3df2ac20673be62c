//! Tenant isolation over real HTTP and gRPC: on every route that names an object, another
//! tenant's session and token get an answer byte-identical to an unknown ID's (404), and no list
//! shows a foreign object. Every route but login needs a credential, for every method. And no
//! secret issued along the way reaches a log line.

use einsora_core::ids::WorkloadId;
use einsora_proto::schema::Schema;
use serde_json::json;

use crate::harness::log_gate::assert_no_secret_logged;
use crate::harness::solo::{Engine, Solo};
use crate::harness::support::Einsora;
use crate::harness::world::{
    Credential, call, catalog_with_a_second_region, objects, tenant, without_request_id,
};

#[test]
fn another_tenants_objects_answer_exactly_like_unknown_ids_on_sqlite() {
    isolation(Engine::Sqlite);
}

#[test]
fn another_tenants_objects_answer_exactly_like_unknown_ids_on_postgres() {
    isolation(Engine::Postgres);
}

fn isolation(engine: Engine) {
    let e = Einsora::new();
    let catalog = catalog_with_a_second_region(&e);
    let env = [("EINSORA_AUTH_MODE", "dev"), ("EINSORA_CATALOG", &catalog)];
    let solo = Solo::launch(e, engine, &env);
    let mut a = tenant(&solo, "dev@acme");
    let b = tenant(&solo, "dev@globex");
    let objects = objects(&solo, &a);

    let mut cases = 0;
    // What B's activity log must show of it: (action, actor, the ID asked for).
    let mut refused: Vec<(String, String, String)> = Vec::new();
    let actors = [&b.session, &b.token].map(|who| actor(&solo, who));
    for route in Schema::load().unwrap().http_routes() {
        if route.path_variables().is_empty() {
            continue;
        }
        let theirs = route.path.replace("{id}", objects.for_path(&route.path));
        let unknown = route.path.replace("{id}", &WorkloadId::new().to_string());
        let body = (!route.body.is_empty()).then(|| json!({}));
        for (who, actor) in [&b.session, &b.token].into_iter().zip(&actors) {
            let foreign = call(&solo, who, &route.method, &theirs, body.clone());
            let never = call(&solo, who, &route.method, &unknown, body.clone());
            let action = snake(&route.rpc);
            for path in [&theirs, &unknown] {
                let id = path.split('/').nth(3).unwrap_or_default().to_owned();
                refused.push((action.clone(), actor.clone(), id));
            }
            let what = format!("{} {} as {who:?}", route.method, route.path);
            assert_eq!(
                without_request_id(&foreign),
                without_request_id(&never),
                "{what}"
            );
            match who {
                Credential::Session { .. } => {
                    assert_eq!(foreign.status, 404, "{what}: {}", foreign.body)
                }
                _ => assert!(
                    matches!(foreign.status, 403 | 404),
                    "{what}: {}",
                    foreign.body
                ),
            }
            cases += 1;
        }
    }
    assert!(
        cases >= 20,
        "only {cases} cases: did the routes go missing?"
    );

    let lists = [
        "/v1/workloads?include_deleted=true",
        "/v1/machines",
        "/v1/tokens",
        "/v1/enrolment-tokens",
        "/v1/users",
        "/v1/invites",
        "/v1/teams",
        "/v1/quotas",
        "/v1/inference-keys",
        "/v1/inference-limits",
        "/v1/usage?from=2000-01-01T00:00:00Z&to=2100-01-01T00:00:00Z",
    ];
    let a_ids = [
        objects.workload.as_str(),
        objects.token.as_str(),
        objects.machine.as_str(),
        objects.enrolment_token.as_str(),
        objects.user.as_str(),
        objects.invite.as_str(),
        objects.team.as_str(),
        objects.inference_key.as_str(),
    ];
    for path in lists {
        let own = call(&solo, &a.session, "GET", path, None);
        assert_eq!(own.status, 200, "{path}: {}", own.body);
        for who in [&b.session, &b.token] {
            let listed = call(&solo, who, "GET", path, None);
            assert!(
                matches!(listed.status, 200 | 403),
                "{path}: {}",
                listed.body
            );
            for id in a_ids.iter().chain([&a.id.to_string().as_str()]) {
                assert!(!listed.body.contains(id), "{path} as {who:?} shows {id}");
            }
        }
    }
    let own = call(&solo, &a.session, "GET", "/v1/workloads", None).body;
    assert!(
        own.contains(&objects.workload),
        "A's list shows its workload"
    );

    // A opens its running notebook: the one-time link's ticket is a secret too.
    let path = format!("/v1/workloads/{}/access", objects.workload);
    let opened = call(&solo, &a.session, "POST", &path, Some(json!({})));
    assert_eq!(opened.status, 200, "{}", opened.body);
    let link = opened.json()["notebook"]["link"]
        .as_str()
        .unwrap()
        .to_owned();
    let ticket = link.split("ticket=").nth(1).unwrap().to_owned();
    // `up` points links at the access proxy's own port (EINSORA_ACCESS_ADDR).
    let access_port = solo.access.rsplit(':').next().unwrap();
    assert!(
        link.starts_with(&format!(
            "http://w-{}.localhost:{access_port}/_einsora/open?ticket=",
            objects.workload
        )),
        "{link}"
    );
    a.secrets.push(ticket);
    a.secrets.push(objects.inference_key_secret.clone());
    assert_no_secret_logged(&solo, a.secrets.iter().chain(&b.secrets));

    // Every refused call is in B's activity log, with B's actor, its action, the error and the
    // ID it asked for; none of it is in A's, which has A's own actions.
    assert_eq!(refused.len(), cases * 2);
    let in_log = |theirs: &[serde_json::Value], (action, actor, id): &(String, String, String)| {
        theirs.iter().any(|e| {
            e["action"] == action.as_str()
                && e["actor"] == actor.as_str()
                && e["result"] != "ok"
                && (e["result"] != "not_found" || e["object_id"] == id.as_str())
        })
    };
    // A refusal's entry is written just after its answer.
    let theirs = einsora_testkit::eventually_or(
        "every refusal in B's log",
        std::time::Duration::from_secs(30),
        || {
            let theirs = activity(&solo, &b.session);
            refused.iter().all(|r| in_log(&theirs, r)).then_some(theirs)
        },
        || {
            let theirs = activity(&solo, &b.session);
            let missing: Vec<_> = refused.iter().filter(|r| !in_log(&theirs, r)).collect();
            format!("missing from B's log: {missing:#?}")
        },
    );
    assert!(theirs.len() >= refused.len(), "{} entries", theirs.len());
    let ours = activity(&solo, &a.session);
    assert!(
        ours.iter()
            .all(|e| !actors.contains(&e["actor"].as_str().unwrap_or_default().to_owned())),
        "nothing of B's in A's log"
    );
    let created = ours.iter().any(|e| {
        e["action"] == "create_workload"
            && e["result"] == "ok"
            && e["object_id"] == objects.workload.as_str()
    });
    assert!(created, "A's create is in its log: {ours:#?}");
    // The log is its owner's to read; B's token reads B's (the token's user is its owner).
    let page = call(&solo, &b.token, "GET", "/v1/activity?page_size=1", None);
    assert_eq!(page.status, 200, "{}", page.body);
}

/// Every entry of the caller's tenant's activity log, newest first.
fn activity(solo: &Solo, who: &Credential) -> Vec<serde_json::Value> {
    let mut entries = Vec::new();
    let mut token = String::new();
    loop {
        let path = format!("/v1/activity?page_size=500&page_token={token}");
        let page = call(solo, who, "GET", &path, None);
        assert_eq!(page.status, 200, "{}", page.body);
        let page = page.json();
        entries.extend(page["entries"].as_array().unwrap().iter().cloned());
        match page["next_page_token"].as_str() {
            Some(next) if !next.is_empty() => token = next.to_owned(),
            _ => return entries,
        }
    }
}

/// The credential as the activity log names it: the user and how they signed in.
fn actor(solo: &Solo, who: &Credential) -> String {
    let me = call(solo, who, "GET", "/v1/me", None).json();
    format!(
        "{} ({})",
        me["email"].as_str().unwrap(),
        me["credential"]["description"].as_str().unwrap()
    )
}

/// An RPC's name as the activity log's action: `GetWorkload` is `get_workload`.
fn snake(rpc: &str) -> String {
    let mut word = String::new();
    for (i, c) in rpc.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            word.push('_');
        }
        word.push(c.to_ascii_lowercase());
    }
    word
}

#[test]
fn every_route_needs_a_credential_for_every_method() {
    let solo = Solo::start(&[]);
    let routes = Schema::load().unwrap().http_routes();
    let unknown = WorkloadId::new().to_string();
    let mut paths: Vec<String> = routes
        .iter()
        .map(|r| r.path.replace("{id}", &unknown))
        .collect();
    paths.dedup();
    for path in &paths {
        for method in ["GET", "POST", "PUT", "PATCH", "DELETE"] {
            let declared = routes
                .iter()
                .any(|r| r.method == method && r.path.replace("{id}", &unknown) == *path);
            let answer = call(&solo, &Credential::Nobody, method, path, None);
            let what = format!("{method} {path}: {} {}", answer.status, answer.body);
            // These take their credential in the body: a password, or a link's secret.
            let in_the_body = [
                "/v1/sessions",
                "/v1/invites/accept",
                "/v1/password-resets/accept",
            ];
            if declared && method == "POST" && in_the_body.contains(&path.as_str()) {
                assert_ne!(answer.status / 100, 2, "{what}");
            } else if declared {
                assert_eq!(answer.status, 401, "{what}");
                assert_eq!(answer.json()["error"]["code"], "unauthenticated", "{what}");
            } else {
                assert_eq!(answer.status, 405, "{what}");
            }
        }
    }
    let document = call(&solo, &Credential::Nobody, "GET", "/v1/openapi.json", None);
    assert_eq!(document.status, 200, "the OpenAPI document is public");
    assert_eq!(
        call(&solo, &Credential::Nobody, "GET", "/v1/nothing-here", None).status,
        404
    );
}
