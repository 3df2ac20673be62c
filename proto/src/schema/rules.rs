//! What a field's `einsora.options.v1.rules` come to: its `format` resolved to the pattern the
//! api holds that form to.

use super::FieldRules;

/// An ID as the API writes and reads it (`format: "uuid"`): 8-4-4-4-12 hex digits, either case.
pub const UUID_PATTERN: &str =
    "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";

impl FieldRules {
    /// The regular expression a given string matches: `pattern`, or its `format`'s; `None` if
    /// neither. An unknown format, or a format and a pattern both, is an error.
    pub fn string_pattern(&self) -> Result<Option<&str>, String> {
        match (self.format.as_str(), self.pattern.as_str()) {
            ("", "") => Ok(None),
            ("", pattern) => Ok(Some(pattern)),
            ("uuid", "") => Ok(Some(UUID_PATTERN)),
            (format, "") => Err(format!("the format {format:?} is unknown")),
            _ => Err("it has both a format and a pattern".to_owned()),
        }
    }
}
