//! One value of a dumped row, engine-neutral, and its JSON form in an archive: `null`, an
//! integer, a string, or `{"base64": "…"}` for bytes (an ID is its 16 bytes).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Null,
    Int(i64),
    Text(String),
    Bytes(Vec<u8>),
}

const BYTES: &str = "base64";

impl Value {
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Value::Null => serde_json::Value::Null,
            Value::Int(i) => (*i).into(),
            Value::Text(s) => s.as_str().into(),
            Value::Bytes(b) => serde_json::json!({ BYTES: STANDARD.encode(b) }),
        }
    }

    /// The value `json` stands for; the error says what it is instead.
    pub fn from_json(json: &serde_json::Value) -> Result<Value, String> {
        match json {
            serde_json::Value::Null => Ok(Value::Null),
            serde_json::Value::Number(n) => n
                .as_i64()
                .map(Value::Int)
                .ok_or_else(|| format!("{n} is not a 64-bit integer")),
            serde_json::Value::String(s) => Ok(Value::Text(s.clone())),
            serde_json::Value::Object(o) if o.len() == 1 => {
                let text = o
                    .get(BYTES)
                    .and_then(|b| b.as_str())
                    .ok_or_else(|| format!("an object other than {{\"{BYTES}\": …}}"))?;
                STANDARD
                    .decode(text)
                    .map(Value::Bytes)
                    .map_err(|e| format!("bytes that aren't base64: {e}"))
            }
            other => Err(format!("{} is not a value a row holds", kind(other))),
        }
    }

    /// What it is, with its article, for an error.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Null => "a null",
            Value::Int(_) => "an integer",
            Value::Text(_) => "a text",
            Value::Bytes(_) => "bytes",
        }
    }
}

fn kind(json: &serde_json::Value) -> &'static str {
    match json {
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Array(_) => "an array",
        _ => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_survives_its_json_form_and_anything_else_is_named() {
        for value in [
            Value::Null,
            Value::Int(i64::MIN),
            Value::Int(1_733_400_000_000),
            Value::Text("dev@acme \u{1F600}".into()),
            Value::Bytes((0..=255).collect()),
            Value::Bytes(Vec::new()),
        ] {
            assert_eq!(Value::from_json(&value.to_json()).unwrap(), value);
        }
        for (json, said) in [
            (serde_json::json!(1.5), "1.5 is not a 64-bit integer"),
            (serde_json::json!(true), "a boolean"),
            (serde_json::json!([1]), "an array"),
            (serde_json::json!({"hex": "00"}), "an object other than"),
            (serde_json::json!({"base64": "!!"}), "aren't base64"),
        ] {
            let why = Value::from_json(&json).unwrap_err();
            assert!(why.contains(said), "{json}: {why}");
        }
    }
}
