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

/// The cookie that holds the proof of an earlier sign-in, which `einsora login` keeps and
/// presents so that other clients' failed sign-ins don't delay it (docs/security.md).
pub const KNOWN_CLIENT_COOKIE: &str = "einsora_client";

/// The CLI's saved state: the server, its session and the proof of the last sign-in to it,
/// owner-only.
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

    /// The saved state, if there is any.
    fn read(&self) -> anyhow::Result<Option<Value>> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("reading {}", self.path.display())),
        };
        let saved = serde_json::from_str(&text)
            .with_context(|| format!("{} is not valid JSON: log in again", self.path.display()))?;
        Ok(Some(saved))
    }

    /// The session saved for `server`, if any.
    pub fn load(&self, server: &str) -> anyhow::Result<Credentials> {
        let Some(saved) = self.read()? else {
            return Ok(Credentials::None);
        };
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

    /// The proof of the last sign-in to `server`, if one is kept (a state that can't be read
    /// has none: logging in is what repairs it).
    pub fn known_client(&self, server: &str) -> Option<String> {
        let saved = self.read().ok()??;
        if saved["server"].as_str() != Some(server) {
            return None;
        }
        saved["known_client"].as_str().map(str::to_owned)
    }

    pub fn save(
        &self,
        server: &str,
        cookie: &str,
        csrf: &str,
        known_client: Option<&str>,
    ) -> anyhow::Result<()> {
        let mut body = json!({ "server": server, "session": cookie, "csrf_token": csrf });
        if let Some(proof) = known_client {
            body["known_client"] = proof.into();
        }
        self.write(&body)
    }

    fn write(&self, body: &Value) -> anyhow::Result<()> {
        use std::io::Write;
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
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
        file.write_all(serde_json::to_string_pretty(body)?.as_bytes())?;
        Ok(())
    }

    /// Forgets the session, keeping only the proof of the sign-in for the next one.
    pub fn forget(&self) -> anyhow::Result<()> {
        let kept = self.read().ok().flatten().and_then(|saved| {
            let (server, proof) = (saved["server"].as_str()?, saved["known_client"].as_str()?);
            Some(json!({ "server": server, "known_client": proof }))
        });
        if let Some(kept) = kept {
            return self.write(&kept);
        }
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
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
        saved.forget().unwrap();
        assert!(matches!(saved.load(server).unwrap(), Credentials::None));
        assert_eq!(saved.known_client(server).as_deref(), Some("v1.proof"));
        let text = std::fs::read_to_string(&saved.path).unwrap();
        assert!(!text.contains("sid") && !text.contains("csrf"), "{text}");
        // Without a proof, logging out leaves nothing.
        saved.save(server, "sid", "csrf", None).unwrap();
        saved.forget().unwrap();
        assert!(!saved.path.exists());
        // A state that can't be read has no proof, so logging in still works.
        std::fs::write(&saved.path, "{not json").unwrap();
        assert_eq!(saved.known_client(server), None);
    }
}
