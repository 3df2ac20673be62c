//! `EINSORA_ACCESS_URL` as the proxy reads it: the scheme and port browsers see, which every
//! notebook's origin shares (`<scheme>://w-<id>.localhost<:port>`), and the host endpoints are
//! served at.

use std::fmt;

use einsora_runtime::origin::Origin;
use uuid::Uuid;

/// Each notebook is its own site under this name, whatever the public host is.
pub(crate) const NOTEBOOK_SUFFIX: &str = ".localhost";

/// An origin (`einsora_runtime::origin`): no path, since each notebook is served at its host's
/// root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicUrl(Origin);

impl PublicUrl {
    pub fn parse(url: &str) -> Result<Self, String> {
        Origin::parse(url).map(PublicUrl)
    }

    pub(crate) fn is_https(&self) -> bool {
        self.0.is_https()
    }

    pub(crate) fn host(&self) -> &str {
        self.0.host()
    }

    /// Whether a Host header's port (none, or the digits after `:`) is the one browsers use.
    pub(crate) fn port_matches(&self, port: Option<&str>) -> bool {
        port.is_none_or(|p| p == self.0.port().to_string())
    }

    /// A notebook's origin as its browser writes it: the default port left out.
    pub(crate) fn notebook_origin(&self, workload: Uuid) -> String {
        format!(
            "{}://w-{workload}{NOTEBOOK_SUFFIX}{}",
            self.0.scheme(),
            self.0.port_suffix()
        )
    }
}

impl Default for PublicUrl {
    fn default() -> Self {
        PublicUrl::parse("http://localhost:8090").unwrap_or_else(|e| unreachable!("{e}"))
    }
}

impl fmt::Display for PublicUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// `host[:port]`; a colon inside IPv6 brackets is not a port's. (The proxy matches notebook
/// hosts exactly as written, not case-folded as `origin::Authority` does.)
pub(crate) fn split_port(authority: &str) -> (&str, Option<&str>) {
    match authority.rfind(':') {
        Some(i) if !authority[i..].contains(']') => (&authority[..i], Some(&authority[i + 1..])),
        _ => (authority, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_leave_out_the_default_port() {
        let id = Uuid::nil();
        let url = PublicUrl::parse("http://localhost:8090").unwrap();
        assert_eq!(url, PublicUrl::default());
        assert_eq!(
            url.notebook_origin(id),
            format!("http://w-{id}.localhost:8090")
        );
        let url = PublicUrl::parse("https://Proxy.Example:443/").unwrap();
        assert!(url.is_https());
        assert_eq!(url.host(), "proxy.example");
        assert_eq!(url.notebook_origin(id), format!("https://w-{id}.localhost"));
        assert!(url.port_matches(None) && url.port_matches(Some("443")));
        assert!(!url.port_matches(Some("0443")) && !url.port_matches(Some("")));
        let url = PublicUrl::parse("http://[::1]:9000").unwrap();
        assert_eq!(url.host(), "[::1]");
        assert_eq!(url.to_string(), "http://[::1]:9000");
    }

    #[test]
    fn paths_users_and_bad_ports_are_refused() {
        for bad in [
            "http://localhost:8090/prefix",
            "http://localhost:8090?x",
            "http://u:p@localhost",
            "http://localhost:0",
            "http://localhost:+80",
            "http://localhost:99999",
            "ftp://localhost",
            "http://",
            "localhost:8090",
        ] {
            assert!(PublicUrl::parse(bad).is_err(), "{bad}");
        }
    }
}
