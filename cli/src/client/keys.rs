//! `einsora keys …`: inference keys (`isk_…`, for endpoints at the access proxy only), and the
//! tenant's inference limits (everyone reads them; owners and admins set them).

use clap::{Args, Subcommand};
use hyper::Method;
use serde_json::{Map, Value, json};

use super::commands::segment;
use super::http::Api;
use super::output::{self, Column};

#[derive(Debug, Subcommand)]
pub enum KeyCommand {
    /// Create an inference key for some of your endpoints (--endpoint, repeated) or all of
    /// your tenant's (--all-endpoints); its secret is shown once.
    Create {
        #[arg(long)]
        name: String,
        /// An endpoint's ID (see `einsora workloads`); repeat for more.
        #[arg(long = "endpoint", required_unless_present = "all_endpoints")]
        endpoints: Vec<String>,
        /// Every endpoint of your tenant, those made later too.
        #[arg(long, conflicts_with = "endpoints")]
        all_endpoints: bool,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Your inference keys (an owner's or admin's: the tenant's), never their secrets.
    List,
    /// Revoke an inference key at once, by ID.
    Revoke { id: String },
    /// Your tenant's inference limits and what it used today; with a limit given, sets them
    /// all (a limit left out is none; owners and admins).
    Limits {
        #[command(flatten)]
        limits: LimitArgs,
        /// Clear every limit.
        #[arg(long, conflicts_with_all = ["requests_per_minute", "tokens_per_minute", "tokens_per_day"])]
        unlimited: bool,
    },
}

/// Limits on inference, each left out when there is none.
#[derive(Debug, Args)]
pub struct LimitArgs {
    /// Requests in any sliding minute.
    #[arg(long)]
    requests_per_minute: Option<u32>,
    /// Tokens (prompt and completion) in any sliding minute.
    #[arg(long)]
    tokens_per_minute: Option<u32>,
    /// Tokens in a UTC day.
    #[arg(long)]
    tokens_per_day: Option<u32>,
}

impl LimitArgs {
    fn given(&self) -> bool {
        self.requests_per_minute.is_some()
            || self.tokens_per_minute.is_some()
            || self.tokens_per_day.is_some()
    }

    fn json(&self) -> Value {
        let mut limits = Map::new();
        for (name, value) in [
            ("requests_per_minute", self.requests_per_minute),
            ("tokens_per_minute", self.tokens_per_minute),
            ("tokens_per_day", self.tokens_per_day),
        ] {
            if let Some(value) = value {
                limits.insert(name.into(), value.into());
            }
        }
        Value::Object(limits)
    }
}

const KEYS: &[Column] = &[
    ("ID", "id"),
    ("NAME", "name"),
    ("PREFIX", "prefix"),
    ("OWNER", "owner_email"),
    ("ENDPOINTS", "scope"),
    ("REQ/MIN", "requests_per_minute"),
    ("TOK/MIN", "tokens_per_minute"),
    ("TOK/DAY", "tokens_per_day"),
    ("USED TODAY", "tokens_used_today"),
    ("LEFT TODAY", "tokens_left_today"),
    ("REVOKED", "revoked_at"),
];
const LIMITS: &[Column] = &[
    ("REQ/MIN", "requests_per_minute"),
    ("TOK/MIN", "tokens_per_minute"),
    ("TOK/DAY", "tokens_per_day"),
    ("USED TODAY", "tokens_used_today"),
    ("LEFT TODAY", "tokens_left_today"),
];

/// A key or the tenant's limits as a table row: the limits beside the rest, `-` for none,
/// the scope in a word or its IDs.
fn row(value: &Value) -> Value {
    let mut row = value.clone();
    for limit in ["requests_per_minute", "tokens_per_minute", "tokens_per_day"] {
        row[limit] = value["limits"].get(limit).cloned().unwrap_or("-".into());
    }
    if row.get("tokens_left_today").is_none_or(Value::is_null) {
        row["tokens_left_today"] = "-".into();
    }
    row["scope"] = if value["all_endpoints"] == true {
        "all".into()
    } else {
        let ids: Vec<&str> = value["endpoint_ids"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        ids.join(",").into()
    };
    row
}

pub async fn run(api: &Api, json: bool, command: KeyCommand) -> anyhow::Result<()> {
    match command {
        KeyCommand::Create {
            name,
            endpoints,
            all_endpoints,
            limits,
        } => {
            for id in &endpoints {
                segment(id)?;
            }
            let body = json!({
                "name": name,
                "all_endpoints": all_endpoints,
                "endpoint_ids": endpoints,
                "limits": limits.json(),
            });
            let made = api
                .call(Method::POST, "/v1/inference-keys", Some(body))
                .await?;
            if json {
                return output::json(&made);
            }
            println!("{}", made["key"].as_str().unwrap_or_default());
            eprintln!("This is the only time the key is shown: keep it now.");
            Ok(())
        }
        KeyCommand::List => {
            let listed = api.call(Method::GET, "/v1/inference-keys", None).await?;
            if json {
                return output::json(&listed);
            }
            let rows: Vec<Value> = listed["keys"]
                .as_array()
                .into_iter()
                .flatten()
                .map(row)
                .collect();
            output::table(&rows, KEYS);
            Ok(())
        }
        KeyCommand::Revoke { id } => {
            let path = format!("/v1/inference-keys/{}", segment(&id)?);
            let revoked = api.call(Method::DELETE, &path, None).await?;
            if json {
                return output::json(&revoked);
            }
            output::table(&[row(&revoked)], KEYS);
            Ok(())
        }
        KeyCommand::Limits { limits, unlimited } => {
            let answer = if limits.given() || unlimited {
                let body = json!({ "limits": limits.json() });
                api.call(Method::PUT, "/v1/inference-limits", Some(body))
                    .await?
            } else {
                api.call(Method::GET, "/v1/inference-limits", None).await?
            };
            if json {
                return output::json(&answer);
            }
            output::table(&[row(&answer)], LIMITS);
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_show_limits_beside_the_rest_and_the_scope_in_a_word_or_ids() {
        let key = json!({
            "id": "1", "all_endpoints": false, "endpoint_ids": ["a", "b"],
            "limits": {"requests_per_minute": 3}, "tokens_used_today": 5
        });
        let shown = row(&key);
        assert_eq!(shown["scope"], "a,b");
        assert_eq!(shown["requests_per_minute"], 3);
        assert_eq!(shown["tokens_per_day"], "-");
        assert_eq!(shown["tokens_left_today"], "-");
        let all = row(&json!({"all_endpoints": true, "limits": {}}));
        assert_eq!(all["scope"], "all");
    }

    #[test]
    fn only_the_limits_given_are_sent() {
        let args = LimitArgs {
            requests_per_minute: Some(60),
            tokens_per_minute: None,
            tokens_per_day: Some(0),
        };
        assert!(args.given());
        assert_eq!(
            args.json(),
            json!({"requests_per_minute": 60, "tokens_per_day": 0})
        );
    }
}
