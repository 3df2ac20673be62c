//! `einsora usage`: a period's hourly usage records, or (`--by`) the usage report that sums
//! them by user, team or class, or (`--tokens`) the tokens endpoints' answers used per
//! endpoint, key and user, per hour or summed; as a table, or as CSV (`--format csv`). Never
//! money.

use std::io::Write;

use hyper::Method;
use serde_json::Value;

use super::commands::query;
use super::http::Api;
use super::output::{self, Column};

/// The period, the grouping and the form, as the command line gives them.
#[derive(Debug, clap::Args)]
pub struct UsageArgs {
    /// RFC 3339 start (inclusive).
    #[arg(long)]
    from: String,
    /// RFC 3339 end (exclusive).
    #[arg(long)]
    to: String,
    /// Sum the period by user, team or class (unit-hours, per class within a user or team)
    /// instead of listing the hourly records.
    #[arg(long, conflicts_with = "tokens")]
    by: Option<By>,
    /// The tokens endpoints' answers used, per endpoint, inference key and user: each `hour`,
    /// or summed over the `range`, instead of the hourly records.
    #[arg(long)]
    tokens: Option<Tokens>,
    /// `table`, or `csv` (every record, or every row of the report).
    #[arg(long, default_value = "table")]
    format: Format,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum By {
    User,
    Team,
    Class,
}

impl By {
    fn word(self) -> &'static str {
        match self {
            By::User => "user",
            By::Team => "team",
            By::Class => "class",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Tokens {
    Hour,
    Range,
}

impl Tokens {
    fn word(self) -> &'static str {
        match self {
            Tokens::Hour => "hour",
            Tokens::Range => "range",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Table,
    Csv,
}

const RECORDS: &[Column] = &[
    ("HOUR", "hour_start"),
    ("WORKLOAD", "workload_id"),
    ("CLASS", "placed_class"),
    ("REGION", "region"),
    ("SECONDS", "seconds"),
    ("UNITS", "units"),
];
/// The records' CSV: every field of a record.
const RECORDS_CSV: &[&str] = &[
    "hour_start",
    "tenant_id",
    "workload_id",
    "region",
    "machine_id",
    "placed_class",
    "units",
    "seconds",
];
/// Token usage: per hour, or (without HOUR) summed over the period.
const TOKENS: &[Column] = &[
    ("HOUR", "hour_start"),
    ("ENDPOINT", "endpoint_id"),
    ("KEY", "key_id"),
    ("USER", "user_id"),
    ("REQUESTS", "requests"),
    ("PROMPT TOKENS", "prompt_tokens"),
    ("COMPLETION TOKENS", "completion_tokens"),
];
/// Token usage's CSV: every field of a row.
const TOKENS_CSV: &[&str] = &[
    "hour_start",
    "tenant_id",
    "endpoint_id",
    "key_id",
    "user_id",
    "requests",
    "prompt_tokens",
    "completion_tokens",
];
/// The report's CSV: every field of a row (as the dashboard's download has them).
const REPORT_CSV: &[&str] = &[
    "group_id",
    "label",
    "placed_class",
    "workloads",
    "seconds",
    "unit_seconds",
    "unit_hours",
];

fn report_columns(by: By) -> &'static [Column] {
    const SUMS: [Column; 4] = [
        ("WORKLOADS", "workloads"),
        ("UNIT HOURS", "unit_hours"),
        ("SECONDS", "seconds"),
        ("ID", "group_id"),
    ];
    const BY_USER: &[Column] = &[
        ("USER", "label"),
        ("CLASS", "placed_class"),
        SUMS[0],
        SUMS[1],
        SUMS[2],
        SUMS[3],
    ];
    const BY_TEAM: &[Column] = &[
        ("TEAM", "label"),
        ("CLASS", "placed_class"),
        SUMS[0],
        SUMS[1],
        SUMS[2],
        SUMS[3],
    ];
    const BY_CLASS: &[Column] = &[("CLASS", "placed_class"), SUMS[0], SUMS[1], SUMS[2]];
    match by {
        By::User => BY_USER,
        By::Team => BY_TEAM,
        By::Class => BY_CLASS,
    }
}

/// Prints what `args` asks; `json` prints the API's answer (the records' first page).
pub async fn show(api: &Api, args: &UsageArgs, json: bool) -> anyhow::Result<()> {
    let period = format!("from={}&to={}", query(&args.from), query(&args.to));
    if let Some(by) = args.by {
        let path = format!("/v1/usage/report?{period}&by={}", by.word());
        let report = api.call(Method::GET, &path, None).await?;
        let rows = report["rows"].as_array().map_or(&[][..], Vec::as_slice);
        return match (json, args.format) {
            (true, _) => output::json(&report),
            (false, Format::Table) => {
                output::table(rows, report_columns(by));
                Ok(())
            }
            (false, Format::Csv) => csv(REPORT_CSV, rows.iter()),
        };
    }
    let (list, field, columns, fields) = match args.tokens {
        Some(per) => (
            format!("{period}&tokens={}", per.word()),
            "tokens",
            if per == Tokens::Hour {
                TOKENS
            } else {
                &TOKENS[1..]
            },
            TOKENS_CSV,
        ),
        None => (period, "records", RECORDS, RECORDS_CSV),
    };
    if json || args.format == Format::Table {
        let page = api
            .call(Method::GET, &format!("/v1/usage?{list}"), None)
            .await?;
        if json {
            return output::json(&page);
        }
        output::table(
            page[field].as_array().map_or(&[][..], Vec::as_slice),
            columns,
        );
        return Ok(());
    }
    let mut rows: Vec<Value> = vec![];
    let mut token = String::new();
    loop {
        let path = format!("/v1/usage?{list}&page_size=5000&page_token={token}");
        let mut page = api.call(Method::GET, &path, None).await?;
        if let Some(more) = page[field].as_array_mut() {
            rows.append(more);
        }
        match page["next_page_token"].as_str() {
            Some(next) if !next.is_empty() => token = query(next),
            _ => break,
        }
    }
    csv(fields, rows.iter())
}

fn csv<'a>(fields: &[&str], rows: impl Iterator<Item = &'a Value>) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", fields.join(","))?;
    for row in rows {
        writeln!(out, "{}", output::csv_row(row, fields))?;
    }
    out.flush()?;
    Ok(())
}
