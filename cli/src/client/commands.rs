//! The client commands: each one request (or two) to the JSON API.

use std::io::Read;

use anyhow::Context;
use clap::{Args, Subcommand};
use hyper::Method;
use serde_json::{Map, Value, json};

use super::credentials::{Credentials, KNOWN_CLIENT_COOKIE, SavedSession};
use super::http::Api;
use super::output::{self, Column};

/// Options of the client commands.
#[derive(Debug, Args)]
pub struct Global {
    /// The Einsora server (default: the local Solo, http://<EINSORA_HTTP_ADDR>).
    #[arg(long, env = "EINSORA_SERVER", global = true)]
    server: Option<String>,
    /// Print the API's JSON instead of a table.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Debug, Subcommand)]
pub enum ClientCommand {
    /// Log in and keep a session for the CLI (password on stdin).
    Login {
        #[arg(long)]
        email: String,
        #[arg(long, required = true)]
        password_stdin: bool,
    },
    /// End the saved session.
    Logout,
    /// List your workloads.
    Workloads {
        /// Include deleted workloads.
        #[arg(long)]
        all: bool,
    },
    /// Show a workload's timeline.
    Events { id: String },
    /// Everything known about a workload, as JSON.
    Export { id: String },
    /// What a workload printed (kept 14 days, secrets redacted).
    Logs {
        id: String,
        /// Keep printing new lines as they arrive, until the workload stops.
        #[arg(short, long)]
        follow: bool,
        /// Only the last N lines (at most 1000) before following.
        #[arg(long)]
        tail: Option<u32>,
        /// Only lines printed since then: an RFC 3339 time, or a duration back from now (10m).
        #[arg(long, value_parser = super::logs::since)]
        since: Option<time::OffsetDateTime>,
    },
    /// Launch a workload.
    Launch(Launch),
    /// Stop a workload.
    Stop { id: String },
    /// Start a stopped or failed workload again.
    Start { id: String },
    /// Delete a workload and everything it stored.
    Delete { id: String },
    /// Open a running workload: a notebook's one-time link (for a browser, valid 60 s), or an
    /// endpoint's base URL (for an API token).
    Open { id: String },
    /// SSH into a running VM as `einsora` (the system's `ssh`, through the access proxy; no
    /// port opens). Anything after `--` goes to ssh after the destination: a command to run.
    Ssh {
        id: String,
        /// The private key to log in with (ssh's `-i`).
        #[arg(short = 'i', long)]
        identity: Option<std::path::PathBuf>,
        #[arg(last = true)]
        args: Vec<String>,
    },
    /// One SSH session's bytes between stdin/stdout and a VM: for ssh's ProxyCommand
    /// (`ssh -o ProxyCommand='einsora ssh-proxy <id>' einsora@vm`).
    SshProxy { id: String },
    /// What this installation offers: regions, classes, images.
    Catalog,
    /// Your machines.
    Machines,
    /// API tokens.
    Tokens {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Inference keys (`isk_…`): they call endpoints, scoped and limited, and manage nothing;
    /// and your tenant's inference limits.
    Keys {
        #[command(subcommand)]
        command: super::keys::KeyCommand,
    },
    /// Your tenant's teams.
    Teams {
        #[command(subcommand)]
        command: super::quotas::TeamCommand,
    },
    /// Quotas of your tenant, its teams and its users.
    Quotas {
        #[command(subcommand)]
        command: super::quotas::QuotaCommand,
    },
    /// Your tenant's users: roles, invites, disabling, removal, password resets.
    Users {
        #[command(subcommand)]
        command: super::users::UserCommand,
    },
    /// Let other users of your tenant run their workloads on your machine as your own run
    /// (native processes, plain containers): sets the list, by e-mail or ID; none trusts nobody.
    Trust {
        /// The machine's ID (see `einsora machines`).
        machine: String,
        users: Vec<String>,
    },
    /// Join a tenant with an invite link (your new password on stdin).
    AcceptInvite {
        /// The link you were given (or its secret).
        link: String,
        /// Your name for people (default: your e-mail's local part).
        #[arg(long)]
        name: Option<String>,
        #[arg(long, required = true)]
        password_stdin: bool,
    },
    /// Set a new password with a reset link (the password on stdin).
    ResetPassword {
        /// The link you were given (or its secret).
        link: String,
        #[arg(long, required = true)]
        password_stdin: bool,
    },
    /// Whether Einsora is working: each role, who leads each region, your machines and
    /// workloads (exits non-zero when something is down).
    Status,
    /// Your tenant's activity log: every action through the API, and every call it refused
    /// (the tenant's owner only).
    Activity(super::activity::ActivityArgs),
    /// Usage (hours and tokens, never money) for a period: the hourly records, with
    /// `--by user|team|class` a report summed by user, team or class, or with
    /// `--tokens hour|range` the tokens endpoints used; `--format csv` for a spreadsheet.
    Usage(super::usage::UsageArgs),
}

#[derive(Debug, Args)]
pub struct Launch {
    #[arg(long)]
    kind: String,
    #[arg(long)]
    name: String,
    /// The compute class (see `einsora catalog`).
    #[arg(long = "class")]
    class: String,
    #[arg(long)]
    image: String,
    #[arg(long)]
    region: Option<String>,
    /// An endpoint's model.
    #[arg(long)]
    model: Option<String>,
    /// The name an endpoint serves its model under at `<access URL>/v1` (default: the model
    /// file's name without `.gguf`); endpoints of one name are replicas.
    #[arg(long)]
    served_name: Option<String>,
    /// Scale-to-zero: an endpoint parks (stops) after this long without requests (`10m`,
    /// `1h`; a minute to a week), and a request to it starts it again.
    #[arg(long, value_name = "DURATION", value_parser = idle_seconds)]
    park_after_idle: Option<u64>,
    /// A VM's SSH public key, authorised to log in as `einsora`: a `.pub` file, or the key's
    /// one line. Repeatable.
    #[arg(long = "ssh-key", value_name = "FILE|KEY", value_parser = ssh_key)]
    ssh_keys: Vec<String>,
    /// A VM's root disk in GiB (default: its class's).
    #[arg(long)]
    disk_gib: Option<u32>,
}

/// An SSH public key's one line: the file's (its first line) where `text` names one.
fn ssh_key(text: &str) -> Result<String, String> {
    let path = std::path::Path::new(text);
    if path.is_file() {
        let read = std::fs::read_to_string(path).map_err(|e| format!("{text}: {e}"))?;
        let line = read.lines().map(str::trim).find(|l| !l.is_empty());
        return line
            .map(str::to_owned)
            .ok_or_else(|| format!("{text} holds no key"));
    }
    Ok(text.trim().to_owned())
}

/// An idle time as whole seconds (`90s`, `10m`, `1h30m`); the API checks its range.
fn idle_seconds(text: &str) -> Result<u64, String> {
    let d = einsora_runtime::settings::parse_duration(text)
        .ok_or_else(|| "not a duration (e.g. 10m, 1h, 1h30m)".to_owned())?;
    if d.subsec_nanos() != 0 {
        return Err("use whole seconds".to_owned());
    }
    Ok(d.as_secs())
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a token; its secret is shown once.
    Create {
        #[arg(long)]
        name: String,
        /// RFC 3339 expiry.
        #[arg(long)]
        expires_at: Option<String>,
    },
    /// List your API tokens (never their secrets).
    List,
    /// Revoke an API token at once, by ID.
    Revoke { id: String },
}

const WORKLOADS: &[Column] = &[
    ("ID", "id"),
    ("NAME", "name"),
    ("KIND", "kind"),
    ("CLASS", "gpu_class"),
    ("STATE", "state"),
    ("REGION", "region"),
    ("MACHINE", "machine_id"),
];
const EVENTS: &[Column] = &[
    ("AT", "at"),
    ("FROM", "from_state"),
    ("TO", "to_state"),
    ("REASON", "reason"),
];
const MACHINES: &[Column] = &[
    ("ID", "id"),
    ("NAME", "name"),
    ("REGION", "region"),
    ("OS", "os"),
    ("CPUS", "cpus"),
    ("MEMORY GIB", "memory_gib"),
    ("STATUS", "status"),
];
const CLASSES: &[Column] = &[
    ("CLASS", "name"),
    ("ACCELERATOR", "accelerator"),
    ("DEVICES", "devices"),
    ("CPUS", "cpus"),
    ("MEMORY GIB", "memory_gib"),
];
const TOKENS: &[Column] = &[
    ("ID", "id"),
    ("NAME", "name"),
    ("PREFIX", "prefix"),
    ("CREATED", "created_at"),
    ("EXPIRES", "expires_at"),
];

pub fn run(global: Global, command: ClientCommand, http_addr: &str) -> anyhow::Result<()> {
    let server = global
        .server
        .clone()
        .unwrap_or_else(|| format!("http://{http_addr}"));
    let saved = SavedSession::locate()?;
    let settings = einsora_runtime::settings::Settings::from_env();
    // A link is its own credential: nobody's session or token goes with it.
    let with_a_link = matches!(
        command,
        ClientCommand::AcceptInvite { .. } | ClientCommand::ResetPassword { .. }
    );
    let credentials = match settings.secret("EINSORA_TOKEN")? {
        _ if with_a_link => Credentials::None,
        Some(token) => Credentials::Token(token.expose().to_owned()),
        None => saved.load(&server)?,
    };
    let api = Api::new(server, credentials)?;
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(execute(&api, &saved, &global, command))
}

async fn execute(
    api: &Api,
    saved: &SavedSession,
    global: &Global,
    command: ClientCommand,
) -> anyhow::Result<()> {
    let show = |value: Value, field: Option<&str>, columns: &[Column]| {
        output::show(global.json, &value, field, columns)
    };
    match command {
        ClientCommand::Login { email, .. } => login(api, saved, global, email).await,
        ClientCommand::Logout => {
            api.call(Method::DELETE, "/v1/sessions/current", None)
                .await?;
            saved.forget(api.server())
        }
        ClientCommand::Workloads { all } => {
            let path = if all {
                "/v1/workloads?include_deleted=true"
            } else {
                "/v1/workloads"
            };
            show(
                api.call(Method::GET, path, None).await?,
                Some("workloads"),
                WORKLOADS,
            )
        }
        ClientCommand::Events { id } => {
            let value = api
                .call(
                    Method::GET,
                    &format!("/v1/workloads/{}/events", segment(&id)?),
                    None,
                )
                .await?;
            show(value, Some("events"), EVENTS)
        }
        ClientCommand::Export { id } => output::json(
            &api.call(
                Method::GET,
                &format!("/v1/workloads/{}/export", segment(&id)?),
                None,
            )
            .await?,
        ),
        ClientCommand::Logs {
            id,
            follow,
            tail,
            since,
        } => {
            let reading = super::logs::Reading {
                follow,
                tail,
                since,
            };
            super::logs::show(api, segment(&id)?, &reading).await
        }
        ClientCommand::Launch(launch) => {
            let value = api
                .call(Method::POST, "/v1/workloads", Some(launch_body(launch)))
                .await?;
            show(value, None, WORKLOADS)
        }
        ClientCommand::Stop { id } => action(api, &id, "stop", show).await,
        ClientCommand::Open { id } => {
            let path = format!("/v1/workloads/{}/access", segment(&id)?);
            let grant = api.call(Method::POST, &path, Some(json!({}))).await?;
            if global.json {
                return output::json(&grant);
            }
            let link = grant["notebook"]["link"]
                .as_str()
                .or_else(|| grant["endpoint"]["base_url"].as_str())
                .unwrap_or_default();
            println!("{link}");
            Ok(())
        }
        ClientCommand::Ssh { id, identity, args } => {
            let known_hosts = super::credentials::SavedSession::locate()?.known_hosts();
            super::ssh::ssh(&id, identity.as_deref(), &known_hosts, &args)
        }
        ClientCommand::SshProxy { id } => super::ssh::proxy(api, &id).await,
        ClientCommand::Start { id } => action(api, &id, "start", show).await,
        ClientCommand::Delete { id } => {
            let value = api
                .call(
                    Method::DELETE,
                    &format!("/v1/workloads/{}", segment(&id)?),
                    None,
                )
                .await?;
            show(value, None, WORKLOADS)
        }
        ClientCommand::Catalog => show(
            api.call(Method::GET, "/v1/catalog", None).await?,
            Some("classes"),
            CLASSES,
        ),
        ClientCommand::Machines => {
            let mut listed = api.call(Method::GET, "/v1/machines", None).await?;
            if !global.json {
                output::add_gib(&mut listed["machines"], "memory_bytes", "memory_gib");
            }
            show(listed, Some("machines"), MACHINES)
        }
        ClientCommand::Tokens { command } => tokens(api, global, command, show).await,
        ClientCommand::Keys { command } => super::keys::run(api, global.json, command).await,
        ClientCommand::Users { command } => super::users::run(api, global.json, command).await,
        ClientCommand::Teams { command } => super::quotas::teams(api, global.json, command).await,
        ClientCommand::Quotas { command } => super::quotas::quotas(api, global.json, command).await,
        ClientCommand::Trust { machine, users } => {
            let machine = super::users::trust(api, &machine, &users).await?;
            show(machine, None, MACHINES)
        }
        ClientCommand::AcceptInvite { link, name, .. } => {
            super::users::accept_invite(api, &link, name).await
        }
        ClientCommand::ResetPassword { link, .. } => super::users::reset_password(api, &link).await,
        ClientCommand::Activity(args) => super::activity::show(api, &args, global.json).await,
        ClientCommand::Status => super::status::show(api, global.json).await,
        ClientCommand::Usage(args) => super::usage::show(api, &args, global.json).await,
    }
}

async fn action(
    api: &Api,
    id: &str,
    verb: &str,
    show: impl Fn(Value, Option<&str>, &[Column]) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let path = format!("/v1/workloads/{}/{verb}", segment(id)?);
    show(
        api.call(Method::POST, &path, Some(json!({}))).await?,
        None,
        WORKLOADS,
    )
}

async fn tokens(
    api: &Api,
    global: &Global,
    command: TokenCommand,
    show: impl Fn(Value, Option<&str>, &[Column]) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    match command {
        TokenCommand::Create { name, expires_at } => {
            let mut body = Map::new();
            body.insert("name".into(), name.into());
            if let Some(at) = expires_at {
                body.insert("expires_at".into(), at.into());
            }
            let value = api
                .call(Method::POST, "/v1/tokens", Some(Value::Object(body)))
                .await?;
            if global.json {
                return output::json(&value);
            }
            println!("{}", value["token"].as_str().unwrap_or_default());
            eprintln!("This is the only time the token is shown: keep it now.");
            Ok(())
        }
        TokenCommand::List => show(
            api.call(Method::GET, "/v1/tokens", None).await?,
            Some("tokens"),
            TOKENS,
        ),
        TokenCommand::Revoke { id } => {
            let value = api
                .call(
                    Method::DELETE,
                    &format!("/v1/tokens/{}", segment(&id)?),
                    None,
                )
                .await?;
            show(value, None, TOKENS)
        }
    }
}

async fn login(
    api: &Api,
    saved: &SavedSession,
    global: &Global,
    email: String,
) -> anyhow::Result<()> {
    let mut password = String::new();
    std::io::stdin()
        .read_to_string(&mut password)
        .context("reading the password from stdin")?;
    let password = password.trim_end_matches(['\n', '\r']);
    // The proof of the last sign-in gives this one login limits of its own.
    let known = saved.known_client(api.server());
    let known_cookie = known
        .as_ref()
        .map(|proof| format!("{KNOWN_CLIENT_COOKIE}={proof}"));
    let answer = api
        .send_with_cookie(
            Method::POST,
            "/v1/sessions",
            Some(json!({ "email": email, "password": password, "client": "cli" })),
            known_cookie.as_deref(),
        )
        .await?;
    let cookie_value = |name: &str| {
        let prefix = format!("{name}=");
        answer
            .set_cookie
            .iter()
            .find_map(|c| c.strip_prefix(&prefix)?.split(';').next())
    };
    let cookie = cookie_value("einsora_session")
        .context("the server answered the login without a session cookie")?;
    let csrf = answer.body["csrf_token"]
        .as_str()
        .context("the login answer has no csrf_token")?;
    let proof = cookie_value(KNOWN_CLIENT_COOKIE).or(known.as_deref());
    saved.save(api.server(), cookie, csrf, proof)?;
    if global.json {
        output::json(&answer.body["me"])
    } else {
        eprintln!("logged in to {} as {email}", api.server());
        Ok(())
    }
}

fn launch_body(launch: Launch) -> Value {
    let mut body = json!({
        "kind": launch.kind,
        "name": launch.name,
        "gpu_class": launch.class,
        "image": launch.image,
    });
    if let Some(region) = launch.region {
        body["region"] = region.into();
    }
    if let Some(model) = launch.model {
        body["endpoint"] = json!({ "model": model });
    }
    if let Some(name) = launch.served_name {
        body["endpoint"]["served_name"] = name.into();
    }
    if let Some(seconds) = launch.park_after_idle {
        body["endpoint"]["park_after_idle_s"] = seconds.into();
    }
    if !launch.ssh_keys.is_empty() {
        body["vm"]["ssh_authorized_keys"] = launch.ssh_keys.into();
    }
    if let Some(gib) = launch.disk_gib {
        body["vm"]["disk_gib"] = gib.into();
    }
    body
}

/// An ID as a path segment: IDs are UUIDs, so anything else is refused before it is sent.
pub(super) fn segment(id: &str) -> anyhow::Result<&str> {
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
        anyhow::bail!("{id:?} is not an ID (see `einsora workloads`)");
    }
    Ok(id)
}

/// A query value, percent-encoded (RFC 3339 times carry `+` and `:`).
pub(super) fn query(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_time_is_whole_seconds_and_goes_in_the_endpoints_body() {
        assert_eq!(idle_seconds("10m"), Ok(600));
        assert_eq!(idle_seconds("1h30m"), Ok(5400));
        assert!(idle_seconds("1500ms").is_err());
        assert!(idle_seconds("ten minutes").is_err());
        let launch = Launch {
            kind: "endpoint".into(),
            name: "chat".into(),
            class: "cpu-4c-16g".into(),
            image: "openai-endpoint".into(),
            region: None,
            model: Some("tiny.gguf".into()),
            served_name: None,
            park_after_idle: Some(600),
            ssh_keys: Vec::new(),
            disk_gib: None,
        };
        let body = launch_body(launch);
        assert_eq!(
            body["endpoint"],
            json!({"model": "tiny.gguf", "park_after_idle_s": 600})
        );
        assert!(body.get("vm").is_none());
    }

    #[test]
    fn a_vms_keys_come_from_files_or_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("id.pub");
        std::fs::write(&file, "\nssh-ed25519 AAAA me@host\n").unwrap();
        assert_eq!(
            ssh_key(file.to_str().unwrap()).unwrap(),
            "ssh-ed25519 AAAA me@host"
        );
        assert_eq!(ssh_key(" ssh-rsa BBBB x ").unwrap(), "ssh-rsa BBBB x");
        let empty = dir.path().join("empty.pub");
        std::fs::write(&empty, "\n").unwrap();
        assert!(ssh_key(empty.to_str().unwrap()).is_err());
        let launch = Launch {
            kind: "vm".into(),
            name: "box".into(),
            class: "cpu-1c-2g".into(),
            image: "debian-12".into(),
            region: None,
            model: None,
            served_name: None,
            park_after_idle: None,
            ssh_keys: vec!["ssh-ed25519 AAAA me@host".into()],
            disk_gib: Some(4),
        };
        assert_eq!(
            launch_body(launch)["vm"],
            json!({"ssh_authorized_keys": ["ssh-ed25519 AAAA me@host"], "disk_gib": 4})
        );
    }
}
