//! `GET /v1/openapi.json`: an OpenAPI 3.0 document generated from the same route table and
//! descriptors the gateway serves from, so it can't drift from what the gateway accepts and
//! emits. Generated once at start-up; a type it can't describe is a start-up error.

mod rules;
mod schema;

use einsora_proto::schema::Schema;
use serde_json::{Map, Value as Json, json};

use crate::app::OPENAPI_PATH;
use einsora_runtime::error_code::ErrorCode;

use crate::errors::codes;
use crate::json::Words;
use crate::routes::{Body, LOGIN, LOGOUT, Route};
use schema::{Direction, Schemas};

/// The error statuses every operation may answer, with the component describing each.
const ERRORS: [(&str, &str); 8] = [
    ("400", "invalid_request: the request doesn't fit the API"),
    ("401", "unauthenticated: no valid session or token"),
    (
        "403",
        "forbidden: not allowed (including cross-origin writes)",
    ),
    ("404", "not_found: no such object, or another tenant's"),
    (
        "409",
        "conflict (an Idempotency-Key used for another request, or one still in progress, \
         which comes with Retry-After), quota_exceeded or invalid_transition",
    ),
    ("429", "rate_limited: try again after Retry-After seconds"),
    (
        "500",
        "internal: the request ID identifies the error in the operator's log",
    ),
    ("503", "unavailable: try again after Retry-After seconds"),
];

pub(crate) fn document(routes: &[Route], words: &Words, schema: &Schema) -> Result<Json, String> {
    let mut schemas = Schemas::new(words, schema);
    let mut paths = Map::new();
    for route in routes {
        let operation = operation(route, &mut schemas)
            .map_err(|e| format!("{} {}: {e}", route.method, route.path))?;
        let item = paths.entry(route.path.clone()).or_insert_with(|| json!({}));
        item[route.method.as_str().to_ascii_lowercase()] = operation;
    }
    paths.insert(
        OPENAPI_PATH.to_owned(),
        json!({ "get": {
            "operationId": "GetOpenApi",
            "tags": ["OpenApi"],
            "summary": "This document.",
            "security": [],
            "responses": { "200": {
                "description": "The OpenAPI document.",
                "headers": { "X-Request-ID": { "$ref": "#/components/headers/X-Request-ID" } },
                "content": { "application/json": { "schema": { "type": "object" } } },
            } },
        } }),
    );
    let mut components = schemas.into_components();
    components.insert("Error".to_owned(), error_schema());
    Ok(json!({
        "openapi": "3.0.3",
        "info": {
            "title": "Einsora API",
            "version": "v1",
            "description": "Generated from Einsora's protos. JSON with proto field names; enums \
                as lowercase words; times RFC 3339; 64-bit integers as strings (numbers accepted). \
                Unknown fields are rejected, and so is null: leave a field out instead.",
        },
        "paths": paths,
        "components": {
            "schemas": components,
            "responses": error_responses(),
            "headers": headers(),
            "securitySchemes": {
                "session": { "type": "apiKey", "in": "cookie", "name": "einsora_session" },
                "csrf": { "type": "apiKey", "in": "header", "name": "X-CSRF-Token",
                    "description": "The session's CSRF token, on every state-changing request." },
                "bearer": { "type": "http", "scheme": "bearer",
                    "description": "An API token, tsk_…" },
            },
        },
    }))
}

fn operation(route: &Route, schemas: &mut Schemas<'_>) -> Result<Json, String> {
    let mut parameters = Vec::new();
    for (fields, place) in [(&route.path_fields, "path"), (&route.query_fields, "query")] {
        for field in fields {
            let mut parameter = json!({
                "name": field.name(),
                "in": place,
                "required": place == "path" || schemas.required(field),
                "schema": schemas.field(field, Direction::Text)?,
            });
            if field.is_list() {
                parameter["style"] = json!("form");
                parameter["explode"] = json!(true);
            }
            parameters.push(parameter);
        }
    }
    if route.takes_idempotency_key() {
        parameters.push(idempotency_key(route));
    }
    let service = route.grpc_path.as_str().trim_start_matches('/');
    let service = service.split('/').next().unwrap_or_default();
    let tag = service.rsplit('.').next().unwrap_or(service);
    let mut operation = json!({
        "operationId": route.rpc,
        "tags": [tag],
        "parameters": parameters,
        "responses": responses(route, schemas)?,
        "security": security(route),
    });
    let body = match &route.body {
        Body::None => None,
        Body::Whole => {
            let schema = schemas.object(&route.input, Direction::Input, &route.path_names())?;
            Some((schema.get("required").is_some(), schema))
        }
        Body::Field(field) => Some((
            schemas.required(field),
            schemas.field(field, Direction::Input)?,
        )),
    };
    if let Some((required, schema)) = body {
        // An empty body is `{}`, so it may be left out unless a field is required.
        operation["requestBody"] = json!({
            "description": "JSON; an empty body counts as {}.",
            "required": required,
            "content": { "application/json": { "schema": schema } },
        });
    }
    Ok(operation)
}

