//! Output: aligned tables for people, the API's own JSON for scripts (`--json`).

use serde_json::Value;

/// A column: its heading and the JSON field it shows.
pub type Column = (&'static str, &'static str);

pub fn json(value: &Value) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// An answer as the user asked for it: the API's JSON with `--json`, else a table of `columns`,
/// of the answer's `field` (a list) or of the answer itself.
pub fn show(
    json: bool,
    value: &Value,
    field: Option<&str>,
    columns: &[Column],
) -> anyhow::Result<()> {
    if json {
        return self::json(value);
    }
    match field {
        Some(field) => table(
            value[field].as_array().map_or(&[][..], Vec::as_slice),
            columns,
        ),
        None => table(std::slice::from_ref(value), columns),
    }
    Ok(())
}

/// Prints `rows` as a table of `columns`, each as wide as its widest cell.
pub fn table(rows: &[Value], columns: &[Column]) {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            columns
                .iter()
                .map(|(_, field)| cell(&row[*field]))
                .collect()
        })
        .collect();
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, (heading, _))| {
            cells
                .iter()
                .map(|r| r[i].chars().count())
                .chain([heading.len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |values: Vec<&str>| {
        let padded: Vec<String> = values
            .iter()
            .zip(&widths)
            .map(|(v, w)| format!("{v:<w$}"))
            .collect();
        println!("{}", padded.join("  ").trim_end());
    };
    line(columns.iter().map(|(heading, _)| *heading).collect());
    for row in &cells {
        line(row.iter().map(String::as_str).collect());
    }
}

/// Gives each row of `rows` a field `to`: its `from` bytes in GiB, one decimal, for a table
/// (the API sends 64-bit counts as strings). A row without a count gets none.
pub fn add_gib(rows: &mut Value, from: &str, to: &str) {
    for row in rows.as_array_mut().into_iter().flatten() {
        let bytes = match &row[from] {
            Value::String(s) => s.parse::<u64>().ok(),
            other => other.as_u64(),
        };
        if let (Some(bytes), Some(fields)) = (bytes, row.as_object_mut()) {
            let gib = bytes as f64 / f64::from(1u32 << 30);
            fields.insert(to.to_owned(), Value::String(format!("{gib:.1}")));
        }
    }
}

/// A JSON object's `fields` as a CSV row (RFC 4180: a field with a comma, a quote or a line
/// break is quoted, its quotes doubled; one a spreadsheet would take for a formula starts with
/// `'`). Strings as they are, numbers and booleans as JSON writes them, absent ones empty.
pub fn csv_row(entry: &Value, fields: &[&str]) -> String {
    fields
        .iter()
        .map(|field| {
            let raw = match &entry[*field] {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other @ (Value::Number(_) | Value::Bool(_)) => other.to_string(),
                Value::Array(_) | Value::Object(_) => String::new(),
            };
            let formula = raw.starts_with(['=', '+', '-', '@', '\t', '\r']);
            let text = if formula { format!("'{raw}") } else { raw };
            if text.contains([',', '"', '\n', '\r']) {
                format!("\"{}\"", text.replace('"', "\"\""))
            } else {
                text
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// One value as a table shows it: strings bare, lists joined, absent as "-".
fn cell(value: &Value) -> String {
    match value {
        Value::Null => "-".to_owned(),
        Value::String(s) if s.is_empty() => "-".to_owned(),
        Value::String(s) => s.chars().filter(|c| !c.is_control()).collect(),
        Value::Array(items) => items.iter().map(cell).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_is_shown_in_gib() {
        let mut rows = serde_json::json!([
            { "memory_bytes": "68719476736" },
            { "memory_bytes": 3_221_225_472u64 },
            { "memory_bytes": "not a count" },
        ]);
        add_gib(&mut rows, "memory_bytes", "memory_gib");
        assert_eq!(rows[0]["memory_gib"], "64.0");
        assert_eq!(rows[1]["memory_gib"], "3.0");
        assert_eq!(cell(&rows[2]["memory_gib"]), "-");
    }

    #[test]
    fn csv_rows_quote_what_needs_it() {
        let entry = serde_json::json!({
            "id": "1", "actor": "you@x.y (API token \"ci, nightly\" (tsk_Ab…))",
            "action": "login", "result": "ok", "object_id": "=HYPERLINK(\"x\")",
            "seconds": 3600, "label": "-2+3", "list": ["x"],
        });
        let fields = [
            "id",
            "at",
            "actor",
            "action",
            "object_id",
            "result",
            "seconds",
            "label",
            "list",
        ];
        assert_eq!(
            csv_row(&entry, &fields),
            "1,,\"you@x.y (API token \"\"ci, nightly\"\" (tsk_Ab…))\",login,\"'=HYPERLINK(\"\"x\"\")\",ok,3600,'-2+3,"
        );
    }

    #[test]
    fn cells_are_plain_and_safe() {
        assert_eq!(cell(&Value::Null), "-");
        assert_eq!(cell(&serde_json::json!("a\u{1b}[2Jb")), "a[2Jb");
        assert_eq!(cell(&serde_json::json!(["x", "y"])), "x,y");
        assert_eq!(cell(&serde_json::json!(3)), "3");
    }
}
