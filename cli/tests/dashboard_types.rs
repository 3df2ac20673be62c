//! The dashboard's payload types (web/api-types.d.ts) are generated from the committed OpenAPI
//! document (docs/openapi.json, itself held to what the gateway serves), so `tsc --checkJs`
//! checks every field a page reads against the API. A document that changed without the types
//! fails here; to update them, run
//! `EINSORA_UPDATE_DASHBOARD_TYPES=1 cargo test -p einsora --test dashboard_types` and commit.

// A test harness: a failed unwrap is a failed test; the update switch is the test's own.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::fmt::Write;

use serde_json::Value;

const DOCUMENT: &str = include_str!("../../docs/openapi.json");
const TYPES: &str = "web/api-types.d.ts";
const METHODS: [(&str, &str); 5] = [
    ("get", "Get"),
    ("post", "Post"),
    ("patch", "Patch"),
    ("put", "Put"),
    ("delete", "Delete"),
];

/// The methods whose requests carry a JSON body.
fn takes_a_body(method: &str) -> bool {
    matches!(method, "post" | "patch" | "put")
}

/// `einsora.workloads.v1.Workload` → `Workload`; `…EndpointParams-input` → `EndpointParamsInput`.
/// The error envelope is `ErrorEnvelope`: `Error` is JavaScript's own.
fn type_name(schema: &str) -> String {
    let last = schema.rsplit('.').next().unwrap();
    if last == "Error" {
        return "ErrorEnvelope".into();
    }
    match last.strip_suffix("-input") {
        Some(base) => format!("{base}Input"),
        None => last.to_owned(),
    }
}

/// The TypeScript for a schema, indented for nesting at `depth`.
fn ts(schema: &Value, depth: usize) -> String {
    if let Some(target) = schema["$ref"].as_str() {
        return type_name(target.trim_start_matches("#/components/schemas/"));
    }
    if let Some(values) = schema["enum"].as_array() {
        let words: Vec<String> = values.iter().map(Value::to_string).collect();
        return words.join(" | ");
    }
    match schema["type"].as_str() {
        Some("string") => "string".into(),
        Some("integer" | "number") => "number".into(),
        Some("boolean") => "boolean".into(),
        Some("array") => {
            let item = ts(&schema["items"], depth);
            if item.contains(' ') {
                format!("Array<{item}>")
            } else {
                format!("{item}[]")
            }
        }
        Some("object") => object(schema, depth),
        _ => "unknown".into(),
    }
}

fn object(schema: &Value, depth: usize) -> String {
    let empty = serde_json::Map::new();
    let properties = schema["properties"].as_object().unwrap_or(&empty);
    let extra = &schema["additionalProperties"];
    if properties.is_empty() {
        return match extra {
            Value::Object(_) => format!("Record<string, {}>", ts(extra, depth)),
            Value::Bool(false) => "Record<string, never>".into(),
            _ => "Record<string, unknown>".into(),
        };
    }
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let pad = "  ".repeat(depth + 1);
    let mut out = String::from("{\n");
    for (name, property) in properties {
        if let Some(text) = property["description"].as_str() {
            writeln!(out, "{pad}/** {} */", text.replace("*/", "* /")).unwrap();
        }
        let optional = if required.contains(&name.as_str()) {
            ""
        } else {
            "?"
        };
        writeln!(out, "{pad}{name}{optional}: {};", ts(property, depth + 1)).unwrap();
    }
    if let Value::Object(_) = extra {
        writeln!(out, "{pad}[key: string]: {};", ts(extra, depth + 1)).unwrap();
    }
    write!(out, "{}}}", "  ".repeat(depth)).unwrap();
    out
}

/// The schema of an operation's success answer.
fn answer(operation: &Value) -> &Value {
    let responses = operation["responses"].as_object().unwrap();
    let (_, ok) = responses
        .iter()
        .find(|(code, _)| code.starts_with('2'))
        .unwrap();
    &ok["content"]["application/json"]["schema"]
}

