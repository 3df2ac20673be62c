//! Single values: integers with their ranges, enum words, RFC 3339 Timestamps, and the same
//! types written as text (path variables, query parameters, 64-bit integers in JSON strings).

use prost_reflect::{DynamicMessage, Kind, MessageDescriptor, Value};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::{TIMESTAMP, Words};

/// The proto range of Timestamp: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z.
const MIN_SECONDS: i64 = -62_135_596_800;
const MAX_SECONDS: i64 = 253_402_300_799;

/// A value of `kind` written as text. The error is a phrase that follows the place's name.
pub(crate) fn from_text(kind: &Kind, text: &str, words: &Words) -> Result<Value, String> {
    let value = match kind {
        Kind::Bool => match text {
            "true" => Some(Value::Bool(true)),
            "false" => Some(Value::Bool(false)),
            _ => None,
        },
        Kind::String => Some(Value::String(text.to_owned())),
        Kind::Double => text
            .parse()
            .ok()
            .filter(|f: &f64| f.is_finite())
            .map(Value::F64),
        Kind::Float => text
            .parse()
            .ok()
            .filter(|f: &f32| f.is_finite())
            .map(Value::F32),
        Kind::Enum(e) => words.number(e, text).map(Value::EnumNumber),
        Kind::Message(m) if m.full_name() == TIMESTAMP => timestamp(m, text).map(Value::Message),
        Kind::Message(_) | Kind::Bytes => None,
        integer => text.parse().ok().and_then(|n| fit(integer, n)),
    };
    value.ok_or_else(|| expected(kind, words))
}

/// `n` as an integer of `kind`, if it is one and in range.
pub(crate) fn fit(kind: &Kind, n: i128) -> Option<Value> {
    match kind {
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => i32::try_from(n).ok().map(Value::I32),
        Kind::Uint32 | Kind::Fixed32 => u32::try_from(n).ok().map(Value::U32),
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => i64::try_from(n).ok().map(Value::I64),
        Kind::Uint64 | Kind::Fixed64 => u64::try_from(n).ok().map(Value::U64),
        _ => None,
    }
}

/// 64-bit integers are JSON strings on output, so they are accepted as strings on input too.
pub(crate) fn is_64_bit(kind: &Kind) -> bool {
    matches!(
        kind,
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 | Kind::Uint64 | Kind::Fixed64
    )
}

/// What a value of `kind` must look like, as a phrase.
pub(crate) fn expected(kind: &Kind, words: &Words) -> String {
    let range = |min: i128, max: i128| format!("must be an integer from {min} to {max}");
    match kind {
        Kind::Bool => "must be true or false".to_owned(),
        Kind::String => "must be a string".to_owned(),
        Kind::Double | Kind::Float => "must be a number".to_owned(),
        Kind::Bytes => "has a type the JSON API does not support".to_owned(),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => range(i32::MIN.into(), i32::MAX.into()),
        Kind::Uint32 | Kind::Fixed32 => range(0, u32::MAX.into()),
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => range(i64::MIN.into(), i64::MAX.into()),
        Kind::Uint64 | Kind::Fixed64 => range(0, u64::MAX.into()),
        Kind::Enum(e) => format!("must be one of: {}", words.all(e).join(", ")),
        Kind::Message(m) if m.full_name() == TIMESTAMP => {
            "must be an RFC 3339 time, e.g. 2025-01-31T09:30:00Z".to_owned()
        }
        Kind::Message(_) => "must be an object".to_owned(),
    }
}

fn timestamp(desc: &MessageDescriptor, text: &str) -> Option<DynamicMessage> {
    let at = OffsetDateTime::parse(text, &Rfc3339).ok()?;
    let seconds = at.unix_timestamp();
    if !(MIN_SECONDS..=MAX_SECONDS).contains(&seconds) {
        return None;
    }
    let nanos = i32::try_from(at.nanosecond()).ok()?;
    let mut message = DynamicMessage::new(desc.clone());
    message.set_field_by_name("seconds", Value::I64(seconds));
    message.set_field_by_name("nanos", Value::I32(nanos));
    Some(message)
}

/// A Timestamp message as RFC 3339 in UTC; `None` when it is outside the proto range.
pub(crate) fn timestamp_text(message: &DynamicMessage) -> Option<String> {
    let seconds = message.get_field_by_name("seconds")?.as_i64()?;
    let nanos = message.get_field_by_name("nanos")?.as_i32()?;
    if !(MIN_SECONDS..=MAX_SECONDS).contains(&seconds) || !(0..1_000_000_000).contains(&nanos) {
        return None;
    }
    let at = OffsetDateTime::from_unix_timestamp_nanos(
        i128::from(seconds) * 1_000_000_000 + i128::from(nanos),
    )
    .ok()?;
    at.format(&Rfc3339).ok()
}
