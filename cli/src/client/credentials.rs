//! Who the CLI is: EINSORA_TOKEN (an API token), or the session `einsora login` saved.

use std::path::PathBuf;

use anyhow::Context;
use hyper::Method;
use hyper::http::request::Builder;
use serde_json::{Map, Value, json};

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

/// The cookie that holds the proof of an earlier sign-in, which `einsora login` keeps and
/// presents so that other clients' failed sign-ins don't delay it (docs/security.md).
pub const KNOWN_CLIENT_COOKIE: &str = "einsora_client";

/// The CLI's saved state, owner-only: for each server it signed in to, its session and the
/// proof of the last sign-in, so signing in to one server never signs another out:
/// `{"servers": {"https://a.example": {"session": …, "csrf_token": …, "known_client": …}}}`.
/// A file of the older one-server shape (those fields at the top, with `server`) is read as
/// that server's entry, and written back in the new shape.
pub struct SavedSession {
    path: PathBuf,
}

impl SavedSession {
    /// EINSORA_CLI_CONFIG, else $XDG_CONFIG_HOME/einsora/cli.json, else ~/.config/einsora/cli.json.
    pub fn locate() -> anyhow::Result<Self> {
        let settings = einsora_runtime::settings::Settings::from_env();
        let path = match (
            settings.optional_path("EINSORA_CLI_CONFIG")?,
            // The XDG spec says to ignore a relative one.
            settings.optional_path("XDG_CONFIG_HOME").ok().flatten(),
            settings.optional_path("HOME").ok().flatten(),
        ) {
            (Some(path), _, _) => path,
            (None, Some(config), _) => config.join("einsora/cli.json"),
            (None, None, Some(home)) => home.join(".config/einsora/cli.json"),
            _ => anyhow::bail!(
                "EINSORA_CLI_CONFIG is not set and there is no HOME to keep a session in"
            ),
        };
        Ok(SavedSession { path })
    }

    /// Where `einsora ssh` keeps VMs' host keys: beside the saved sessions.
    pub fn known_hosts(&self) -> PathBuf {
        self.path.with_file_name("known_hosts")
    }

