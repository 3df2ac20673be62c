//! The generated document says what the gateway does; the router side is in `app::tests`.

use einsora_proto::schema::UUID_PATTERN;
use serde_json::{Value as Json, json};

use crate::app::Api;

fn document() -> Json {
    Api::load().unwrap().openapi
}

fn component<'a>(document: &'a Json, reference: &Json) -> &'a Json {
    let name = reference["$ref"]
        .as_str()
        .unwrap()
        .trim_start_matches("#/components/schemas/");
    &document["components"]["schemas"][name]
}

fn collect_refs(value: &Json, out: &mut Vec<String>) {
    match value {
        Json::Object(map) => {
            if let Some(Json::String(r)) = map.get("$ref") {
                out.push(r.clone());
            }
            map.values().for_each(|v| collect_refs(v, out));
        }
        Json::Array(items) => items.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}

#[test]
fn every_reference_resolves_and_every_operation_answers_the_error_envelope() {
    let document = document();
    assert_eq!(document["openapi"], "3.0.3");
    let mut refs = Vec::new();
    collect_refs(&document, &mut refs);
    for reference in refs {
        let pointer = reference.trim_start_matches('#');
        assert!(
            document.pointer(pointer).is_some_and(|v| !v.is_null()),
            "{reference} dangles"
        );
    }
    for (path, item) in document["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            let responses = operation["responses"].as_object().unwrap();
            let success = responses
                .keys()
                .find(|s| s.starts_with('2'))
                .expect("a success");
            let headers = &responses[success]["headers"];
            assert!(headers.get("X-Request-ID").is_some(), "{method} {path}");
            if path != "/v1/openapi.json" {
                for status in ["400", "401", "403", "404", "409", "429", "500", "503"] {
                    assert!(
                        responses.contains_key(status),
                        "{method} {path} lacks {status}"
                    );
                }
            }
        }
    }
    let error = &document["components"]["schemas"]["Error"]["properties"]["error"];
    assert_eq!(error["required"], json!(["code", "message", "request_id"]));
    let schemes = document["components"]["securitySchemes"]
        .as_object()
        .unwrap();
    assert_eq!(
        schemes["session"],
        json!({ "type": "apiKey", "in": "cookie", "name": "einsora_session" })
    );
    assert_eq!(schemes["csrf"]["name"], "X-CSRF-Token");
    assert_eq!(schemes["bearer"]["scheme"], "bearer");
}

#[test]
fn the_create_body_is_closed_with_words_and_one_params_member() {
    let document = document();
    let create = &document["paths"]["/v1/workloads"]["post"];
    assert!(create["responses"].get("202").is_some());
    assert_eq!(
        create["security"],
        json!([{ "session": [], "csrf": [] }, { "bearer": [] }])
    );
    assert_eq!(create["requestBody"]["required"], true);
    let body = &create["requestBody"]["content"]["application/json"]["schema"];
    assert_eq!(body["additionalProperties"], false);
    assert_eq!(
        body["properties"]["kind"],
        json!({ "type": "string", "enum": ["vm", "notebook", "endpoint"] })
    );
    assert_eq!(
        body["required"],
        json!(["kind", "name", "gpu_class", "image"])
    );
    let pairs = body["not"]["anyOf"].as_array().unwrap();
    assert!(pairs.contains(&json!({ "required": ["notebook", "vm"] })));
    assert_eq!(pairs.len(), 3);
    let vm = component(&document, &body["properties"]["vm"]);
    assert_eq!(vm["additionalProperties"], false);
    assert_eq!(
        vm["properties"]["disk_gib"],
        json!({ "type": "integer", "minimum": 1, "maximum": 65_536 })
    );

    let start = &document["paths"]["/v1/workloads/{id}/start"]["post"];
    assert_eq!(start["requestBody"]["required"], false, "{{}} will do");
    let body = &start["requestBody"]["content"]["application/json"]["schema"];
    assert_eq!(
        body["properties"],
        json!({}),
        "the path's id is not in the body"
    );
    assert_eq!(
        start["parameters"][0],
        json!({ "name": "id", "in": "path", "required": true, "schema": {
            "type": "string", "format": "uuid", "pattern": UUID_PATTERN, "minLength": 1,
        } })
    );
}

