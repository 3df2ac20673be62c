//! `einsora users …`: a tenant's users, roles, invites and password resets, and
//! `einsora accept-invite` / `einsora reset-password` for the person given a link.
//!
//! Einsora sends no e-mail: an invite or a reset is printed once, as a link into the dashboard
//! (`<server>/#/invite/<secret>`), for the admin to pass on.

use std::io::Read;

use anyhow::{Context, bail};
use clap::Subcommand;
use hyper::Method;
use serde_json::{Map, Value, json};

use super::commands::segment;
use super::http::Api;
use super::output::{self, Column};

#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Your tenant's users and their roles.
    List,
    /// Invite someone by e-mail (owners and admins): prints a one-time link to pass on.
    Invite {
        email: String,
        /// owner, admin or member (an admin invites members only).
        #[arg(long, default_value = "member")]
        role: String,
        /// RFC 3339 expiry (default: 7 days; at most 30).
        #[arg(long)]
        expires_at: Option<String>,
    },
    /// Your tenant's invites, used, revoked and expired ones included.
    Invites,
    /// Revoke an unused invite at once, by ID.
    RevokeInvite { id: String },
    /// Give a user (by e-mail or ID) another role.
    SetRole { user: String, role: String },
    /// Put a user in a team (by name or ID), or in none (`none`).
    SetTeam { user: String, team: String },
    /// Disable a user: their sessions end and API tokens are revoked at once.
    Disable { user: String },
    /// Let a disabled user sign in again (their old tokens stay revoked).
    Enable { user: String },
    /// Remove a user who owns no live workloads or machines.
    Remove { user: String },
    /// A one-time password-reset link for a user (valid 24 hours).
    ResetPassword { user: String },
}

const USERS: &[Column] = &[
    ("ID", "id"),
    ("EMAIL", "email"),
    ("NAME", "display_name"),
    ("ROLE", "role"),
    ("DISABLED", "disabled_at"),
];

const INVITES: &[Column] = &[
    ("ID", "id"),
    ("EMAIL", "email"),
    ("ROLE", "role"),
    ("EXPIRES", "expires_at"),
    ("USED", "used_at"),
    ("REVOKED", "revoked_at"),
];

/// The dashboard page that takes a secret of `kind` (`invite`, `reset`).
fn link(server: &str, kind: &str, secret: &str) -> String {
    format!("{}/#/{kind}/{secret}", server.trim_end_matches('/'))
}

/// The secret of a link (or a bare secret), for the accepting commands.
fn secret_of(link_or_secret: &str) -> &str {
    link_or_secret
        .rsplit('/')
        .next()
        .unwrap_or(link_or_secret)
        .trim()
}

/// The ID of a user named by ID or e-mail.
pub(super) async fn user_id(api: &Api, user: &str) -> anyhow::Result<String> {
    if !user.contains('@') {
        return Ok(segment(user)?.to_owned());
    }
    let listed = api.call(Method::GET, "/v1/users", None).await?;
    let wanted = user.trim().to_lowercase();
    listed["users"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|u| u["email"].as_str() == Some(wanted.as_str()))
        .and_then(|u| u["id"].as_str())
        .map(str::to_owned)
        .with_context(|| format!("your tenant has no user {user}"))
}

async fn change(api: &Api, user: &str, body: Value) -> anyhow::Result<Value> {
    let id = user_id(api, user).await?;
    api.call(Method::PATCH, &format!("/v1/users/{id}"), Some(body))
        .await
}

