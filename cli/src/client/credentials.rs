//! Who the CLI is: EINSORA_TOKEN (an API token), or the session `einsora login` saved.

use std::path::{Path, PathBuf};

use anyhow::Context;
use hyper::Method;
use hyper::http::request::Builder;
use serde_json::{Value, json};

/// What requests carry. Secrets: never printed.
pub enum Credentials {
    None,
    Token(String),
    Session { cookie: String, csrf: String },
}

impl Credentials {
    pub fn apply(&self, request: Builder, method: &Method) -> Builder {
        match self {
            Credentials::None => request,
            Credentials::Token(token) => request.header("authorization", format!("Bearer {token}")),
            Credentials::Session { cookie, csrf } => {
                let request = request.header("cookie", format!("einsora_session={cookie}"));
                if method == Method::GET || method == Method::HEAD {
                    request
                } else {
                    request.header("x-csrf-token", csrf)
                }
            }
        }
    }
}

/// The CLI's saved state: the server and its session, owner-only.
pub struct SavedSession {
    path: PathBuf,
}

impl SavedSession {
    /// EINSORA_CLI_CONFIG, else $XDG_CONFIG_HOME/einsora/cli.json, else ~/.config/einsora/cli.json.
    pub fn locate() -> anyhow::Result<Self> {
        let path = match (
            std::env::var_os("EINSORA_CLI_CONFIG"),
            std::env::var_os("XDG_CONFIG_HOME"),
            std::env::var_os("HOME"),
        ) {
            (Some(path), _, _) => PathBuf::from(path),
            (None, Some(config), _) => Path::new(&config).join("einsora/cli.json"),
            (None, None, Some(home)) => Path::new(&home).join(".config/einsora/cli.json"),
            _ => anyhow::bail!(
                "EINSORA_CLI_CONFIG is not set and there is no HOME to keep a session in"
            ),
        };
        Ok(SavedSession { path })
    }

    /// The session saved for `server`, if any.
    pub fn load(&self, server: &str) -> anyhow::Result<Credentials> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Credentials::None),
            Err(e) => return Err(e).with_context(|| format!("reading {}", self.path.display())),
        };
        let saved: Value = serde_json::from_str(&text)
            .with_context(|| format!("{} is not valid JSON: log in again", self.path.display()))?;
        match (
            saved["server"].as_str(),
            saved["session"].as_str(),
            saved["csrf_token"].as_str(),
        ) {
            (Some(s), Some(cookie), Some(csrf)) if s == server => Ok(Credentials::Session {
                cookie: cookie.to_owned(),
                csrf: csrf.to_owned(),
            }),
            _ => Ok(Credentials::None),
        }
    }

    pub fn save(&self, server: &str, cookie: &str, csrf: &str) -> anyhow::Result<()> {
        use std::io::Write;
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        if let Some(dir) = self.path.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        let body = json!({ "server": server, "session": cookie, "csrf_token": csrf });
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&self.path)
            .with_context(|| format!("writing {}", self.path.display()))?;
        file.write_all(serde_json::to_string_pretty(&body)?.as_bytes())?;
        Ok(())
    }

    pub fn forget(&self) -> anyhow::Result<()> {
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
    }
}
