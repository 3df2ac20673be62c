//! `einsora logs`: what a workload printed, as `GET /v1/workloads/{id}/logs` pages it; with
//! `--follow`, the API's followed stream (NDJSON), new lines as they arrive until the workload
//! stops. A followed stream that breaks is taken up again after the last line printed.

use std::io::Write;
use std::time::Duration;

use anyhow::Context;
use hyper::Method;
use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::http::{Api, ApiError};

/// A page's lines at most (the API's bound).
const PAGE: u32 = 1000;
/// How many times in a row a broken follow is taken up again, a second apart.
const RESUMES: u32 = 5;

/// Which lines to print: the last `tail`, only those printed since a time; `follow` goes on.
#[derive(Debug, Default)]
pub struct Reading {
    pub follow: bool,
    pub tail: Option<u32>,
    pub since: Option<OffsetDateTime>,
}

/// `--since`: an RFC 3339 time, or a duration back from now (`10m`, `1h30m`).
pub fn since(text: &str) -> anyhow::Result<OffsetDateTime> {
    if let Ok(at) = OffsetDateTime::parse(text, &Rfc3339) {
        return Ok(at);
    }
    let ago = einsora_runtime::settings::parse_duration(text).with_context(|| {
        format!("--since {text:?} is neither an RFC 3339 time nor a duration (e.g. 10m, 1h30m)")
    })?;
    Ok(OffsetDateTime::now_utc() - ago)
}

/// Prints the workload's kept lines as `reading` asks, then, following, each new one until the
/// workload has stopped and its last lines are in.
pub async fn show(api: &Api, id: &str, reading: &Reading) -> anyhow::Result<()> {
    let base = format!("/v1/workloads/{id}/logs");
    let since = match reading.since {
        Some(at) => format!("&since={}", super::commands::query(&at.format(&Rfc3339)?)),
        None => String::new(),
    };
    let mut after = 0_u64;
    let mut first = true;
    let mut resumes = RESUMES;
    loop {
        let mut query = match (first, reading.tail) {
            (true, Some(tail)) => format!("?tail={}&limit={PAGE}", tail.min(PAGE)),
            _ => format!("?after={after}&limit={PAGE}"),
        };
        query.push_str(&since);
        if !reading.follow {
            let page = api
                .call(Method::GET, &format!("{base}{query}"), None)
                .await?;
            let lines = print_page(&page, &mut first, &mut after)?;
            if lines < PAGE as usize {
                return Ok(());
            }
            continue;
        }
        let path = format!("{base}{query}&follow=true");
        let mut printed = false;
        let followed = api
            .each_line(&path, |page| {
                printed |= print_page(&page, &mut first, &mut after)? > 0;
                Ok(())
            })
            .await;
        match followed {
            Ok(()) => return Ok(()),
            // What the API refused is final; a broken connection, or a role restarting
            // (`unavailable`) or failing for a moment (`internal`), is taken up again.
            Err(e) if e.downcast_ref::<ApiError>().is_some_and(|a| !passing(a)) => {
                return Err(e);
            }
            Err(e) if resumes == 0 => return Err(e),
            Err(e) => {
                resumes = if printed { RESUMES } else { resumes - 1 };
                eprintln!("({e:#}; following again)");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// An error a follow outlives: the API stopping or failing for a moment.
fn passing(error: &ApiError) -> bool {
    use einsora_runtime::error_code::ErrorCode;
    matches!(
        ErrorCode::from_word(&error.code),
        Some(ErrorCode::Unavailable | ErrorCode::Internal)
    )
}

/// Where lines may be missing, how many unknown (the API's `gap_before`).
const GAP: &str = "(lines may be missing here: the container's log rotated before they were read)";

/// Prints a page's lines (and, on the first page, how many older lines were dropped), moves
/// `after` past them, and says how many there were.
fn print_page(page: &Value, first: &mut bool, after: &mut u64) -> anyhow::Result<usize> {
    if std::mem::take(first)
        && let Some(dropped) = number(&page["dropped"]).filter(|d| *d > 0)
    {
        eprintln!("({dropped} older lines were dropped)");
    }
    let lines = page["lines"].as_array().map_or(&[][..], Vec::as_slice);
    let mut out = std::io::stdout().lock();
    for line in lines {
        if let Some(dropped) = number(&line["dropped_before"]).filter(|d| *d > 0) {
            writeln!(out, "({dropped} lines dropped here)")?;
        }
        if line["gap_before"].as_bool() == Some(true) {
            writeln!(out, "{GAP}")?;
        }
        writeln!(out, "{}", line["text"].as_str().unwrap_or_default())?;
    }
    out.flush()?;
    *after = number(&page["next_after"]).unwrap_or(*after);
    Ok(lines.len())
}

/// proto3 JSON writes 64-bit numbers as strings.
fn number(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| v.as_str()?.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_is_a_time_or_a_duration_back_from_now() {
        let at = since("2026-01-02T03:04:05Z").unwrap();
        assert_eq!(at.unix_timestamp(), 1_767_323_045);
        let ago = OffsetDateTime::now_utc() - since("90m").unwrap();
        assert!((ago.whole_seconds() - 5400).abs() < 60, "{ago}");
        let err = since("yesterday").unwrap_err().to_string();
        assert!(err.contains("--since \"yesterday\""), "{err}");
    }
}
