//! `EINSORA_ACCESS_URL`: the access proxy's public URL (DESIGN.md, "Pinned interfaces"), one
//! type for the api (which builds notebook links and endpoint base URLs from it) and the proxy
//! (which answers only the hosts and port it names). An origin: the proxy serves each notebook
//! at its own host's root and endpoints at `/e/<id>/v1`, so a path would be a URL nothing
//! answers, and is refused.

use std::fmt;

use crate::origin::Origin;
use crate::settings::{ConfigError, Settings};

pub const SETTING: &str = "EINSORA_ACCESS_URL";
const DEFAULT: &str = "http://localhost:8090";

/// Each notebook is its own site under this name, whatever the public host is.
pub const NOTEBOOK_SUFFIX: &str = ".localhost";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessUrl(Origin);

impl AccessUrl {
    pub fn from_settings(settings: &Settings) -> Result<Self, ConfigError> {
        settings.parse_with(SETTING, DEFAULT, AccessUrl::parse)
    }

    pub fn parse(url: &str) -> Result<Self, String> {
        Origin::parse(url).map(AccessUrl)
    }

    pub fn is_https(&self) -> bool {
        self.0.is_https()
    }

    /// Lowercase; an IPv6 address keeps its brackets.
    pub fn host(&self) -> &str {
        self.0.host()
    }

    /// Whether a Host header's port (none, or the digits after `:`) is the one browsers use.
    pub fn port_matches(&self, port: Option<&str>) -> bool {
        port.is_none_or(|p| p == self.0.port().to_string())
    }

    /// A notebook's origin as its browser writes it: `<scheme>://w-<id>.localhost<:port>`, the
    /// scheme's own port left out.
    pub fn notebook_origin(&self, workload: impl fmt::Display) -> String {
        format!(
            "{}://w-{workload}{NOTEBOOK_SUFFIX}{}",
            self.0.scheme(),
            self.0.port_suffix()
        )
    }

    /// `<notebook origin>/_einsora/open?ticket=<ticket>`. A secret.
    pub fn notebook_link(&self, workload: impl fmt::Display, ticket: &str) -> String {
        format!(
            "{}/_einsora/open?ticket={ticket}",
            self.notebook_origin(workload)
        )
    }

    /// `<EINSORA_ACCESS_URL>/e/<id>/v1`.
    pub fn endpoint_base(&self, workload: impl fmt::Display) -> String {
        format!("{}/e/{workload}/v1", self.0)
    }
}

impl Default for AccessUrl {
    fn default() -> Self {
        AccessUrl::parse(DEFAULT).unwrap_or_else(|e| unreachable!("the default is valid: {e}"))
    }
}

impl fmt::Display for AccessUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "0190f5c4-7a4b-7c8d-9e0f-112233445566";

    fn from(value: Option<&str>) -> Result<AccessUrl, ConfigError> {
        let vars: Vec<(&str, &str)> = value.map(|v| (SETTING, v)).into_iter().collect();
        AccessUrl::from_settings(&Settings::from_map(vars))
    }

    #[test]
    fn the_default_builds_the_pinned_links() {
        let url = from(None).unwrap();
        assert_eq!(url, AccessUrl::default());
        assert_eq!(
            url.notebook_link(ID, "tkt_abc"),
            format!("http://w-{ID}.localhost:8090/_einsora/open?ticket=tkt_abc")
        );
        assert_eq!(
            url.endpoint_base(ID),
            format!("http://localhost:8090/e/{ID}/v1")
        );
    }

    #[test]
    fn scheme_host_and_port_are_kept_and_the_default_port_left_out() {
        let url = from(Some("https://Proxy.Example:443/")).unwrap();
        assert!(url.is_https());
        assert_eq!(url.host(), "proxy.example");
        assert_eq!(url.notebook_origin(ID), format!("https://w-{ID}.localhost"));
        assert_eq!(
            url.endpoint_base(ID),
            format!("https://proxy.example/e/{ID}/v1")
        );
        assert!(url.port_matches(None) && url.port_matches(Some("443")));
        assert!(!url.port_matches(Some("0443")) && !url.port_matches(Some("")));
        let v6 = from(Some("http://[::1]:9000")).unwrap();
        assert_eq!(v6.host(), "[::1]");
        assert_eq!(v6.to_string(), "http://[::1]:9000");
        assert_eq!(
            v6.notebook_link(ID, "t"),
            format!("http://w-{ID}.localhost:9000/_einsora/open?ticket=t")
        );
    }

    /// The api and the proxy refuse the same URLs, a path among them: nothing would answer it.
    #[test]
    fn paths_users_and_bad_ports_are_refused_naming_the_setting() {
        for bad in [
            "http://localhost:8090/prefix",
            "https://access.example.com/proxy/",
            "http://localhost:8090?x",
            "http://localhost:8090#x",
            "http://u:p@localhost",
            "http://localhost:0",
            "http://localhost:+80",
            "http://localhost:99999",
            "ftp://localhost",
            "http://",
            "localhost:8090",
        ] {
            let err = from(Some(bad)).unwrap_err();
            assert_eq!(err.setting(), SETTING, "{bad}");
        }
    }
}
