//! One member of a JSON object found in the object's own bytes, to read its value or take it
//! out, without parsing (and writing again) everything else the object holds: a streamed
//! answer's chunks pass with llama.cpp's `timings` removed this way (`usage.rs`), a chunk for
//! every token. Only the object's top-level members are looked at; a key is compared as it is
//! written (one spelled with escapes is another key). Bytes that aren't an object as JSON
//! writes one find nothing and are left as they are, whatever an engine sends.

use std::ops::Range;

/// Where a member lies in an object's bytes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Member {
    /// What to remove to take it out: the member and one comma beside it.
    pub(crate) remove: Range<usize>,
    /// Its value.
    pub(crate) value: Range<usize>,
}

/// The first top-level member of the object `json` named `key`.
pub(crate) fn find(json: &[u8], key: &str) -> Option<Member> {
    let mut at = skip_space(json, 0);
    if json.get(at) != Some(&b'{') {
        return None;
    }
    // The `{` or `,` before the member looked at.
    let mut before = at;
    at += 1;
    loop {
        at = skip_space(json, at);
        if json.get(at) != Some(&b'"') {
            // `}` of an empty object, or not JSON.
            return None;
        }
        let key_start = at;
        let key_end = string_end(json, key_start)?;
        at = skip_space(json, key_end);
        if json.get(at) != Some(&b':') {
            return None;
        }
        let value_start = skip_space(json, at + 1);
        let value_end = value_end(json, value_start)?;
        let after = skip_space(json, value_end);
        let next = *json.get(after)?;
        if &json[key_start + 1..key_end - 1] == key.as_bytes() {
            let remove = match (json[before], next) {
                (b',', _) => before..value_end,
                (_, b',') => key_start..after + 1,
                _ => key_start..value_end,
            };
            let value = value_start..value_end;
            return Some(Member { remove, value });
        }
        if next != b',' {
            return None;
        }
        before = after;
        at = after + 1;
    }
}

/// `json` without the member `member` found in it.
pub(crate) fn without(json: &[u8], member: &Member) -> Vec<u8> {
    let mut out = Vec::with_capacity(json.len());
    out.extend_from_slice(&json[..member.remove.start]);
    out.extend_from_slice(&json[member.remove.end..]);
    out
}

fn skip_space(json: &[u8], mut at: usize) -> usize {
    while json
        .get(at)
        .is_some_and(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
    {
        at += 1;
    }
    at
}

/// Just past the string that starts at `start` (a `"`).
fn string_end(json: &[u8], start: usize) -> Option<usize> {
    let mut at = start + 1;
    while let Some(b) = json.get(at) {
        match b {
            b'\\' => at += 2,
            b'"' => return Some(at + 1),
            _ => at += 1,
        }
    }
    None
}

/// Just past the value that starts at `start`.
fn value_end(json: &[u8], start: usize) -> Option<usize> {
    match json.get(start)? {
        b'"' => string_end(json, start),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut at = start;
            while let Some(b) = json.get(at) {
                match b {
                    b'"' => {
                        at = string_end(json, at)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(at + 1);
                        }
                    }
                    _ => {}
                }
                at += 1;
            }
            None
        }
        // A number, `true`, `false` or `null`: up to what ends it.
        _ => {
            let end = (start..json.len())
                .find(|&at| matches!(json[at], b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n'))
                .unwrap_or(json.len());
            (end > start).then_some(end)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn removed(json: &str) -> Option<String> {
        let member = find(json.as_bytes(), "timings")?;
        let out = without(json.as_bytes(), &member);
        Some(String::from_utf8(out).unwrap())
    }

    fn value(json: &str) -> Option<&str> {
        find(json.as_bytes(), "timings").map(|m| &json[m.value])
    }

    #[test]
    fn the_member_goes_with_one_comma_wherever_it_stands() {
        let t = r#"{"prompt_n":3,"predicted_n":1}"#;
        for (json, left) in [
            (
                format!(r#"{{"a":1,"timings":{t},"b":[2]}}"#),
                r#"{"a":1,"b":[2]}"#,
            ),
            (format!(r#"{{"timings":{t},"b":2}}"#), r#"{"b":2}"#),
            (format!(r#"{{"a":1,"timings":{t}}}"#), r#"{"a":1}"#),
            (format!(r#"{{"timings":{t}}}"#), r#"{}"#),
            (
                format!(r#" {{ "a" : 1 , "timings" : {t} }}"#),
                r#" { "a" : 1  }"#,
            ),
            (format!(r#"{{ "timings" : {t} , "b":2}}"#), r#"{  "b":2}"#),
        ] {
            assert_eq!(removed(&json).as_deref(), Some(left), "{json}");
            assert_eq!(value(&json), Some(t), "{json}");
            let left: serde_json::Value = serde_json::from_str(left).unwrap();
            assert!(left.get("timings").is_none());
        }
    }

    #[test]
    fn only_a_top_level_key_as_written_is_found() {
        for json in [
            // Inside a string, escaped quotes and all.
            r#"{"content":"\"timings\":{}","b":1}"#,
            r#"{"content":"a \\\" \"timings\":1"}"#,
            // Deeper in.
            r#"{"choices":[{"timings":{"prompt_n":1}}],"x":{"timings":2}}"#,
            // Spelled with an escape.
            r#"{"timing\u0073":1}"#,
            r#"{}"#,
        ] {
            assert_eq!(removed(json), None, "{json}");
        }
        let json = r#"{"choices":[{"delta":{"content":"}{]["}}],"timings":{"prompt_n":2}}"#;
        assert_eq!(
            removed(json).as_deref(),
            Some(r#"{"choices":[{"delta":{"content":"}{]["}}]}"#)
        );
    }

    #[test]
    fn what_isnt_an_object_finds_nothing_and_never_panics() {
        for json in [
            "",
            "{",
            "[1]",
            r#""timings""#,
            r#"{"timings""#,
            r#"{"timings":"#,
            r#"{"timings":{"a":1"#,
            r#"{"timings":"unterminated}"#,
            r#"{"timings":1"#,
            r#"{"a" 1,"timings":2}"#,
            r#"{"a":1 "timings":2}"#,
            r#"{"\"#,
            r#"{"a":"\"#,
            "{\"timings\":}",
            "{\"timings\":]}",
        ] {
            assert_eq!(removed(json), None, "{json}");
        }
    }
}
