//! `einsora teams …` and `einsora quotas …`: a tenant's teams, and the quotas of the tenant, its
//! teams and its users (owners and admins change them; everyone reads them).

use anyhow::Context;
use clap::Subcommand;
use hyper::Method;
use serde_json::{Value, json};

use super::commands::segment;
use super::http::Api;
use super::output::{self, Column};

#[derive(Debug, Subcommand)]
pub enum TeamCommand {
    /// Your tenant's teams.
    List,
    /// Make a team.
    Create { name: String },
    /// Delete a team (by name or ID): its members are left in no team, its quotas go.
    Delete { team: String },
}

#[derive(Debug, Subcommand)]
pub enum QuotaCommand {
    /// Every quota of your tenant, its teams and its users, with what each holds now.
    List,
    /// Set a quota for a class: the tenant's (`*` for its default), a team's (--team) or a
    /// user's (--user), in the class's units (GPUs; workloads for CPU classes), and for a CPU
    /// class in CPUs and GiB of memory. It sets the whole row: a limit left out is none, and
    /// with none at all the tenant's is unlimited and a team's or user's row goes.
    Set {
        /// A class (see `einsora catalog`), or `*` for the tenant's default.
        class: String,
        /// A number, or `unlimited` (the same as leaving it out).
        limit: Option<String>,
        /// The CPUs its workloads of a CPU class may hold at once.
        #[arg(long)]
        cpus: Option<u32>,
        /// The GiB of memory its workloads of a CPU class may hold at once.
        #[arg(long)]
        memory_gib: Option<u32>,
        #[arg(long, conflicts_with = "user")]
        team: Option<String>,
        /// By e-mail or ID.
        #[arg(long)]
        user: Option<String>,
    },
}

const TEAMS: &[Column] = &[("ID", "id"), ("NAME", "name"), ("MEMBERS", "members")];
const QUOTAS: &[Column] = &[
    ("SCOPE", "scope"),
    ("WHO", "subject"),
    ("CLASS", "gpu_class"),
    ("LIMIT", "limit"),
    ("HELD", "held"),
    ("CPUS", "cpus"),
    ("HELD CPUS", "held_cpus"),
    ("MEMORY GIB", "memory_gib"),
    ("HELD GIB", "held_memory_gib"),
];

/// [`output::show`], a quota without a limit in units saying `unlimited` in the table (or
/// `-` where it limits CPUs or memory instead).
fn show(json: bool, value: &Value, field: &str, columns: &[Column]) -> anyhow::Result<()> {
    let mut value = value.clone();
    if !json {
        for row in value[field].as_array_mut().into_iter().flatten() {
            let unset = |field: &str| row.get(field).is_none_or(Value::is_null);
            if unset("limit") && unset("cpus") && unset("memory_gib") && !unset("gpu_class") {
                row["limit"] = "unlimited".into();
            }
        }
    }
    output::show(json, &value, Some(field), columns)
}

/// A team's ID, from its name or ID.
pub(super) async fn team_id(api: &Api, team: &str) -> anyhow::Result<String> {
    let listed = api.call(Method::GET, "/v1/teams", None).await?;
    listed["teams"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|t| t["name"].as_str() == Some(team) || t["id"].as_str() == Some(team))
        .and_then(|t| t["id"].as_str())
        .map(str::to_owned)
        .with_context(|| format!("your tenant has no team {team:?} (see `einsora teams list`)"))
}

pub async fn teams(api: &Api, json: bool, command: TeamCommand) -> anyhow::Result<()> {
    match command {
        TeamCommand::List => {
            let value = api.call(Method::GET, "/v1/teams", None).await?;
            show(json, &value, "teams", TEAMS)
        }
        TeamCommand::Create { name } => {
            let made = api
                .call(Method::POST, "/v1/teams", Some(json!({ "name": name })))
                .await?;
            show(json, &json!({ "teams": [made] }), "teams", TEAMS)
        }
        TeamCommand::Delete { team } => {
            let id = team_id(api, &team).await?;
            api.call(
                Method::DELETE,
                &format!("/v1/teams/{}", segment(&id)?),
                None,
            )
            .await?;
            eprintln!("deleted team {team}");
            Ok(())
        }
    }
}

pub async fn quotas(api: &Api, json: bool, command: QuotaCommand) -> anyhow::Result<()> {
    let value = match command {
        QuotaCommand::List => api.call(Method::GET, "/v1/quotas", None).await?,
        QuotaCommand::Set {
            class,
            limit,
            cpus,
            memory_gib,
            team,
            user,
        } => {
            if limit.is_none() && cpus.is_none() && memory_gib.is_none() {
                anyhow::bail!(
                    "say the limit: a number of units, `unlimited`, or --cpus or --memory-gib"
                );
            }
            let (scope, subject) = match (team, user) {
                (Some(team), _) => ("team", team_id(api, &team).await?),
                (_, Some(user)) => ("user", super::users::user_id(api, &user).await?),
                _ => ("tenant", String::new()),
            };
            let mut body = json!({ "scope": scope, "subject_id": subject, "gpu_class": class });
            if let Some(limit) = limit.filter(|l| l != "unlimited") {
                let units: u32 = limit
                    .parse()
                    .with_context(|| format!("{limit:?} is neither a number nor `unlimited`"))?;
                body["limit"] = units.into();
            }
            if let Some(cpus) = cpus {
                body["cpus"] = cpus.into();
            }
            if let Some(memory_gib) = memory_gib {
                body["memory_gib"] = memory_gib.into();
            }
            api.call(Method::PUT, "/v1/quotas", Some(body)).await?
        }
    };
    show(json, &value, "quotas", QUOTAS)
}