fn generate(document: &Value) -> String {
    let mut out = String::from(
        "// Generated from docs/openapi.json by cli/tests/dashboard_types.rs: do not edit. To update,\n\
         // run EINSORA_UPDATE_DASHBOARD_TYPES=1 cargo test -p einsora --test dashboard_types\n",
    );
    let schemas = document["components"]["schemas"].as_object().unwrap();
    let mut named = BTreeMap::new();
    for (full, schema) in schemas {
        let name = type_name(full);
        assert!(
            named.insert(name.clone(), full).is_none(),
            "two schemas are both {name}: give the generator a longer name"
        );
        if let Some(text) = schema["description"].as_str() {
            write!(out, "\n/** {} */", text.replace("*/", "* /")).unwrap();
        }
        let body = ts(schema, 0);
        if body.starts_with('{') {
            write!(out, "\nexport interface {name} {body}\n").unwrap();
        } else {
            write!(out, "\nexport type {name} = {body};\n").unwrap();
        }
    }
    let paths = document["paths"].as_object().unwrap();
    for (method, interface) in METHODS {
        write!(
            out,
            "\n/** What each route answers to {}{} */\nexport interface {interface} {{\n",
            method.to_uppercase(),
            if takes_a_body(method) {
                ": the body it takes, and its answer."
            } else {
                "."
            }
        )
        .unwrap();
        for (route, operations) in paths {
            let Some(operation) = operations.get(method) else {
                continue;
            };
            let answer = ts(answer(operation), 1);
            if takes_a_body(method) {
                let body = &operation["requestBody"]["content"]["application/json"]["schema"];
                let body = ts(body, 2);
                writeln!(
                    out,
                    "  '{route}': {{\n    body: {body};\n    answer: {answer};\n  }};"
                )
                .unwrap();
            } else {
                writeln!(out, "  '{route}': {answer};").unwrap();
            }
        }
        out.push_str("}\n");
    }
    out
}

#[test]
fn the_dashboards_types_are_the_documents() {
    let document: Value = serde_json::from_str(DOCUMENT).unwrap();
    let generated = generate(&document);
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(TYPES);
    if std::env::var_os("EINSORA_UPDATE_DASHBOARD_TYPES").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{TYPES} isn't what docs/openapi.json says: run \
         EINSORA_UPDATE_DASHBOARD_TYPES=1 cargo test -p einsora --test dashboard_types, and commit it"
    );
}

/// The generator's own rules, on a document small enough to read.
#[test]
fn schemas_become_typescript() {
    let document = serde_json::json!({
        "components": {"schemas": {
            "einsora.x.v1.Thing": {
                "type": "object",
                "required": ["id", "state"],
                "properties": {
                    "id": {"type": "string"},
                    "state": {"type": "string", "enum": ["on", "off"]},
                    "count": {"type": "integer"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "parts": {"type": "array", "items": {"$ref": "#/components/schemas/einsora.x.v1.Part-input"}},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}}
                }
            },
            "einsora.x.v1.Part-input": {"type": "object", "additionalProperties": false, "properties": {}}
        }},
        "paths": {"/v1/things/{id}": {
            "get": {"responses": {"200": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/einsora.x.v1.Thing"}}}}}},
            "post": {
                "requestBody": {"content": {"application/json": {"schema": {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}}}},
                "responses": {"202": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/einsora.x.v1.Thing"}}}}}
            }
        }}
    });
    let out = generate(&document);
    for want in [
        "export interface Thing {\n  count?: number;\n  id: string;\n",
        "  labels?: Record<string, string>;\n",
        "  parts?: PartInput[];\n  state: \"on\" | \"off\";\n  tags?: string[];\n}",
        "export type PartInput = Record<string, never>;",
        "export interface Get {\n  '/v1/things/{id}': Thing;\n}",
        "  '/v1/things/{id}': {\n    body: {\n      n: number;\n    };\n    answer: Thing;\n  };",
        "export interface Delete {\n}",
    ] {
        assert!(out.contains(want), "{want:?} not in:\n{out}");
    }
}
