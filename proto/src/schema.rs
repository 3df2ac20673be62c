//! Reading the contracts back out of [`crate::FILE_DESCRIPTOR_SET`]: the HTTP routes declared
//! with `google.api.http`, the JSON words of enums (`einsora.options.v1.word`), the fields
//! marked secret (`einsora.options.v1.secret`) and what request fields accept
//! (`einsora.options.v1.rules`). The gateway derives its JSON routes, OpenAPI and log
//! redaction from these, and tests pin them.
//!
//! prost-types' descriptor messages drop extension options, so this module decodes the set
//! through small mirrors of `descriptor.proto` that keep exactly the options Einsora uses.

mod raw;
mod rules;

use crate::google::api::{HttpRule, http_rule::Pattern};
pub use crate::options::v1::FieldRules;
pub use rules::UUID_PATTERN;

/// One HTTP binding of an RPC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRoute {
    /// `GET`, `POST`, `DELETE`, ... (upper case).
    pub method: String,
    /// The path template, e.g. `/v1/workloads/{id}`.
    pub path: String,
    /// The request field the body maps to: `*`, a field name, or empty for no body.
    pub body: String,
    /// The response field that is the body; empty for the whole response.
    pub response_body: String,
    /// The service's full name, e.g. `einsora.workloads.v1.WorkloadService`.
    pub service: String,
    /// The RPC's name, e.g. `CreateWorkload`.
    pub rpc: String,
    /// The request message's full name, without the leading dot.
    pub input_type: String,
    /// The response message's full name, without the leading dot.
    pub output_type: String,
    /// The RPC answers a stream of responses (the gateway's rule in docs/api.md: one JSON
    /// object unless the request `follow`s, then NDJSON).
    pub server_streaming: bool,
}

impl HttpRoute {
    /// The gRPC path of the RPC, e.g. `/einsora.workloads.v1.WorkloadService/CreateWorkload`.
    pub fn grpc_path(&self) -> String {
        format!("/{}/{}", self.service, self.rpc)
    }

    /// The `{variables}` of the path template, in order (`{name=pattern}` gives `name`).
    pub fn path_variables(&self) -> Vec<&str> {
        self.path
            .split('{')
            .skip(1)
            .filter_map(|rest| rest.split('}').next())
            .map(|var| var.split('=').next().unwrap_or(var))
            .collect()
    }
}

/// One value of an enum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnumValue {
    /// As in the .proto file, e.g. `WORKLOAD_STATE_RUNNING`.
    pub name: String,
    pub number: i32,
    /// Its JSON word (`running`); `None` only for the zero `*_UNSPECIFIED` value.
    pub word: Option<String>,
}

/// An enum and its values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnumType {
    /// Full name without the leading dot, e.g. `einsora.common.v1.WorkloadState`.
    pub full_name: String,
    pub values: Vec<EnumValue>,
}

impl EnumType {
    /// The word of the value called `name`.
    pub fn word_of(&self, name: &str) -> Option<&str> {
        self.values
            .iter()
            .find(|v| v.name == name)
            .and_then(|v| v.word.as_deref())
    }
}

/// A message and its field names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageType {
    /// Full name without the leading dot, e.g. `einsora.workloads.v1.Workload`.
    pub full_name: String,
    pub fields: Vec<String>,
}

/// The decoded descriptor set.
#[derive(Debug, Clone)]
pub struct Schema {
    files: Vec<raw::File>,
}

impl Schema {
    /// Decodes [`crate::FILE_DESCRIPTOR_SET`].
    pub fn load() -> Result<Schema, prost::DecodeError> {
        Schema::decode(crate::FILE_DESCRIPTOR_SET)
    }

    /// Decodes an encoded `FileDescriptorSet`.
    pub fn decode(bytes: &[u8]) -> Result<Schema, prost::DecodeError> {
        let set: raw::FileSet = prost::Message::decode(bytes)?;
        Ok(Schema { files: set.file })
    }

    /// Every HTTP binding of every RPC, additional bindings included, in file order.
    pub fn http_routes(&self) -> Vec<HttpRoute> {
        let mut routes = Vec::new();
        for file in &self.files {
            for service in &file.service {
                let service_name = qualify(file.package.as_deref(), service.name());
                for method in &service.method {
                    let Some(rule) = method.options.as_ref().and_then(|o| o.http.as_ref()) else {
                        continue;
                    };
                    let bindings = std::iter::once(rule).chain(&rule.additional_bindings);
                    for binding in bindings {
                        let Some((verb, path)) = verb_and_path(binding) else {
                            continue;
                        };
                        routes.push(HttpRoute {
                            method: verb,
                            path,
                            body: binding.body.clone(),
                            response_body: binding.response_body.clone(),
                            service: service_name.clone(),
                            rpc: method.name().to_owned(),
                            input_type: trim_dot(method.input_type.as_deref()),
                            output_type: trim_dot(method.output_type.as_deref()),
                            server_streaming: method.server_streaming(),
                        });
                    }
                }
            }
        }
        routes
    }

