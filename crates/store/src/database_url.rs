//! EINSORA_DATABASE_URL: `sqlite:<path>` or `postgres://…`, validated before anything opens.

use std::fmt;
use std::path::PathBuf;

use einsora_settings::{ConfigError, Settings};

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
            // Roles started from different directories must open the same file.
            let path = std::path::absolute(path)
                .map_err(|e| bad(format!("can't make {path:?} absolute: {e}")))?;
            return Ok(DatabaseUrl::Sqlite { path });
        }
        // Anything else may hold a password anywhere: never echo it whole.
        let Some((scheme, rest)) = raw.split_once("://") else {
            return Err(bad(
                "is not a database URL: use sqlite:<path> or postgres://user@host/db".into(),
            ));
        };
        if scheme != "postgres" && scheme != "postgresql" {
            return Err(bad(format!(
                "unsupported database {:?}: use sqlite:<path> or postgres://user@host/db",
                scheme.chars().take(20).collect::<String>()
            )));
        }
        let redacted = redact(scheme, rest);
        let host_part = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
        let host = host_part.split(['/', '?']).next().unwrap_or_default();
        if host.is_empty() && !rest.contains("host=") {
            return Err(bad(format!("{redacted} names no host")));
        }
        if let Some((_, port)) = host.rsplit_once(':')
            && !host.ends_with(']')
            && port.parse::<u16>().is_err()
        {
            return Err(bad(format!("{redacted} has an invalid port")));
        }
        Ok(DatabaseUrl::Postgres {
            url: raw.to_owned(),
            redacted,
        })
    }
}

fn config_problem(err: StoreError) -> String {
    match err {
        StoreError::Config { problem, .. } => problem,
        other => other.to_string(),
    }
}

/// `scheme://user:***@host/db`: the user info ends at the last `@` (a password may hold `/`,
/// `?` or `@`), and query parameters are dropped if any could be a password.
fn redact(scheme: &str, rest: &str) -> String {
    let (user, host) = match rest.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split(':').next().unwrap_or_default();
            let masked = if userinfo.contains(':') { ":***" } else { "" };
            (format!("{user}{masked}@"), host)
        }
        None => (String::new(), rest),
    };
    let host = match host.split_once('?') {
        Some((path, query)) if query.contains("password") => format!("{path}?***"),
        _ => host.to_owned(),
    };
    format!("{scheme}://{user}{host}")
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
            DatabaseUrl::parse("sqlite:e.db").unwrap(),
            DatabaseUrl::Sqlite {
                path: std::env::current_dir().unwrap().join("e.db")
            }
        );
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
            "host=db user=u password=hunter2",
            "postgres:/u:hunter2@h/db",
            "sqlite:",
            "postgres://u:hunter2@/db",
            "postgres://u:hunter2@h:99999/db",
            "postgres://u:hun/ter2@h:http/db",
            "postgres://u:hun?ter2@h:http/db",
            "postgres://u:hun@ter2@h:http/db",
            "postgres://h:http/db?password=hunter2",
        ] {
            let msg = DatabaseUrl::parse(bad).unwrap_err().to_string();
            assert!(msg.starts_with("EINSORA_DATABASE_URL: "), "{msg}");
            assert!(!msg.contains("hunter2") && !msg.contains("hun"), "{msg}");
        }
        let url = DatabaseUrl::parse("postgres://u:hunter2@h/db?sslmode=disable").unwrap();
        assert_eq!(url.to_string(), "postgres://u:***@h/db?sslmode=disable");
        let url = DatabaseUrl::parse("postgres://u:a/b@c@h:5432/db").unwrap();
        assert_eq!(url.to_string(), "postgres://u:***@h:5432/db");
    }
}
