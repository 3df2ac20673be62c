//! Transcoding an HTTP request into its RPC's request message: path variables, query
//! parameters (fields neither the path nor the body binds; repeated fields by repetition) and
//! the JSON body. An empty body counts as `{}`.

use std::collections::HashSet;

use prost_reflect::{DynamicMessage, FieldDescriptor, Value};

use crate::json::{Invalid, Words, decode_field, decode_message, from_text};
use crate::routes::{Body, Route};

/// The request message of `route`. `path` holds the percent-decoded path variables.
pub(crate) fn request(
    route: &Route,
    words: &Words,
    path: &[(String, String)],
    query: Option<&str>,
    body: &[u8],
) -> Result<DynamicMessage, Invalid> {
    let mut message = match &route.body {
        Body::None if !body.is_empty() => {
            return Err(Invalid::new(
                "the body",
                "must be empty: this route takes none",
            ));
        }
        Body::None => DynamicMessage::new(route.input.clone()),
        Body::Whole if body.is_empty() => DynamicMessage::new(route.input.clone()),
        Body::Whole => decode_message(&route.input, &json(body)?, words, &route.path_names())?,
        Body::Field(field) => {
            let mut message = DynamicMessage::new(route.input.clone());
            if !body.is_empty() {
                message.set_field(field, decode_field(field, &json(body)?, words)?);
            }
            message
        }
    };
    for (name, text) in path {
        let at = || format!("path parameter `{name}`");
        let field = find(&route.path_fields, name).ok_or_else(|| Invalid::new(at(), "unknown"))?;
        let value = from_text(&field.kind(), text, words).map_err(|p| Invalid::new(at(), p))?;
        message.set_field(field, value);
    }
    let mut seen = HashSet::new();
    for (name, text) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        let at = || format!("query parameter `{name}`");
        let field = find(&route.query_fields, &name)
            .ok_or_else(|| Invalid::new(at(), "is not a parameter of this route"))?;
        let value = from_text(&field.kind(), &text, words).map_err(|p| Invalid::new(at(), p))?;
        if field.is_list() {
            if let Value::List(items) = message.get_field_mut(field) {
                items.push(value);
            }
        } else if seen.insert(field.name()) {
            message.set_field(field, value);
        } else {
            return Err(Invalid::new(at(), "is given more than once"));
        }
    }
    Ok(message)
}

fn find<'a>(fields: &'a [FieldDescriptor], name: &str) -> Option<&'a FieldDescriptor> {
    fields.iter().find(|f| f.name() == name)
}

fn json(body: &[u8]) -> Result<serde_json::Value, Invalid> {
    // The error's position is enough; its text could quote the body.
    serde_json::from_slice(body).map_err(|e| {
        let problem = format!("is not JSON (line {}, column {})", e.line(), e.column());
        Invalid::new("the body", problem)
    })
}

#[cfg(test)]
mod tests {
    use einsora_proto::schema::Schema;
    use einsora_proto::usage::v1::ListUsageRequest;
    use einsora_proto::workloads::v1::{GetWorkloadRequest, StartWorkloadRequest};
    use prost_reflect::DescriptorPool;

    use super::*;
    use crate::routes;

    fn bind(
        method: &str,
        path: &str,
        vars: &[(&str, &str)],
        query: &str,
        body: &str,
    ) -> Result<DynamicMessage, String> {
        let pool = DescriptorPool::decode(einsora_proto::FILE_DESCRIPTOR_SET).unwrap();
        let schema = Schema::load().unwrap();
        let routes = routes::load(&pool, &schema).unwrap();
        let route = routes
            .iter()
            .find(|r| r.method == method && r.path == path)
            .unwrap();
        let vars: Vec<_> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let query = (!query.is_empty()).then_some(query);
        request(
            route,
            &Words::from_schema(&schema),
            &vars,
            query,
            body.as_bytes(),
        )
        .map_err(|e| e.to_string())
    }

    #[test]
    fn path_and_query_fill_the_request() {
        let get = bind(
            "GET",
            "/v1/workloads/{id}",
            &[("id", "w 1/é")],
            "include_deleted=true",
            "",
        )
        .unwrap();
        let get: GetWorkloadRequest = get.transcode_to().unwrap();
        assert_eq!((get.id.as_str(), get.include_deleted), ("w 1/é", true));
        let query = "from=2025-01-01T00%3A00%3A00Z&to=2025-02-01T00:00:00%2B01:00&page_size=50&page_token=a+b";
        let usage: ListUsageRequest = bind("GET", "/v1/usage", &[], query, "")
            .unwrap()
            .transcode_to()
            .unwrap();
        assert_eq!(usage.from.unwrap().seconds, 1_735_689_600);
        assert_eq!(usage.to.unwrap().seconds, 1_738_364_400);
        assert_eq!((usage.page_size, usage.page_token.as_str()), (50, "a b"));
    }

    #[test]
    fn query_parameters_are_checked() {
        let cases = [
            (
                "include_deleted=yes",
                "query parameter `include_deleted`: must be true or false",
            ),
            (
                "id=x",
                "query parameter `id`: is not a parameter of this route",
            ),
            ("colour=red", "query parameter `colour`: is not a parameter"),
            (
                "include_deleted=true&include_deleted=false",
                "query parameter `include_deleted`: is given more than once",
            ),
        ];
        for (query, expected) in cases {
            let error = bind("GET", "/v1/workloads/{id}", &[("id", "w")], query, "").unwrap_err();
            assert!(error.starts_with(expected), "{query}: {error}");
        }
        let error = bind("GET", "/v1/usage", &[], "page_size=-1", "").unwrap_err();
        assert!(
            error.starts_with("query parameter `page_size`: must be an integer"),
            "{error}"
        );
    }

    #[test]
    fn bodies_an_empty_one_and_the_path_fields() {
        let start = "/v1/workloads/{id}/start";
        for body in ["", "{}"] {
            let message = bind("POST", start, &[("id", "w1")], "", body).unwrap();
            assert_eq!(
                message.transcode_to::<StartWorkloadRequest>().unwrap().id,
                "w1"
            );
        }
        // The path binds `id`: the body may not repeat it.
        let error = bind("POST", start, &[("id", "w1")], "", r#"{"id": "w2"}"#).unwrap_err();
        assert_eq!(error, "field `id`: is not a known field");
        let error = bind("POST", start, &[("id", "w1")], "", "{").unwrap_err();
        assert!(
            error.starts_with("the body: is not JSON (line 1, column 1)"),
            "{error}"
        );
        // A body-less route takes none, and a body route takes no query.
        let error = bind("DELETE", "/v1/workloads/{id}", &[("id", "w")], "", "{}").unwrap_err();
        assert!(error.starts_with("the body: must be empty"), "{error}");
        let error = bind("POST", start, &[("id", "w1")], "force=true", "").unwrap_err();
        assert!(error.starts_with("query parameter `force`"), "{error}");
    }
}
