//! Settings from `EINSORA_*` environment variables, read and validated before any port is bound.
//!
//! Callers supply every default (the Solo one), as text parsed like a set value, so a default
//! and an override can never mean different things. An empty variable counts as unset.

mod parse;

/// The grammars of a duration and a size setting, for what reads one elsewhere (a CLI flag, a
/// setting of more than one form).
pub use parse::{duration as parse_duration, size as parse_size};

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub const DATA_DIR: &str = "EINSORA_DATA_DIR";
const PREFIX: &str = "EINSORA_";
// The data dir's default lives under the user's home, so HOME travels with the settings; the
// CLI's session file under XDG_CONFIG_HOME.
const HOME: &str = "HOME";
const XDG_CONFIG_HOME: &str = "XDG_CONFIG_HOME";

/// A setting that is missing a requirement, named so the operator can find it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{setting}: {problem}")]
pub struct ConfigError {
    setting: String,
    problem: String,
}

impl ConfigError {
    pub fn new(setting: &str, problem: impl Into<String>) -> Self {
        Self {
            setting: setting.to_owned(),
            problem: problem.into(),
        }
    }

    pub fn setting(&self) -> &str {
        &self.setting
    }
}

/// A value that must not reach a log or an error; `Debug` prints no part of it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// A snapshot of the settings; the typed getters validate as they read.
#[derive(Clone, Default)]
pub struct Settings {
    vars: BTreeMap<String, OsString>,
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.vars.keys()).finish()
    }
}

impl Settings {
    /// The `EINSORA_*` variables (and HOME, XDG_CONFIG_HOME) of this process: the one place
    /// the environment is read.
    #[allow(clippy::disallowed_methods)]
    pub fn from_env() -> Self {
        let vars = std::env::vars_os()
            .filter_map(|(name, value)| {
                let name = name.into_string().ok()?;
                let kept = name.starts_with(PREFIX) || name == HOME || name == XDG_CONFIG_HOME;
                kept.then_some((name, value))
            })
            .collect();
        Self { vars }
    }

    /// Exactly these variables, nothing from the process environment.
    pub fn from_map<K, V>(vars: impl IntoIterator<Item = (K, V)>) -> Self
    where
        K: Into<String>,
        V: Into<OsString>,
    {
        let vars = vars
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        Self { vars }
    }

    /// These settings with `name` set to `value` (what a supervisor hands its children).
    pub fn with(mut self, name: &str, value: impl Into<OsString>) -> Self {
        self.vars.insert(name.to_owned(), value.into());
        self
    }

    fn raw(&self, name: &str) -> Option<&OsStr> {
        self.vars
            .get(name)
            .map(OsString::as_os_str)
            .filter(|v| !v.is_empty())
    }

