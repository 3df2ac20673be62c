//! `EINSORA_ACCESS_URL` as the proxy reads it: the scheme and port browsers see, which every
//! notebook's origin shares (`<scheme>://w-<id>.localhost<:port>`), and the host endpoints are
//! served at.

use std::fmt;

use uuid::Uuid;

/// Each notebook is its own site under this name, whatever the public host is.
pub(crate) const NOTEBOOK_SUFFIX: &str = ".localhost";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicUrl {
    https: bool,
    /// Lowercase; an IPv6 address keeps its brackets.
    host: String,
    /// The explicit port, else the scheme's.
    port: u16,
}

impl PublicUrl {
    /// An `http(s)://host[:port][/]` URL: no path, since each notebook is served at its host's
    /// root; no user, query or fragment.
    pub fn parse(url: &str) -> Result<Self, String> {
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| "is not an http(s) URL".to_owned())?;
        let https = match scheme.to_ascii_lowercase().as_str() {
            "http" => false,
            "https" => true,
            _ => return Err("is not an http(s) URL".into()),
        };
        let authority = rest.strip_suffix('/').unwrap_or(rest);
        if authority.contains(['/', '?', '#']) {
            return Err(
                "must not have a path, query or fragment: notebooks are served at \
                 the root of their own hosts"
                    .into(),
            );
        }
        if authority.contains('@') {
            return Err("must not carry a user name or password".into());
        }
        let (host, port) = split_port(authority);
        if host.is_empty() {
            return Err("has no host".into());
        }
        let port = match port {
            None => default_port(https),
            Some(port) => port
                .parse::<u16>()
                .ok()
                .filter(|p| *p != 0 && port.bytes().all(|b| b.is_ascii_digit()))
                .ok_or_else(|| "has a port that is not a number from 1 to 65535".to_owned())?,
        };
        Ok(PublicUrl {
            https,
            host: host.to_ascii_lowercase(),
            port,
        })
    }

    pub(crate) fn is_https(&self) -> bool {
        self.https
    }

    pub(crate) fn host(&self) -> &str {
        &self.host
    }

    /// Whether a Host header's port (none, or the digits after `:`) is the one browsers use.
    pub(crate) fn port_matches(&self, port: Option<&str>) -> bool {
        port.is_none_or(|p| p == self.port.to_string())
    }

    /// A notebook's origin as its browser writes it: the default port left out.
    pub(crate) fn notebook_origin(&self, workload: Uuid) -> String {
        format!(
            "{}://w-{workload}{NOTEBOOK_SUFFIX}{}",
            self.scheme(),
            self.port_suffix()
        )
    }

    fn scheme(&self) -> &'static str {
        if self.https { "https" } else { "http" }
    }

    fn port_suffix(&self) -> String {
        if self.port == default_port(self.https) {
            String::new()
        } else {
            format!(":{}", self.port)
        }
    }
}

impl Default for PublicUrl {
    fn default() -> Self {
        PublicUrl {
            https: false,
            host: "localhost".into(),
            port: 8090,
        }
    }
}

impl fmt::Display for PublicUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}{}", self.scheme(), self.host, self.port_suffix())
    }
}

fn default_port(https: bool) -> u16 {
    if https { 443 } else { 80 }
}

/// `host[:port]`; a colon inside IPv6 brackets is not a port's.
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