    /// Every enum, nested ones included.
    pub fn enums(&self) -> Vec<EnumType> {
        let mut out = Vec::new();
        for file in &self.files {
            let scope = file.package.clone().unwrap_or_default();
            collect_enums(&scope, &file.enum_type, &file.message_type, &mut out);
        }
        out
    }

    /// The enum called `full_name` (without the leading dot).
    pub fn enum_type(&self, full_name: &str) -> Option<EnumType> {
        self.enums().into_iter().find(|e| e.full_name == full_name)
    }

    /// Every message, nested ones included, with its field names.
    pub fn messages(&self) -> Vec<MessageType> {
        let mut out = Vec::new();
        for file in &self.files {
            let scope = file.package.clone().unwrap_or_default();
            collect_messages(&scope, &file.message_type, &mut out);
        }
        out
    }

    /// The message called `full_name` (without the leading dot).
    pub fn message(&self, full_name: &str) -> Option<MessageType> {
        self.messages()
            .into_iter()
            .find(|m| m.full_name == full_name)
    }

    /// Full names (`package.Message.field`) of every field marked `einsora.options.v1.secret`.
    pub fn secret_fields(&self) -> Vec<String> {
        self.fields()
            .into_iter()
            .filter(|(_, f)| f.options.as_ref().and_then(|o| o.secret) == Some(true))
            .map(|(name, _)| name)
            .collect()
    }

    /// Every field with `einsora.options.v1.rules`, by full name (`package.Message.field`).
    pub fn field_rules(&self) -> Vec<(String, FieldRules)> {
        self.fields()
            .into_iter()
            .filter_map(|(name, f)| Some((name, f.options.as_ref()?.rules.clone()?)))
            .collect()
    }

    /// Every field of every message, nested ones included, with its full name.
    fn fields(&self) -> Vec<(String, &raw::Field)> {
        let mut out = Vec::new();
        for file in &self.files {
            let scope = file.package.clone().unwrap_or_default();
            collect_fields(&scope, &file.message_type, &mut out);
        }
        out
    }
}

fn verb_and_path(rule: &HttpRule) -> Option<(String, String)> {
    Some(match rule.pattern.as_ref()? {
        Pattern::Get(p) => ("GET".to_owned(), p.clone()),
        Pattern::Put(p) => ("PUT".to_owned(), p.clone()),
        Pattern::Post(p) => ("POST".to_owned(), p.clone()),
        Pattern::Delete(p) => ("DELETE".to_owned(), p.clone()),
        Pattern::Patch(p) => ("PATCH".to_owned(), p.clone()),
        Pattern::Custom(c) => (c.kind.to_ascii_uppercase(), c.path.clone()),
    })
}

fn qualify(scope: Option<&str>, name: &str) -> String {
    match scope {
        Some(scope) if !scope.is_empty() => format!("{scope}.{name}"),
        _ => name.to_owned(),
    }
}

fn trim_dot(name: Option<&str>) -> String {
    name.unwrap_or_default().trim_start_matches('.').to_owned()
}

fn collect_enums(
    scope: &str,
    enums: &[raw::Enum],
    messages: &[raw::Message],
    out: &mut Vec<EnumType>,
) {
    for e in enums {
        out.push(EnumType {
            full_name: qualify(Some(scope), e.name()),
            values: e
                .value
                .iter()
                .map(|v| EnumValue {
                    name: v.name().to_owned(),
                    number: v.number.unwrap_or_default(),
                    word: v.options.as_ref().and_then(|o| o.word.clone()),
                })
                .collect(),
        });
    }
    for m in messages {
        let scope = qualify(Some(scope), m.name());
        collect_enums(&scope, &m.enum_type, &m.nested_type, out);
    }
}

fn collect_messages(scope: &str, messages: &[raw::Message], out: &mut Vec<MessageType>) {
    for m in messages {
        let full_name = qualify(Some(scope), m.name());
        out.push(MessageType {
            full_name: full_name.clone(),
            fields: m.field.iter().map(|f| f.name().to_owned()).collect(),
        });
        collect_messages(&full_name, &m.nested_type, out);
    }
}

fn collect_fields<'a>(
    scope: &str,
    messages: &'a [raw::Message],
    out: &mut Vec<(String, &'a raw::Field)>,
) {
    for m in messages {
        let full_name = qualify(Some(scope), m.name());
        for f in &m.field {
            out.push((format!("{full_name}.{}", f.name()), f));
        }
        collect_fields(&full_name, &m.nested_type, out);
    }
}
