//! EINSORA_DATABASE_URL: `sqlite:<path>` or `postgres://…`, validated before anything opens.

use std::fmt;
use std::path::PathBuf;

use einsora_runtime::settings::{ConfigError, Settings};

use crate::StoreError;

pub const SETTING: &str = "EINSORA_DATABASE_URL";

#[derive(Clone, PartialEq, Eq)]
pub enum DatabaseUrl {
    Sqlite {
        path: PathBuf,
    },
    /// The URL as given (it may hold a password: never print it, use `Display`).
    Postgres {
        url: String,
        redacted: String,
    },
}

impl DatabaseUrl {
    /// The setting, or Solo's SQLite file in the data directory. The value may hold a password,
    /// so it is read as a secret and never echoed.
    pub fn from_settings(settings: &Settings) -> Result<Self, ConfigError> {
        let bad = |e: StoreError| ConfigError::new(SETTING, config_problem(e));
        match settings.secret(SETTING)? {
            Some(raw) => Self::parse(raw.expose()).map_err(bad),
            None => {
                let path = settings.data_dir()?.join("einsora.db");
                Ok(DatabaseUrl::Sqlite { path })
            }
        }
    }

    pub fn parse(raw: &str) -> Result<Self, StoreError> {
        let bad = |problem: String| StoreError::Config {
            setting: SETTING,
            problem,
        };
        let raw = raw.trim();
        if let Some(path) = raw.strip_prefix("sqlite:") {
            let path = path.strip_prefix("//").unwrap_or(path);
            let path = path.split('?').next().unwrap_or_default();
            if path.is_empty() || path == ":memory:" {
                return Err(bad(
                    "sqlite: needs a file path, e.g. sqlite:/var/lib/einsora/einsora.db".into(),
                ));
            }
            return Ok(DatabaseUrl::Sqlite {
                path: PathBuf::from(path),
            });
        }
        let Some((scheme, rest)) = raw.split_once("://") else {
            return Err(bad(format!(
                "{:?} is not a database URL: use sqlite:<path> or postgres://user@host/db",
                redact(raw)
            )));
        };
        if scheme != "postgres" && scheme != "postgresql" {
            return Err(bad(format!(
                "unsupported database {scheme:?}: use sqlite:<path> or postgres://user@host/db"
            )));
        }
        let authority = rest.split(['/', '?']).next().unwrap_or_default();
        let host = authority.rsplit('@').next().unwrap_or_default();
        let has_socket_host = rest.contains("host=");
        if host.is_empty() && !has_socket_host {
            return Err(bad(format!("{} names no host", redact(raw))));
        }
        if let Some((_, port)) = host.rsplit_once(':')
            && !host.ends_with(']')
            && port.parse::<u16>().is_err()
        {
            return Err(bad(format!("{} has an invalid port {port:?}", redact(raw))));
        }
        Ok(DatabaseUrl::Postgres {
            url: raw.to_owned(),
            redacted: redact(raw),
        })
    }
}

fn config_problem(err: StoreError) -> String {
    match err {
        StoreError::Config { problem, .. } => problem,
        other => other.to_string(),
    }
}

/// The URL with any password replaced by `***`.
fn redact(raw: &str) -> String {
    let Some((scheme, rest)) = raw.split_once("://") else {
        return raw.chars().take(120).collect();
    };
    let (authority, tail) = match rest.find(['/', '?']) {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _password)) => format!("{user}:***@{host}"),
            None => format!("{userinfo}@{host}"),
        },
        None => authority.to_owned(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) if query.contains("password=") => format!("{path}?***"),
        _ => tail.to_owned(),
    };
    format!("{scheme}://{authority}{tail}")
}

impl fmt::Display for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DatabaseUrl::Sqlite { path } => write!(f, "sqlite:{}", path.display()),
            DatabaseUrl::Postgres { redacted, .. } => f.write_str(redacted),
        }
    }
}

impl fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DatabaseUrl({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_engines() {
        assert_eq!(
            DatabaseUrl::parse("sqlite:/tmp/e.db").unwrap(),
            DatabaseUrl::Sqlite {
                path: "/tmp/e.db".into()
            }
        );
        assert_eq!(
            DatabaseUrl::parse("sqlite:///tmp/e.db").unwrap(),
            DatabaseUrl::Sqlite {
                path: "/tmp/e.db".into()
            }
        );
        assert!(matches!(
            DatabaseUrl::parse("postgres://u@127.0.0.1:5432/db").unwrap(),
            DatabaseUrl::Postgres { .. }
        ));
    }

    #[test]
    fn errors_name_the_setting_and_hide_passwords() {
        for bad in [
            "mysql://u:hunter2@h/db",
            "nonsense",
            "sqlite:",
            "postgres://u:hunter2@/db",
            "postgres://u:hunter2@h:99999/db",
        ] {
            let msg = DatabaseUrl::parse(bad).unwrap_err().to_string();
            assert!(msg.starts_with("EINSORA_DATABASE_URL: "), "{msg}");
            assert!(!msg.contains("hunter2"), "{msg}");
        }
        let url = DatabaseUrl::parse("postgres://u:hunter2@h/db?sslmode=disable").unwrap();
        assert_eq!(url.to_string(), "postgres://u:***@h/db?sslmode=disable");
    }
}
