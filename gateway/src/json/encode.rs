//! DynamicMessage → JSON. Scalars, repeated fields and maps are always written (defaults
//! included, so clients see `"attempt": 0`); see [`super::always_emitted`].

use prost_reflect::{DynamicMessage, FieldDescriptor, Kind, MapKey, ReflectMessage, Value};
use serde_json::{Map, Value as Json};

use super::scalar::timestamp_text;
use super::{TIMESTAMP, Words};

/// An answer of the api that the JSON API can't spell: a bug on one side, never the caller's.
#[derive(Debug, thiserror::Error)]
#[error("field `{field}`: {problem}")]
pub(crate) struct Unencodable {
    field: String,
    problem: &'static str,
}

pub(crate) fn encode_message(message: &DynamicMessage, words: &Words) -> Result<Json, Unencodable> {
    let mut object = Map::new();
    for field in message.descriptor().fields() {
        if field.supports_presence() && !message.has_field(&field) {
            continue;
        }
        let value = message.get_field(&field);
        let singular = !field.is_list() && !field.is_map();
        if singular && matches!(field.kind(), Kind::Enum(_)) && value.as_enum_number() == Some(0) {
            continue;
        }
        object.insert(
            field.name().to_owned(),
            encode_field(&field, &value, words)?,
        );
    }
    Ok(Json::Object(object))
}

/// The JSON of `value`, the value of `field`.
pub(crate) fn encode_field(
    field: &FieldDescriptor,
    value: &Value,
    words: &Words,
) -> Result<Json, Unencodable> {
    let kind = field.kind();
    let fail = |problem| Unencodable {
        field: field.full_name().to_owned(),
        problem,
    };
    match value {
        Value::List(items) => items
            .iter()
            .map(|item| single(&kind, item, words).ok_or_else(|| fail(UNSPELLABLE)))
            .collect::<Result<_, _>>()
            .map(Json::Array),
        Value::Map(entries) => {
            let value_kind = kind
                .as_message()
                .map(|entry| entry.map_entry_value_field().kind())
                .ok_or_else(|| fail("is a map without an entry type"))?;
            let mut object = Map::new();
            for (key, value) in entries {
                let value = single(&value_kind, value, words).ok_or_else(|| fail(UNSPELLABLE))?;
                object.insert(key_text(key), value);
            }
            Ok(Json::Object(object))
        }
        Value::Message(m) if m.descriptor().full_name() != TIMESTAMP => encode_message(m, words),
        single_value => single(&kind, single_value, words).ok_or_else(|| fail(UNSPELLABLE)),
    }
}

const UNSPELLABLE: &str = "holds a value with no JSON form (an enum number without a word, a \
     Timestamp out of range, a non-finite number or bytes)";

fn single(kind: &Kind, value: &Value, words: &Words) -> Option<Json> {
    Some(match value {
        Value::Bool(b) => Json::Bool(*b),
        Value::I32(n) => Json::from(*n),
        Value::U32(n) => Json::from(*n),
        Value::I64(n) => Json::String(n.to_string()),
        Value::U64(n) => Json::String(n.to_string()),
        Value::F32(f) => Json::Number(serde_json::Number::from_f64(f64::from(*f))?),
        Value::F64(f) => Json::Number(serde_json::Number::from_f64(*f)?),
        Value::String(s) => Json::String(s.clone()),
        Value::EnumNumber(n) => Json::String(words.word(kind.as_enum()?, *n)?.to_owned()),
        Value::Message(m) if m.descriptor().full_name() == TIMESTAMP => {
            Json::String(timestamp_text(m)?)
        }
        Value::Message(m) => encode_message(m, words).ok()?,
        Value::Bytes(_) | Value::List(_) | Value::Map(_) => return None,
    })
}

fn key_text(key: &MapKey) -> String {
    match key {
        MapKey::Bool(b) => b.to_string(),
        MapKey::I32(n) => n.to_string(),
        MapKey::I64(n) => n.to_string(),
        MapKey::U32(n) => n.to_string(),
        MapKey::U64(n) => n.to_string(),
        MapKey::String(s) => s.clone(),
    }
}
