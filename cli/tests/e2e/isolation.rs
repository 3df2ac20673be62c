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
    for route in Schema::load().unwrap().http_routes() {
        if route.path_variables().is_empty() {
            continue;
        }
        let theirs = route.path.replace("{id}", objects.for_path(&route.path));
        let unknown = route.path.replace("{id}", &WorkloadId::new().to_string());
        let body = (!route.body.is_empty()).then(|| json!({}));
        for who in [&b.session, &b.token] {
            let foreign = call(&solo, who, &route.method, &theirs, body.clone());
            let never = call(&solo, who, &route.method, &unknown, body.clone());
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
        "/v1/usage?from=2000-01-01T00:00:00Z&to=2100-01-01T00:00:00Z",
    ];
    let a_ids = [
        objects.workload.as_str(),
        objects.token.as_str(),
        objects.machine.as_str(),
        objects.enrolment_token.as_str(),
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
    assert_no_secret_logged(&solo, a.secrets.iter().chain(&b.secrets));
}

#[test]
fn every_route_but_login_needs_a_credential_for_every_method() {
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
            if declared && (method, path.as_str()) == ("POST", "/v1/sessions") {
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