fn responses(route: &Route, schemas: &mut Schemas<'_>) -> Result<Json, String> {
    let schema = match &route.response_field {
        Some(field) => schemas.field(field, Direction::Output)?,
        None => schemas.reference(&route.output, Direction::Output)?,
    };
    let mut headers = json!({ "X-Request-ID": { "$ref": "#/components/headers/X-Request-ID" } });
    if route.is(LOGIN) || route.is(LOGOUT) {
        headers["Set-Cookie"] = json!({
            "description": "Login sets the HttpOnly session cookie and `einsora_client`, the \
                proof of this sign-in that gives the next one login limits of its own (send it \
                back to POST /v1/sessions); logout clears the session cookie.",
            "required": true,
            "schema": { "type": "string" },
        });
    }
    if route.takes_idempotency_key() {
        headers["Idempotent-Replayed"] = json!({
            "description": "`true` on the first answer sent again for a repeated \
                Idempotency-Key.",
            "required": false,
            "schema": { "type": "string", "enum": ["true"] },
        });
    }
    let mut content = json!({ "application/json": { "schema": schema } });
    let mut description = match route.success.as_u16() {
        202 => "Accepted: the current state.",
        _ => "OK",
    }
    .to_owned();
    if route.streaming {
        // Each line one such object, as the api sends them; an error after the first line
        // comes as a last line in the error envelope.
        content["application/x-ndjson"] = json!({ "schema": schema });
        description.push_str(
            ". With `follow`, NDJSON: one object per line as they come, until the stream ends; \
             an error after the first line is a last line holding the error envelope.",
        );
    }
    let mut responses = Map::new();
    responses.insert(
        route.success.as_u16().to_string(),
        json!({
            "description": description,
            "headers": headers,
            "content": content,
        }),
    );
    for (status, _) in ERRORS {
        let reference = format!("#/components/responses/{status}");
        responses.insert(status.to_owned(), json!({ "$ref": reference }));
    }
    Ok(Json::Object(responses))
}

/// The `Idempotency-Key` header of a POST by a signed-in caller (docs/api.md).
fn idempotency_key(route: &Route) -> Json {
    let mut description = "Makes retrying this request safe: for 24 hours the same key, from \
        the same user, with the same method, path and body, gets the first answer again \
        (with `Idempotent-Replayed: true`) and nothing is done twice; the same key with another \
        request is a 409 conflict, and so is a repeat while the first is still in progress \
        (with Retry-After). Only successes are kept: after a refusal or a failure the key is \
        free for a retry."
        .to_owned();
    if route.answer_carries_secret {
        description.push_str(
            " This answer carries a secret, which is never kept: a repeat is a 409 conflict \
             saying the request was done.",
        );
    }
    json!({
        "name": "Idempotency-Key",
        "in": "header",
        "required": false,
        "description": description,
        "schema": {
            "type": "string",
            "minLength": 1,
            "maxLength": 255,
            "pattern": "^[!-~]([ -~]*[!-~])?$",
        },
    })
}

/// Reads need a session or a token; writes by a session also need its CSRF header.
fn security(route: &Route) -> Json {
    if route.is(LOGIN) {
        json!([])
    } else if route.method == "GET" {
        json!([{ "session": [] }, { "bearer": [] }])
    } else {
        json!([{ "session": [], "csrf": [] }, { "bearer": [] }])
    }
}

fn error_schema() -> Json {
    json!({
        "type": "object",
        "required": ["error"],
        "properties": { "error": {
            "type": "object",
            "required": ["code", "message", "request_id"],
            "properties": {
                "code": { "type": "string", "enum": codes().map(ErrorCode::as_str).collect::<Vec<_>>() },
                "message": { "type": "string" },
                "request_id": { "type": "string" },
            },
        } },
    })
}

fn error_responses() -> Json {
    let mut responses = Map::new();
    for (status, description) in ERRORS {
        let mut headers =
            json!({ "X-Request-ID": { "$ref": "#/components/headers/X-Request-ID" } });
        if status == "429" || status == "503" {
            headers["Retry-After"] = json!({ "$ref": "#/components/headers/Retry-After" });
        }
        responses.insert(
            status.to_owned(),
            json!({
                "description": description,
                "headers": headers,
                "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } },
            }),
        );
    }
    Json::Object(responses)
}

fn headers() -> Json {
    json!({
        "X-Request-ID": {
            "description": "The ID the gateway gave this request (a UUIDv7); quote it when reporting a problem.",
            "required": true,
            "schema": { "type": "string", "format": "uuid" },
        },
        "Retry-After": {
            "description": "Seconds to wait before trying again.",
            "required": true,
            "schema": { "type": "integer", "minimum": 1 },
        },
    })
}

#[cfg(test)]
mod tests;
