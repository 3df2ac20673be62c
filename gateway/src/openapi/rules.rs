//! The api's field rules (`einsora.options.v1.rules`) as JSON Schema keywords, so the document
//! says what a request may carry wherever one field's value can say it.

use einsora_proto::schema::FieldRules;
use prost_reflect::Kind;
use serde_json::{Value as Json, json};

/// The schema of a field from the schema of one of its values (`value`, of `kind`): the value
/// with the rules' keywords, in an array for a repeated field. A rule that doesn't fit the
/// field's type is an error.
pub(super) fn apply(
    rules: &FieldRules,
    mut value: Json,
    kind: &Kind,
    list: bool,
) -> Result<Json, String> {
    let min_length = match rules.min_length {
        // In proto3 JSON an empty string is an absent one.
        min if rules.required && *kind == Kind::String => Some(min.unwrap_or(0).max(1)),
        min => min,
    };
    let string_rules = [
        (
            "format",
            (!rules.format.is_empty()).then(|| json!(rules.format)),
        ),
        ("pattern", rules.string_pattern()?.map(|p| json!(p))),
        ("minLength", min_length.map(|n| json!(n))),
        ("maxLength", rules.max_length.map(|n| json!(n))),
    ];
    let number_rules = [
        ("minimum", rules.minimum.map(|n| json!(n))),
        ("maximum", rules.maximum.map(|n| json!(n))),
    ];
    let integer = matches!(
        kind,
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 | Kind::Uint32 | Kind::Fixed32
    );
    for (keywords, fits, what) in [
        (&string_rules[..], *kind == Kind::String, "a string"),
        (&number_rules[..], integer, "a 32-bit integer"),
    ] {
        for (keyword, rule) in keywords {
            let Some(rule) = rule else { continue };
            let keyword = *keyword;
            if !fits {
                return Err(format!("{keyword} needs {what} field"));
            }
            if keyword == "format" && value.get("format").is_some() {
                return Err("a secret has no other format".to_owned());
            }
            value[keyword] = rule.clone();
        }
    }
    let list_rules = [
        ("maxItems", rules.max_items.map(|n| json!(n))),
        ("uniqueItems", rules.unique_items.then_some(json!(true))),
    ];
    if !list {
        return match list_rules.into_iter().find(|(_, rule)| rule.is_some()) {
            Some((keyword, _)) => Err(format!("{keyword} needs a repeated field")),
            None => Ok(value),
        };
    }
    if rules.required {
        return Err("a repeated field can't be required".to_owned());
    }
    let mut array = json!({ "type": "array", "items": value });
    for (keyword, rule) in list_rules {
        if let Some(rule) = rule {
            array[keyword] = rule;
        }
    }
    Ok(array)
}

#[cfg(test)]
mod tests {
    use einsora_proto::schema::UUID_PATTERN;

    use super::*;

    fn string() -> Json {
        json!({ "type": "string" })
    }

    #[test]
    fn rules_become_keywords_and_lists_arrays() {
        let id = FieldRules {
            required: true,
            format: "uuid".into(),
            ..FieldRules::default()
        };
        assert_eq!(
            apply(&id, string(), &Kind::String, false),
            Ok(
                json!({ "type": "string", "format": "uuid", "pattern": UUID_PATTERN, "minLength": 1 })
            )
        );
        let names = FieldRules {
            pattern: "^[a-z]+$".into(),
            max_length: Some(8),
            max_items: Some(3),
            unique_items: true,
            ..FieldRules::default()
        };
        assert_eq!(
            apply(&names, string(), &Kind::String, true),
            Ok(json!({
                "type": "array",
                "items": { "type": "string", "pattern": "^[a-z]+$", "maxLength": 8 },
                "maxItems": 3,
                "uniqueItems": true,
            }))
        );
        let size = FieldRules {
            minimum: Some(1),
            maximum: Some(10),
            ..FieldRules::default()
        };
        let integer = json!({ "type": "integer", "minimum": 0, "maximum": 4_294_967_295_u32 });
        assert_eq!(
            apply(&size, integer, &Kind::Uint32, false),
            Ok(json!({ "type": "integer", "minimum": 1, "maximum": 10 }))
        );
    }

    #[test]
    fn a_rule_that_does_not_fit_the_field_is_an_error() {
        let pattern = FieldRules {
            pattern: "^a$".into(),
            ..FieldRules::default()
        };
        let integer = json!({ "type": "integer" });
        assert!(apply(&pattern, integer, &Kind::Uint32, false).is_err());
        let wide = FieldRules {
            maximum: Some(1),
            ..FieldRules::default()
        };
        assert!(apply(&wide, string(), &Kind::Int64, false).is_err());
        let items = FieldRules {
            max_items: Some(1),
            ..FieldRules::default()
        };
        assert!(apply(&items, string(), &Kind::String, false).is_err());
        let unknown = FieldRules {
            format: "email".into(),
            ..FieldRules::default()
        };
        assert!(apply(&unknown, string(), &Kind::String, false).is_err());
        let secret = json!({ "type": "string", "format": "password" });
        let id = FieldRules {
            format: "uuid".into(),
            ..FieldRules::default()
        };
        assert!(apply(&id, secret, &Kind::String, false).is_err());
    }
}