    /// Every server's entry, by server; none if nothing is saved yet.
    fn read(&self) -> anyhow::Result<Map<String, Value>> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Map::new()),
            Err(e) => return Err(e).with_context(|| format!("reading {}", self.path.display())),
        };
        let saved: Value = serde_json::from_str(&text)
            .with_context(|| format!("{} is not valid JSON: log in again", self.path.display()))?;
        if let Some(servers) = saved["servers"].as_object() {
            return Ok(servers.clone());
        }
        let mut servers = Map::new();
        if let Some(server) = saved["server"].as_str() {
            let mut entry = saved.clone();
            if let Some(fields) = entry.as_object_mut() {
                fields.remove("server");
            }
            servers.insert(server.to_owned(), entry);
        }
        Ok(servers)
    }

    /// The session saved for `server`, if any.
    pub fn load(&self, server: &str) -> anyhow::Result<Credentials> {
        let servers = self.read()?;
        let Some(entry) = servers.get(server) else {
            return Ok(Credentials::None);
        };
        match (entry["session"].as_str(), entry["csrf_token"].as_str()) {
            (Some(cookie), Some(csrf)) => Ok(Credentials::Session {
                cookie: cookie.to_owned(),
                csrf: csrf.to_owned(),
            }),
            _ => Ok(Credentials::None),
        }
    }

    /// The proof of the last sign-in to `server`, if one is kept (a state that can't be read
    /// has none: logging in is what repairs it).
    pub fn known_client(&self, server: &str) -> Option<String> {
        let servers = self.read().ok()?;
        servers.get(server)?["known_client"]
            .as_str()
            .map(str::to_owned)
    }

    /// Saves `server`'s session (and proof), leaving every other server's as it was. A state
    /// that can't be read is replaced.
    pub fn save(
        &self,
        server: &str,
        cookie: &str,
        csrf: &str,
        known_client: Option<&str>,
    ) -> anyhow::Result<()> {
        let mut servers = self.read().unwrap_or_default();
        let mut entry = json!({ "session": cookie, "csrf_token": csrf });
        if let Some(proof) = known_client {
            entry["known_client"] = proof.into();
        }
        servers.insert(server.to_owned(), entry);
        self.write(servers)
    }

    fn write(&self, servers: Map<String, Value>) -> anyhow::Result<()> {
        use std::io::Write;
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        if servers.is_empty() {
            return match std::fs::remove_file(&self.path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
                _ => Ok(()),
            };
        }
        if let Some(dir) = self.path.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&self.path)
            .with_context(|| format!("writing {}", self.path.display()))?;
        let body = json!({ "servers": servers });
        file.write_all(serde_json::to_string_pretty(&body)?.as_bytes())?;
        Ok(())
    }

    /// Forgets `server`'s session, keeping only the proof of the sign-in for the next one, and
    /// every other server's as it was.
    pub fn forget(&self, server: &str) -> anyhow::Result<()> {
        let mut servers = self.read().unwrap_or_default();
        let proof = servers
            .get(server)
            .and_then(|entry| entry["known_client"].as_str().map(str::to_owned));
        match proof {
            Some(proof) => {
                servers.insert(server.to_owned(), json!({ "known_client": proof }));
            }
            None => {
                servers.remove(server);
            }
        }
        self.write(servers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logging_out_forgets_the_session_but_keeps_the_proof_of_the_sign_in() {
        let dir = tempfile::tempdir().unwrap();
        let saved = SavedSession {
            path: dir.path().join("einsora/cli.json"),
        };
        let server = "http://127.0.0.1:8080";
        assert_eq!(saved.known_client(server), None);
        saved.save(server, "sid", "csrf", Some("v1.proof")).unwrap();
        assert!(matches!(
            saved.load(server).unwrap(),
            Credentials::Session { .. }
        ));
        assert_eq!(saved.known_client(server).as_deref(), Some("v1.proof"));
        assert_eq!(saved.known_client("http://localhost:9090"), None);
        saved.forget(server).unwrap();
        assert!(matches!(saved.load(server).unwrap(), Credentials::None));
        assert_eq!(saved.known_client(server).as_deref(), Some("v1.proof"));
        let text = std::fs::read_to_string(&saved.path).unwrap();
        assert!(!text.contains("sid") && !text.contains("csrf"), "{text}");
        // Without a proof, logging out leaves nothing.
        saved.save(server, "sid", "csrf", None).unwrap();
        saved.forget(server).unwrap();
        assert!(!saved.path.exists());
        // A state that can't be read has no proof, so logging in still works.
        std::fs::write(&saved.path, "{not json").unwrap();
        assert_eq!(saved.known_client(server), None);
    }

    /// Signing in to a second server keeps the first one's session; signing out of one keeps
    /// the other's; a file of the older one-server shape still reads.
    #[test]
    fn each_server_keeps_its_own_session() {
        let dir = tempfile::tempdir().unwrap();
        let saved = SavedSession {
            path: dir.path().join("cli.json"),
        };
        let (a, b) = ("http://127.0.0.1:8080", "https://einsora.lab:8443");
        saved.save(a, "sid-a", "csrf-a", Some("proof-a")).unwrap();
        saved.save(b, "sid-b", "csrf-b", None).unwrap();
        let cookie = |server| match saved.load(server).unwrap() {
            Credentials::Session { cookie, .. } => Some(cookie),
            _ => None,
        };
        assert_eq!(
            cookie(a).as_deref(),
            Some("sid-a"),
            "still signed in to the first"
        );
        assert_eq!(cookie(b).as_deref(), Some("sid-b"));
        saved.forget(b).unwrap();
        assert_eq!(cookie(b), None);
        assert_eq!(
            cookie(a).as_deref(),
            Some("sid-a"),
            "signing out of one keeps the other"
        );
        assert_eq!(saved.known_client(a).as_deref(), Some("proof-a"));

        std::fs::write(
            &saved.path,
            r#"{"server": "http://old:8080", "session": "s", "csrf_token": "c", "known_client": "p"}"#,
        )
        .unwrap();
        assert_eq!(cookie("http://old:8080").as_deref(), Some("s"));
        saved.save(a, "sid-a2", "csrf-a2", None).unwrap();
        assert_eq!(
            cookie("http://old:8080").as_deref(),
            Some("s"),
            "kept when rewritten"
        );
        assert_eq!(cookie(a).as_deref(), Some("sid-a2"));
    }
}
