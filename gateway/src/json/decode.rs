//! JSON → DynamicMessage.

use std::collections::HashMap;

use prost_reflect::{DynamicMessage, FieldDescriptor, Kind, MapKey, MessageDescriptor, Value};
use serde_json::Value as Json;

use super::scalar::{expected, fit, from_text, is_64_bit};
use super::{Invalid, TIMESTAMP, Words};

/// Reads `json` as a `desc` message. Top-level fields named in `excluded` (those a route binds
/// from its path) count as unknown.
pub(crate) fn decode_message(
    desc: &MessageDescriptor,
    json: &Json,
    words: &Words,
    excluded: &[&str],
) -> Result<DynamicMessage, Invalid> {
    Decoder { words }.message(desc, json, "", excluded)
}

/// Reads `json` as the value of `field` (a route whose body is one field).
pub(crate) fn decode_field(
    field: &FieldDescriptor,
    json: &Json,
    words: &Words,
) -> Result<Value, Invalid> {
    Decoder { words }.field(field, json, field.name())
}

struct Decoder<'a> {
    words: &'a Words,
}

fn at(path: &str) -> String {
    if path.is_empty() {
        "the body".to_owned()
    } else {
        format!("field `{path}`")
    }
}

impl Decoder<'_> {
    fn message(
        &self,
        desc: &MessageDescriptor,
        json: &Json,
        path: &str,
        excluded: &[&str],
    ) -> Result<DynamicMessage, Invalid> {
        let Json::Object(members) = json else {
            return Err(Invalid::new(at(path), "must be an object"));
        };
        let mut message = DynamicMessage::new(desc.clone());
        for (name, value) in members {
            let path = if path.is_empty() {
                name.clone()
            } else {
                format!("{path}.{name}")
            };
            let field = desc
                .get_field_by_name(name)
                .filter(|f| !excluded.contains(&f.name()))
                .ok_or_else(|| Invalid::new(at(&path), "is not a known field"))?;
            if let Some(oneof) = field.containing_oneof().filter(|o| !o.is_synthetic())
                && let Some(other) = oneof.fields().find(|f| message.has_field(f))
            {
                let problem = format!(
                    "can't be given with `{}`: only one member of `{}` may be",
                    other.name(),
                    oneof.name()
                );
                return Err(Invalid::new(at(&path), problem));
            }
            let value = self.field(&field, value, &path)?;
            message.set_field(&field, value);
        }
        Ok(message)
    }

    fn field(&self, field: &FieldDescriptor, json: &Json, path: &str) -> Result<Value, Invalid> {
        if json.is_null() {
            return Err(Invalid::new(
                at(path),
                "must not be null (leave it out instead)",
            ));
        }
        let kind = field.kind();
        if field.is_map() {
            let (Json::Object(entries), Some(entry)) = (json, kind.as_message()) else {
                return Err(Invalid::new(at(path), "must be an object"));
            };
            let (key_kind, value_kind) = (
                entry.map_entry_key_field().kind(),
                entry.map_entry_value_field().kind(),
            );
            let mut map = HashMap::new();
            for (key, value) in entries {
                let path = format!("{path}.{key}");
                let key = map_key(&key_kind, key, self.words)
                    .map_err(|problem| Invalid::new(format!("a key of {}", at(&path)), problem))?;
                map.insert(key, self.single(&value_kind, value, &path)?);
            }
            Ok(Value::Map(map))
        } else if field.is_list() {
            let Json::Array(items) = json else {
                return Err(Invalid::new(at(path), "must be an array"));
            };
            let items = items.iter().enumerate();
            let values = items.map(|(i, item)| self.single(&kind, item, &format!("{path}[{i}]")));
            values.collect::<Result<_, _>>().map(Value::List)
        } else {
            self.single(&kind, json, path)
        }
    }

    fn single(&self, kind: &Kind, json: &Json, path: &str) -> Result<Value, Invalid> {
        let value = match (kind, json) {
            (Kind::Message(m), Json::Object(_)) if m.full_name() != TIMESTAMP => {
                return self.message(m, json, path, &[]).map(Value::Message);
            }
            (Kind::Bool, Json::Bool(b)) => Some(Value::Bool(*b)),
            (Kind::Double, Json::Number(n)) => n.as_f64().map(Value::F64),
            // Too large for f32 becomes infinite, and is refused.
            (Kind::Float, Json::Number(n)) => n
                .as_f64()
                .map(|f| f as f32)
                .filter(|f| f.is_finite())
                .map(Value::F32),
            (integer, Json::Number(n)) => integer_of(n).and_then(|n| fit(integer, n)),
            (Kind::String | Kind::Enum(_) | Kind::Message(_), Json::String(text)) => {
                from_text(kind, text, self.words).ok()
            }
            (integer, Json::String(text)) if is_64_bit(integer) => {
                from_text(kind, text, self.words).ok()
            }
            _ => None,
        };
        value.ok_or_else(|| Invalid::new(at(path), expected(kind, self.words)))
    }
}

/// JSON numbers written with a fraction or an exponent still count when they are whole.
fn integer_of(n: &serde_json::Number) -> Option<i128> {
    if let Some(i) = n.as_i64() {
        return Some(i.into());
    }
    if let Some(u) = n.as_u64() {
        return Some(u.into());
    }
    let f = n.as_f64()?;
    (f.fract() == 0.0 && f.abs() < 2f64.powi(100)).then_some(f as i128)
}

fn map_key(kind: &Kind, key: &str, words: &Words) -> Result<MapKey, String> {
    let key = match from_text(kind, key, words)? {
        Value::Bool(b) => MapKey::Bool(b),
        Value::I32(n) => MapKey::I32(n),
        Value::I64(n) => MapKey::I64(n),
        Value::U32(n) => MapKey::U32(n),
        Value::U64(n) => MapKey::U64(n),
        Value::String(s) => MapKey::String(s),
        _ => return Err(expected(kind, words)),
    };
    Ok(key)
}
