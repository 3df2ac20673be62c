//! `einsora activity`: the tenant's activity log, as `GET /v1/activity` pages it; the newest
//! page as a table, or every entry in the filters as NDJSON or CSV (an export).

use std::io::Write;

use hyper::Method;

use super::http::Api;
use super::output::{self, Column};

/// The filters and the form, as the command line gives them.
#[derive(Debug, clap::Args)]
pub struct ActivityArgs {
    /// Only this action (create_workload, stop_workload, revoke_token, login, …).
    #[arg(long)]
    action: Option<String>,
    /// Only what succeeded (ok) or was refused (refused).
    #[arg(long)]
    result: Option<String>,
    /// Only entries about this object (a workload's, token's or machine's ID).
    #[arg(long)]
    object: Option<String>,
    /// Entries at or after: an RFC 3339 time, or a duration back from now (24h).
    #[arg(long, value_parser = super::logs::since)]
    since: Option<time::OffsetDateTime>,
    /// How many entries, newest first (the table's); an export has every one.
    #[arg(long, default_value_t = 50)]
    limit: u32,
    /// `table`, or an export of every matching entry: `ndjson` or `csv`.
    #[arg(long, default_value = "table")]
    format: Format,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Table,
    Ndjson,
    Csv,
}

const COLUMNS: &[Column] = &[
    ("AT", "at"),
    ("ACTOR", "actor"),
    ("ACTION", "action"),
    ("OBJECT", "object_id"),
    ("RESULT", "result"),
    ("REQUEST", "request_id"),
    ("FROM", "client_addr"),
];

/// The CSV's columns: every field of an entry.
const CSV: [&str; 10] = [
    "id",
    "at",
    "user_id",
    "actor",
    "action",
    "object_kind",
    "object_id",
    "result",
    "request_id",
    "client_addr",
];

/// Prints the log as `args` asks; `json` prints the first page as the API answered it.
pub async fn show(api: &Api, args: &ActivityArgs, json: bool) -> anyhow::Result<()> {
    let mut filters = String::new();
    for (key, value) in [
        ("action", args.action.clone()),
        ("result", args.result.clone()),
        ("object_id", args.object.clone()),
        ("from", args.since.map(rfc3339).transpose()?),
    ] {
        if let Some(value) = value {
            filters.push_str(&format!("&{key}={}", super::commands::query(&value)));
        }
    }
    if json || args.format == Format::Table {
        let size = args.limit.clamp(1, 500);
        let page = api
            .call(
                Method::GET,
                &format!("/v1/activity?page_size={size}{filters}"),
                None,
            )
            .await?;
        if json {
            return output::json(&page);
        }
        output::table(
            page["entries"].as_array().map_or(&[][..], Vec::as_slice),
            COLUMNS,
        );
        return Ok(());
    }
    let mut out = std::io::stdout().lock();
    if args.format == Format::Csv {
        writeln!(out, "{}", CSV.join(","))?;
    }
    let mut token = String::new();
    loop {
        let path = format!("/v1/activity?page_size=500&page_token={token}{filters}");
        let page = api.call(Method::GET, &path, None).await?;
        for entry in page["entries"].as_array().into_iter().flatten() {
            match args.format {
                Format::Ndjson => writeln!(out, "{entry}")?,
                _ => writeln!(out, "{}", output::csv_row(entry, &CSV))?,
            }
        }
        match page["next_page_token"].as_str() {
            Some(next) if !next.is_empty() => token = next.to_owned(),
            _ => break,
        }
    }
    out.flush()?;
    Ok(())
}

fn rfc3339(at: time::OffsetDateTime) -> anyhow::Result<String> {
    Ok(at.format(&time::format_description::well_known::Rfc3339)?)
}
