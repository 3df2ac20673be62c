//! JSON Schemas of messages and fields, in three forms: what the gateway emits (`Output`),
//! what it accepts in a body (`Input`: closed objects, 64-bit integers as numbers or strings,
//! and the api's field rules), and what it accepts as path or query text (`Text`).

use std::collections::{BTreeMap, HashMap, HashSet};

use einsora_proto::schema::{FieldRules, Schema};
use prost_reflect::{FieldDescriptor, Kind, MessageDescriptor};
use serde_json::{Value as Json, json};

use super::rules;
use crate::json::{TIMESTAMP, Words, always_emitted};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    Input,
    Output,
    Text,
}

pub(crate) struct Schemas<'a> {
    words: &'a Words,
    secrets: HashSet<String>,
    /// `einsora.options.v1.rules` by field full name.
    rules: HashMap<String, FieldRules>,
    components: BTreeMap<String, Json>,
}

impl<'a> Schemas<'a> {
    pub(crate) fn new(words: &'a Words, schema: &Schema) -> Self {
        Schemas {
            words,
            secrets: schema.secret_fields().into_iter().collect(),
            rules: schema.field_rules().into_iter().collect(),
            components: BTreeMap::new(),
        }
    }

    /// Whether the api refuses a request without `field`.
    pub(crate) fn required(&self, field: &FieldDescriptor) -> bool {
        self.rules
            .get(field.full_name())
            .is_some_and(|r| r.required)
    }

    pub(crate) fn into_components(self) -> BTreeMap<String, Json> {
        self.components
    }

    /// A `$ref` to the message's component, which is added (with what it refers to) if new.
    pub(crate) fn reference(
        &mut self,
        desc: &MessageDescriptor,
        direction: Direction,
    ) -> Result<Json, String> {
        let name = match direction {
            Direction::Output => desc.full_name().to_owned(),
            Direction::Input | Direction::Text => format!("{}-input", desc.full_name()),
        };
        if !self.components.contains_key(&name) {
            // A placeholder first, so a message that contains itself ends.
            self.components.insert(name.clone(), Json::Null);
            let schema = self.object(desc, direction, &[])?;
            self.components.insert(name.clone(), schema);
        }
        Ok(json!({ "$ref": format!("#/components/schemas/{name}") }))
    }

    /// The object schema of a message, without the top-level fields in `excluded`.
    pub(crate) fn object(
        &mut self,
        desc: &MessageDescriptor,
        direction: Direction,
        excluded: &[&str],
    ) -> Result<Json, String> {
        let mut properties = serde_json::Map::new();
        let mut required = Vec::new();
        for field in desc.fields().filter(|f| !excluded.contains(&f.name())) {
            properties.insert(field.name().to_owned(), self.field(&field, direction)?);
            let present = match direction {
                Direction::Output => always_emitted(&field),
                Direction::Input | Direction::Text => self.required(&field),
            };
            if present {
                required.push(field.name().to_owned());
            }
        }
        let mut schema = json!({ "type": "object", "properties": properties });
        if !required.is_empty() {
            schema["required"] = json!(required);
        }
        if direction == Direction::Output {
            return Ok(schema);
        }
        schema["additionalProperties"] = json!(false);
        let mut pairs = Vec::new();
        for oneof in desc.oneofs().filter(|o| !o.is_synthetic()) {
            let names: Vec<String> = oneof.fields().map(|f| f.name().to_owned()).collect();
            for (i, a) in names.iter().enumerate() {
                pairs.extend(names[i + 1..].iter().map(|b| json!({ "required": [a, b] })));
            }
        }
        if !pairs.is_empty() {
            // Oneof members are optional properties, of which at most one may be given.
            schema["not"] = json!({ "anyOf": pairs });
        }
        Ok(schema)
    }

    /// The schema of a field's value: repeated fields are arrays, maps objects.
    pub(crate) fn field(
        &mut self,
        field: &FieldDescriptor,
        direction: Direction,
    ) -> Result<Json, String> {
        let kind = field.kind();
        let rules = match direction {
            Direction::Output => None,
            Direction::Input | Direction::Text => self.rules.get(field.full_name()).cloned(),
        };
        if field.is_map() {
            if rules.is_some() {
                return Err(format!("{}: a map can't have rules", field.full_name()));
            }
            let entry = kind.as_message().ok_or("a map without an entry type")?;
            let value = self.single(&entry.map_entry_value_field().kind(), direction)?;
            return Ok(json!({ "type": "object", "additionalProperties": value }));
        }
        let mut value = self.single(&kind, direction)?;
        if self.secrets.contains(field.full_name()) {
            value["format"] = json!("password");
        }
        rules::apply(&rules.unwrap_or_default(), value, &kind, field.is_list())
            .map_err(|e| format!("{}: {e}", field.full_name()))
    }

    fn single(&mut self, kind: &Kind, direction: Direction) -> Result<Json, String> {
        let integer = |format: Option<&str>, min: i128, max: i128| {
            let mut schema = json!({ "type": "integer", "minimum": min, "maximum": max });
            if let Some(format) = format {
                schema["format"] = json!(format);
            }
            schema
        };
        let wide = |min: i128, max: i128, pattern: &str| match direction {
            Direction::Output => json!({ "type": "string", "pattern": pattern }),
            Direction::Text => integer(Some("int64"), min, max),
            Direction::Input => json!({ "oneOf": [
                integer(Some("int64"), min, max),
                { "type": "string", "pattern": pattern },
            ] }),
        };
        Ok(match kind {
            Kind::Bool => json!({ "type": "boolean" }),
            Kind::String => json!({ "type": "string" }),
            Kind::Double => json!({ "type": "number", "format": "double" }),
            Kind::Float => json!({ "type": "number", "format": "float",
                "minimum": -f64::from(f32::MAX), "maximum": f64::from(f32::MAX) }),
            Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => {
                integer(Some("int32"), i32::MIN.into(), i32::MAX.into())
            }
            Kind::Uint32 | Kind::Fixed32 => integer(None, 0, u32::MAX.into()),
            Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => {
                wide(i64::MIN.into(), i64::MAX.into(), "^-?[0-9]+$")
            }
            Kind::Uint64 | Kind::Fixed64 => wide(0, u64::MAX.into(), "^[0-9]+$"),
            Kind::Enum(e) => {
                let words = self.words.all(e);
                if words.is_empty() {
                    return Err(format!("the enum {} has no words", e.full_name()));
                }
                json!({ "type": "string", "enum": words })
            }
            Kind::Message(m) if m.full_name() == TIMESTAMP => {
                json!({ "type": "string", "format": "date-time" })
            }
            Kind::Message(m) if m.full_name().starts_with("google.protobuf.") => {
                return Err(format!("{} has no JSON mapping here", m.full_name()));
            }
            Kind::Message(m) if direction == Direction::Text => {
                return Err(format!("{} can't be written as text", m.full_name()));
            }
            Kind::Message(m) => self.reference(m, direction)?,
            Kind::Bytes => return Err("bytes fields have no JSON mapping here".to_owned()),
        })
    }
}