pub async fn run(api: &Api, json: bool, command: UserCommand) -> anyhow::Result<()> {
    let show = |value: Value, field: Option<&str>, columns: &[Column]| {
        output::show(json, &value, field, columns)
    };
    match command {
        UserCommand::List => show(
            api.call(Method::GET, "/v1/users", None).await?,
            Some("users"),
            USERS,
        ),
        UserCommand::Invite {
            email,
            role,
            expires_at,
        } => {
            let mut body = Map::new();
            body.insert("email".into(), email.into());
            body.insert("role".into(), role.into());
            if let Some(at) = expires_at {
                body.insert("expires_at".into(), at.into());
            }
            let value = api
                .call(Method::POST, "/v1/invites", Some(Value::Object(body)))
                .await?;
            let secret = value["secret"].as_str().unwrap_or_default();
            shown_once(api, json, &value, "invite", secret, "invite")
        }
        UserCommand::Invites => show(
            api.call(Method::GET, "/v1/invites", None).await?,
            Some("invites"),
            INVITES,
        ),
        UserCommand::RevokeInvite { id } => {
            let path = format!("/v1/invites/{}", segment(&id)?);
            show(api.call(Method::DELETE, &path, None).await?, None, INVITES)
        }
        UserCommand::SetRole { user, role } => show(
            change(api, &user, json!({ "role": role })).await?,
            None,
            USERS,
        ),
        UserCommand::SetTeam { user, team } => {
            let team = match team.as_str() {
                "none" => String::new(),
                named => super::quotas::team_id(api, named).await?,
            };
            show(
                change(api, &user, json!({ "team_id": team })).await?,
                None,
                USERS,
            )
        }
        UserCommand::Disable { user } => show(
            change(api, &user, json!({ "disabled": true })).await?,
            None,
            USERS,
        ),
        UserCommand::Enable { user } => show(
            change(api, &user, json!({ "disabled": false })).await?,
            None,
            USERS,
        ),
        UserCommand::Remove { user } => {
            let id = user_id(api, &user).await?;
            api.call(Method::DELETE, &format!("/v1/users/{id}"), None)
                .await?;
            eprintln!("removed {user}");
            Ok(())
        }
        UserCommand::ResetPassword { user } => {
            let id = user_id(api, &user).await?;
            let path = format!("/v1/users/{id}/password-reset");
            let value = api.call(Method::POST, &path, Some(json!({}))).await?;
            let secret = value["secret"].as_str().unwrap_or_default();
            shown_once(api, json, &value, "reset", secret, "password reset")
        }
    }
}

/// Sets whom the caller trusts with their machine; the machine as the API answers.
pub async fn trust(api: &Api, machine: &str, users: &[String]) -> anyhow::Result<Value> {
    let mut ids = Vec::with_capacity(users.len());
    for user in users {
        ids.push(user_id(api, user).await?);
    }
    let path = format!("/v1/machines/{}/trusted-users", segment(machine)?);
    api.call(Method::PUT, &path, Some(json!({ "user_ids": ids })))
        .await
}

/// Prints a secret's link once (stdout, for scripts), and what to do with it (stderr).
fn shown_once(
    api: &Api,
    json: bool,
    value: &Value,
    page: &str,
    secret: &str,
    what: &str,
) -> anyhow::Result<()> {
    if json {
        return output::json(value);
    }
    if secret.is_empty() {
        bail!("the server's answer has no secret");
    }
    println!("{}", link(api.server(), page, secret));
    eprintln!(
        "This {what} link is shown only now and works once: pass it on privately (Einsora \
         sends no e-mail)."
    );
    Ok(())
}

/// The password a person sets with a link, from stdin.
fn password_from_stdin() -> anyhow::Result<String> {
    let mut password = String::new();
    std::io::stdin()
        .read_to_string(&mut password)
        .context("reading the password from stdin")?;
    Ok(password.trim_end_matches(['\n', '\r']).to_owned())
}

/// `einsora accept-invite <link>`: joins the inviting tenant with a new password.
pub async fn accept_invite(api: &Api, link: &str, name: Option<String>) -> anyhow::Result<()> {
    let body = json!({
        "secret": secret_of(link),
        "display_name": name.unwrap_or_default(),
        "password": password_from_stdin()?,
    });
    let value = api
        .call(Method::POST, "/v1/invites/accept", Some(body))
        .await?;
    eprintln!(
        "you joined {} as {}: sign in with `einsora login --email {} --password-stdin`",
        value["tenant_name"].as_str().unwrap_or_default(),
        value["user"]["email"].as_str().unwrap_or_default(),
        value["user"]["email"].as_str().unwrap_or_default(),
    );
    Ok(())
}

/// `einsora reset-password <link>`: sets a new password with a reset link.
pub async fn reset_password(api: &Api, link: &str) -> anyhow::Result<()> {
    let body = json!({ "secret": secret_of(link), "password": password_from_stdin()? });
    let value = api
        .call(Method::POST, "/v1/password-resets/accept", Some(body))
        .await?;
    eprintln!(
        "the password of {} is set; their other sessions ended",
        value["email"].as_str().unwrap_or_default()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_lead_to_the_dashboard_page_and_back_to_their_secret() {
        let made = link("http://127.0.0.1:8080/", "invite", "ab12");
        assert_eq!(made, "http://127.0.0.1:8080/#/invite/ab12");
        assert_eq!(secret_of(&made), "ab12");
        assert_eq!(secret_of(" ab12\n"), "ab12");
    }
}