#[test]
fn request_fields_carry_the_api_s_rules_and_responses_none() {
    let document = document();
    let create = &document["paths"]["/v1/workloads"]["post"];
    let body = &create["requestBody"]["content"]["application/json"]["schema"];
    let name = &body["properties"]["name"];
    assert_eq!(name["pattern"], "^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$");
    assert_eq!(name["minLength"], 1);
    let fallback = &body["properties"]["fallback"];
    assert_eq!(fallback["maxItems"], 8);
    assert_eq!(fallback["uniqueItems"], true);
    assert!(fallback["items"]["pattern"].is_string());
    assert_eq!(body["properties"]["fallback_after_s"]["maximum"], 604_800);
    let endpoint = component(&document, &body["properties"]["endpoint"]);
    assert_eq!(endpoint["required"], json!(["model"]));
    assert_eq!(endpoint["properties"]["model"]["maxLength"], 256);

    let workload = &document["components"]["schemas"]["einsora.workloads.v1.Workload"];
    assert_eq!(workload["properties"]["name"], json!({ "type": "string" }));

    let usage = &document["paths"]["/v1/usage"]["get"]["parameters"];
    let required: Vec<(&str, bool)> = usage
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["name"].as_str().unwrap(), p["required"] == true))
        .collect();
    assert_eq!(
        required,
        [
            ("from", true),
            ("to", true),
            ("page_size", false),
            ("page_token", false),
            ("tokens", false)
        ]
    );

    let password = &document["paths"]["/v1/me/password"]["post"]["requestBody"];
    let new = &password["content"]["application/json"]["schema"]["properties"]["new_password"];
    assert_eq!(
        new,
        &json!({ "type": "string", "format": "password", "minLength": 12, "maxLength": 1024 })
    );
}

#[test]
fn the_workload_says_what_is_always_there_and_how_it_is_spelled() {
    let document = document();
    let get = &document["paths"]["/v1/workloads/{id}"]["get"];
    assert_eq!(
        get["parameters"][1],
        json!({ "name": "include_deleted", "in": "query", "required": false, "schema": { "type": "boolean" } })
    );
    assert_eq!(
        get["security"],
        json!([{ "session": [] }, { "bearer": [] }])
    );
    let workload = component(
        &document,
        &get["responses"]["200"]["content"]["application/json"]["schema"],
    );
    let properties = &workload["properties"];
    assert_eq!(
        properties["version"],
        json!({ "type": "string", "pattern": "^-?[0-9]+$" })
    );
    assert_eq!(
        properties["created_at"],
        json!({ "type": "string", "format": "date-time" })
    );
    assert_eq!(properties["state"]["enum"][3], "running");
    let required: Vec<&str> = workload["required"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Json::as_str)
        .collect();
    for always in ["id", "name", "attempt", "fallback", "version"] {
        assert!(required.contains(&always), "{always}");
    }
    for sometimes in [
        "kind",
        "state",
        "created_at",
        "notebook",
        "fallback_after_s",
    ] {
        assert!(!required.contains(&sometimes), "{sometimes}");
    }
    let usage = &document["paths"]["/v1/usage"]["get"]["parameters"];
    assert_eq!(
        usage[0]["schema"],
        json!({ "type": "string", "format": "date-time" })
    );
}

#[test]
fn login_answers_the_session_and_sets_the_cookie() {
    let document = document();
    let login = &document["paths"]["/v1/sessions"]["post"];
    assert_eq!(login["security"], json!([]));
    let ok = &login["responses"]["200"];
    assert!(ok["headers"].get("Set-Cookie").is_some());
    let schema = &ok["content"]["application/json"]["schema"];
    assert_eq!(
        schema["$ref"],
        "#/components/schemas/einsora.accounts.v1.Session"
    );
    assert!(
        !document["components"]["schemas"]["einsora.accounts.v1.Session"]["properties"]
            .to_string()
            .contains("session_id")
    );
    let body = &login["requestBody"]["content"]["application/json"]["schema"];
    assert_eq!(
        body["properties"]["password"],
        json!({ "type": "string", "format": "password", "minLength": 1 })
    );
    assert!(
        document["paths"]["/v1/sessions/current"]["delete"]["responses"]["200"]["headers"]
            .get("Set-Cookie")
            .is_some()
    );
}

/// The public contract is committed as docs/openapi.json and can't drift from the document
/// the gateway serves. After a change to the API, regenerate it with
/// `EINSORA_UPDATE_OPENAPI=1 cargo test -p einsora-gateway the_committed_document` and commit it.
#[test]
#[allow(clippy::disallowed_methods)] // the test's own switch
fn the_committed_document_is_the_one_served() {
    let served = serde_json::to_string_pretty(&document()).unwrap() + "\n";
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/openapi.json");
    if std::env::var_os("EINSORA_UPDATE_OPENAPI").is_some() {
        std::fs::write(path, &served).unwrap();
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        committed == served,
        "docs/openapi.json isn't the document the gateway serves: run \
         EINSORA_UPDATE_OPENAPI=1 cargo test -p einsora-gateway the_committed_document, and commit it"
    );
}
