//! `einsora logs`: what a workload printed, as `GET /v1/workloads/{id}/logs` pages it; with
//! `--follow`, new lines as they arrive until the workload stops.

use std::io::Write;
use std::time::Duration;

use hyper::Method;
use serde_json::Value;

use super::http::Api;

/// A page's lines at most (the API's bound).
const PAGE: u32 = 1000;
/// How often a follower asks again when it has caught up.
const POLL: Duration = Duration::from_millis(500);
/// How many more times a follower asks once the workload has stopped: its last lines reach the
/// store after its state does.
const AFTER_STOP: u32 = 4;

/// Prints the workload's kept lines (the last `tail` of them, if given), then, with `follow`,
/// each new one until the workload has stopped (and a little after, for its last lines).
pub async fn show(api: &Api, id: &str, follow: bool, tail: Option<u32>) -> anyhow::Result<()> {
    let base = format!("/v1/workloads/{id}/logs");
    let mut after = 0_u64;
    let mut first = true;
    let mut after_stop = AFTER_STOP;
    loop {
        let query = match (first, tail) {
            (true, Some(tail)) => format!("?tail={}&limit={PAGE}", tail.min(PAGE)),
            _ => format!("?after={after}&limit={PAGE}"),
        };
        let page = api
            .call(Method::GET, &format!("{base}{query}"), None)
            .await?;
        if first && let Some(dropped) = number(&page["dropped"]).filter(|d| *d > 0) {
            eprintln!("({dropped} older lines were dropped)");
        }
        first = false;
        let lines = page["lines"].as_array().map_or(&[][..], Vec::as_slice);
        print(lines)?;
        after = number(&page["next_after"]).unwrap_or(after);
        if lines.len() as u32 == PAGE {
            continue;
        }
        if !follow {
            return Ok(());
        }
        if !still_going(api, id).await? {
            if after_stop == 0 {
                return Ok(());
            }
            after_stop -= 1;
        }
        tokio::time::sleep(POLL).await;
    }
}

fn print(lines: &[Value]) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    for line in lines {
        if let Some(dropped) = number(&line["dropped_before"]).filter(|d| *d > 0) {
            writeln!(out, "({dropped} lines dropped here)")?;
        }
        writeln!(out, "{}", line["text"].as_str().unwrap_or_default())?;
    }
    out.flush()?;
    Ok(())
}

/// proto3 JSON writes 64-bit numbers as strings.
fn number(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| v.as_str()?.parse().ok())
}

/// Whether the workload is on its way to running, running, or stopping: it may print more.
async fn still_going(api: &Api, id: &str) -> anyhow::Result<bool> {
    let w = api
        .call(Method::GET, &format!("/v1/workloads/{id}"), None)
        .await?;
    Ok(matches!(
        w["state"].as_str(),
        Some("pending" | "queued" | "provisioning" | "running" | "stopping")
    ))
}
