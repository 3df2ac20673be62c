//! EINSORA_ACCESS_URL: the access proxy's public URL, which notebook links and endpoint base
//! URLs are built from (DESIGN.md, "Pinned interfaces").

use std::fmt;

use einsora_core::ids::WorkloadId;
use einsora_runtime::settings::{ConfigError, Settings};

pub const SETTING: &str = "EINSORA_ACCESS_URL";
const DEFAULT: &str = "http://localhost:8090";

/// Each notebook is its own site: the proxy answers only these hosts.
const NOTEBOOK_HOST_SUFFIX: &str = ".localhost";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessUrl {
    scheme: String,
    /// `:port`, or empty.
    port: String,
    /// Without a trailing slash; empty for none.
    path: String,
    /// The whole URL without a trailing slash.
    base: String,
}

impl AccessUrl {
    pub fn from_settings(settings: &Settings) -> Result<Self, ConfigError> {
        let url = settings.url(SETTING, &["http", "https"], DEFAULT)?;
        AccessUrl::parse(&url).map_err(|problem| ConfigError::new(SETTING, problem))
    }

    /// Splits an http(s) URL that `Settings::url` already checked has a host.
    fn parse(url: &str) -> Result<Self, String> {
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| "is not an http(s) URL".to_owned())?;
        if rest.contains(['?', '#']) {
            return Err("must not have a query or fragment".into());
        }
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        if authority.contains('@') {
            return Err("must not carry a user name or password".into());
        }
        let port = match authority.rfind(':') {
            Some(i) if !authority[i..].contains(']') => &authority[i..],
            _ => "",
        };
        let path = path.trim_end_matches('/');
        Ok(AccessUrl {
            scheme: scheme.to_ascii_lowercase(),
            port: port.to_owned(),
            path: path.to_owned(),
            base: url.trim_end_matches('/').to_owned(),
        })
    }

    /// `<scheme>://w-<id>.localhost<:port><path>/_einsora/open?ticket=<ticket>`. A secret.
    pub fn notebook_link(&self, id: WorkloadId, ticket: &str) -> String {
        format!(
            "{}://w-{id}{NOTEBOOK_HOST_SUFFIX}{}{}/_einsora/open?ticket={ticket}",
            self.scheme, self.port, self.path
        )
    }

    /// `<EINSORA_ACCESS_URL>/e/<id>/v1`.
    pub fn endpoint_base(&self, id: WorkloadId) -> String {
        format!("{}/e/{id}/v1", self.base)
    }
}

impl Default for AccessUrl {
    fn default() -> Self {
        match AccessUrl::parse(DEFAULT) {
            Ok(url) => url,
            Err(e) => unreachable!("the default access URL is valid: {e}"),
        }
    }
}

impl fmt::Display for AccessUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.base)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(value: Option<&str>) -> Result<AccessUrl, ConfigError> {
        let vars: Vec<(&str, &str)> = value.map(|v| (SETTING, v)).into_iter().collect();
        AccessUrl::from_settings(&Settings::from_map(vars))
    }

    #[test]
    fn the_default_builds_the_pinned_links() {
        let url = from(None).unwrap();
        assert_eq!(url, AccessUrl::default());
        let id: WorkloadId = "0190f5c4-7a4b-7c8d-9e0f-112233445566".parse().unwrap();
        assert_eq!(
            url.notebook_link(id, "tkt_abc"),
            "http://w-0190f5c4-7a4b-7c8d-9e0f-112233445566.localhost:8090/_einsora/open?ticket=tkt_abc"
        );
        assert_eq!(
            url.endpoint_base(id),
            "http://localhost:8090/e/0190f5c4-7a4b-7c8d-9e0f-112233445566/v1"
        );
    }

    #[test]
    fn scheme_port_and_path_are_kept() {
        let id = WorkloadId::new();
        let url = from(Some("https://access.example.com/proxy/")).unwrap();
        assert_eq!(
            url.notebook_link(id, "t"),
            format!("https://w-{id}.localhost/proxy/_einsora/open?ticket=t")
        );
        assert_eq!(
            url.endpoint_base(id),
            format!("https://access.example.com/proxy/e/{id}/v1")
        );
        let v6 = from(Some("http://[::1]:9000")).unwrap();
        assert_eq!(
            v6.notebook_link(id, "t"),
            format!("http://w-{id}.localhost:9000/_einsora/open?ticket=t")
        );
        let no_port = from(Some("http://[::1]")).unwrap();
        assert!(
            no_port
                .notebook_link(id, "t")
                .starts_with(&format!("http://w-{id}.localhost/"))
        );
    }

    #[test]
    fn bad_urls_name_the_setting() {
        for bad in [
            "ftp://localhost",
            "localhost:8090",
            "http://user:pw@localhost:8090",
            "http://localhost:8090/?x=1",
        ] {
            let err = from(Some(bad)).unwrap_err();
            assert_eq!(err.setting(), SETTING, "{bad}");
        }
    }
}