    /// The setting (or `default`) through `parse`, which answers what is wrong as a phrase that
    /// follows the value: `Err("is not a number")` becomes `NAME: "x" is not a number`.
    pub fn parse_with<T>(
        &self,
        name: &str,
        default: &str,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Result<T, ConfigError> {
        let value = self.text(name, default, false)?;
        parse(value).map_err(|problem| ConfigError::new(name, format!("{value:?} {problem}")))
    }

    fn text<'a>(
        &'a self,
        name: &str,
        default: &'a str,
        secret: bool,
    ) -> Result<&'a str, ConfigError> {
        match self.raw(name) {
            None => Ok(default),
            Some(raw) => raw.to_str().ok_or_else(|| {
                let shown = if secret {
                    "the value".to_owned()
                } else {
                    format!("{raw:?}")
                };
                ConfigError::new(name, format!("{shown} is not valid UTF-8"))
            }),
        }
    }

    pub fn string(&self, name: &str, default: &str) -> Result<String, ConfigError> {
        self.text(name, default, false).map(str::to_owned)
    }

    /// An `ip:port` address, e.g. `127.0.0.1:8080` or `[::1]:8443`.
    pub fn socket_addr(&self, name: &str, default: &str) -> Result<SocketAddr, ConfigError> {
        self.parse_with(name, default, |v| {
            v.parse()
                .map_err(|_| "is not a socket address (ip:port, e.g. 127.0.0.1:8080)".to_owned())
        })
    }

    /// A [`Settings::duration`] that must be more than zero (an interval, a timeout).
    pub fn positive_duration(&self, name: &str, default: &str) -> Result<Duration, ConfigError> {
        match self.duration(name, default)? {
            zero if zero.is_zero() => Err(ConfigError::new(name, "must be more than zero")),
            d => Ok(d),
        }
    }

    /// A duration such as `30s`, `500ms`, `2m`, `1h` or `1m30s`.
    pub fn duration(&self, name: &str, default: &str) -> Result<Duration, ConfigError> {
        self.parse_with(name, default, |v| {
            parse::duration(v)
                .ok_or_else(|| "is not a duration (e.g. 30s, 500ms, 2m, 1h30m)".to_owned())
        })
    }

    /// A number of bytes: `1048576`, `512KiB`, `20MiB`, `2GiB`, `1TiB`.
    pub fn size(&self, name: &str, default: &str) -> Result<u64, ConfigError> {
        self.parse_with(name, default, parse::size)
    }

    /// A path, made absolute against the current directory so that it means the same in every
    /// process that is handed it.
    pub fn path(&self, name: &str, default: &Path) -> Result<PathBuf, ConfigError> {
        let path = self
            .raw(name)
            .map_or_else(|| default.to_path_buf(), PathBuf::from);
        absolute(name, &path)
    }

    /// A path with no default; `None` when unset.
    pub fn optional_path(&self, name: &str) -> Result<Option<PathBuf>, ConfigError> {
        self.raw(name)
            .map(|raw| absolute(name, Path::new(raw)))
            .transpose()
    }

    /// The names set (an empty one counts as unset), in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.vars
            .iter()
            .filter(|(_, value)| !value.is_empty())
            .map(|(name, _)| name.as_str())
    }

    /// Whether the operator set this variable (an empty one counts as unset).
    pub fn is_set(&self, name: &str) -> bool {
        self.raw(name).is_some()
    }

    /// One word from a fixed list, e.g. `("agent", Backend::Agent)`.
    pub fn choice<T: Copy>(
        &self,
        name: &str,
        choices: &[(&str, T)],
        default: &str,
    ) -> Result<T, ConfigError> {
        self.parse_with(name, default, |v| {
            choices
                .iter()
                .find(|(word, _)| *word == v)
                .map(|&(_, value)| value)
                .ok_or_else(|| {
                    let words: Vec<&str> = choices.iter().map(|(w, _)| *w).collect();
                    format!("is not one of {}", words.join(", "))
                })
        })
    }

    /// A URL whose scheme is one of `schemes` (`http` and `https` also need a host).
    pub fn url(&self, name: &str, schemes: &[&str], default: &str) -> Result<String, ConfigError> {
        self.parse_with(name, default, |v| {
            parse::url(v, schemes).map(|()| v.to_owned())
        })
    }

    /// A secret with no default (a token, a key); `None` when unset.
    pub fn secret(&self, name: &str) -> Result<Option<Secret>, ConfigError> {
        self.raw(name)
            .map(|_| self.text(name, "", true).map(|v| Secret(v.to_owned())))
            .transpose()
    }

    /// `EINSORA_DATA_DIR`, else `~/.local/share/einsora` (Linux) or
    /// `~/Library/Application Support/Einsora` (macOS).
    pub fn data_dir(&self) -> Result<PathBuf, ConfigError> {
        let dir = match (self.raw(DATA_DIR), self.raw(HOME)) {
            (Some(dir), _) => PathBuf::from(dir),
            (None, Some(home)) => Path::new(home).join(platform_data_dir()),
            (None, None) => {
                return Err(ConfigError::new(
                    DATA_DIR,
                    "is not set, and there is no HOME to put the default under",
                ));
            }
        };
        absolute(DATA_DIR, &dir)
    }
}

fn platform_data_dir() -> &'static str {
    if cfg!(target_os = "macos") {
        "Library/Application Support/Einsora"
    } else {
        ".local/share/einsora"
    }
}

fn absolute(name: &str, path: &Path) -> Result<PathBuf, ConfigError> {
    std::path::absolute(path)
        .map_err(|err| ConfigError::new(name, format!("{path:?} cannot be made absolute: {err}")))
}

#[cfg(test)]
mod tests;
