//! `einsora status`: the installation's health at a glance (`GET /v1/status`): each role, who
//! leads each region, and the caller's machines and workloads counted. It exits non-zero when
//! anything is unwell, so a script can ask it too.

use hyper::Method;
use serde_json::{Value, json};

use super::http::{Api, ApiError};
use super::output::{self, Column};

const ROLES: &[Column] = &[("ROLE", "name"), ("STATUS", "status"), ("DETAIL", "detail")];

/// What to print and whether all is well; the API unreachable is a status too.
pub async fn show(api: &Api, json_out: bool) -> anyhow::Result<()> {
    let status = match api.call(Method::GET, "/v1/status", None).await {
        Ok(status) => status,
        Err(e) => match e.downcast_ref::<ApiError>() {
            // The gateway answered for a role behind it that didn't.
            Some(refused) if refused.code == "unavailable" => json!({
                "roles": [
                    {"name": "gateway", "healthy": true, "detail": "answered"},
                    {"name": "api", "healthy": false, "detail": refused.message},
                ],
            }),
            _ => return Err(e),
        },
    };
    let unwell = status["roles"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["healthy"] != true)
        .count();
    if json_out {
        output::json(&status)?;
    } else {
        print(&status);
    }
    if unwell > 0 {
        anyhow::bail!("{unwell} of Einsora's parts are not well (see above)");
    }
    Ok(())
}

fn print(status: &Value) {
    let rows: Vec<Value> = status["roles"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let word = if r["healthy"] == true { "up" } else { "DOWN" };
            json!({"name": r["name"], "status": word, "detail": r["detail"]})
        })
        .collect();
    output::table(&rows, ROLES);
    if let Some(online) = status.get("machines_online") {
        let offline = &status["machines_offline"];
        println!("\nmachines: {online} online, {offline} offline");
    }
    if let Some(workloads) = status["workloads"].as_object() {
        let mut counts: Vec<String> = workloads.iter().map(|(s, n)| format!("{n} {s}")).collect();
        counts.sort();
        let counts = if counts.is_empty() {
            "none".to_owned()
        } else {
            counts.join(", ")
        };
        println!("workloads: {counts}");
    }
}
