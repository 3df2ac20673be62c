//! `EINSORA_ACCESS_URL` and `EINSORA_ACCESS_DOMAIN`: the access proxy's public URL and the
//! domain its notebooks' hosts sit under (DESIGN.md, "Pinned interfaces"; ADR 0015), one type
//! for the api (which builds notebook links and endpoint base URLs from them) and the proxy
//! (which answers only the hosts and port they name). The URL is an origin: the proxy serves
//! each notebook at its own host's root (`w-<id>.<domain>`) and endpoints at `/e/<id>/v1`, so
//! a path would be a URL nothing answers, and is refused.

use std::fmt;

use crate::origin::Origin;
use crate::settings::{ConfigError, Settings};

pub const SETTING: &str = "EINSORA_ACCESS_URL";
const DEFAULT: &str = "http://localhost:8090";
pub const DOMAIN: &str = "EINSORA_ACCESS_DOMAIN";
/// Solo's: `*.localhost` resolves to loopback in browsers without any DNS.
const DEFAULT_DOMAIN: &str = "localhost";
/// `w-` and a hyphenated UUID, the label before the domain.
const NOTEBOOK_LABEL: usize = 2 + 36;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessUrl {
    origin: Origin,
    /// Lowercase DNS labels without a trailing dot: notebooks are `w-<id>.<domain>`.
    domain: String,
}

impl AccessUrl {
    pub fn from_settings(settings: &Settings) -> Result<Self, ConfigError> {
        let origin = settings.parse_with(SETTING, DEFAULT, Origin::parse)?;
        let domain = settings.parse_with(DOMAIN, DEFAULT_DOMAIN, parse_domain)?;
        Ok(AccessUrl { origin, domain })
    }

    /// The URL with Solo's domain.
    pub fn parse(url: &str) -> Result<Self, String> {
        Self::parse_with_domain(url, DEFAULT_DOMAIN)
    }

    pub fn parse_with_domain(url: &str, domain: &str) -> Result<Self, String> {
        Ok(AccessUrl {
            origin: Origin::parse(url)?,
            domain: parse_domain(domain)?,
        })
    }

    pub fn is_https(&self) -> bool {
        self.origin.is_https()
    }

    /// Lowercase; an IPv6 address keeps its brackets.
    pub fn host(&self) -> &str {
        self.origin.host()
    }

    /// The domain notebooks' hosts sit under.
    pub fn domain(&self) -> &str {
        &self.domain
    }

    /// Whether a Host header's port (none, or the digits after `:`) is the one browsers use.
    pub fn port_matches(&self, port: Option<&str>) -> bool {
        port.is_none_or(|p| p == self.origin.port().to_string())
    }

    /// The workload text of a notebook host's name (`w-<text>.<domain>`, exactly so written),
    /// for the caller to check is a workload ID.
    pub fn notebook_in<'a>(&self, name: &'a str) -> Option<&'a str> {
        name.strip_prefix("w-")?
            .strip_suffix(self.domain.as_str())?
            .strip_suffix('.')
    }

    /// A notebook's origin as its browser writes it: `<scheme>://w-<id>.<domain><:port>`, the
    /// scheme's own port left out.
    pub fn notebook_origin(&self, workload: impl fmt::Display) -> String {
        format!(
            "{}://w-{workload}.{}{}",
            self.origin.scheme(),
            self.domain,
            self.origin.port_suffix()
        )
    }

    /// Where a VM's SSH is reached (`Upgrade: einsora-ssh`, with a ticket), at its own host.
    pub fn vm_ssh_url(&self, workload: impl fmt::Display) -> String {
        format!("{}/_einsora/ssh", self.notebook_origin(workload))
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
        format!("{}/e/{workload}/v1", self.origin)
    }
}

/// Lowercase letters, digits and hyphens in labels of 1–63, not starting or ending with a
/// hyphen, with room left for a notebook's label: what a wildcard certificate and DNS can name.
fn parse_domain(text: &str) -> Result<String, String> {
    let label_ok = |l: &str| {
        (1..=63).contains(&l.len())
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    if text.len() + 1 + NOTEBOOK_LABEL > 253 {
        return Err("is too long for a notebook's host under it".to_owned());
    }
    if !text.split('.').all(label_ok) {
        return Err(
            "is not a domain name: lowercase letters, digits and hyphens in dot-separated labels"
                .to_owned(),
        );
    }
    if text
        .rsplit('.')
        .next()
        .is_some_and(|tld| tld.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err("is an address, not a domain name".to_owned());
    }
    Ok(text.to_owned())
}

impl Default for AccessUrl {
    fn default() -> Self {
        AccessUrl::parse(DEFAULT).unwrap_or_else(|e| unreachable!("the default is valid: {e}"))
    }
}

impl fmt::Display for AccessUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.origin.fmt(f)
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

    /// A Lab's notebooks under its own domain: links, and the one spelling of a host that is a
    /// notebook's.
    #[test]
    fn notebooks_sit_under_the_configured_domain() {
        let settings = Settings::from_map([
            (SETTING, "https://lab.example.org"),
            (DOMAIN, "nb.lab.example.org"),
        ]);
        let url = AccessUrl::from_settings(&settings).unwrap();
        assert_eq!(
            url.notebook_link(ID, "t"),
            format!("https://w-{ID}.nb.lab.example.org/_einsora/open?ticket=t")
        );
        assert_eq!(
            url.notebook_in(&format!("w-{ID}.nb.lab.example.org")),
            Some(ID)
        );
        for other in [
            format!("w-{ID}.localhost"),
            format!("w-{ID}xnb.lab.example.org"),
            format!("w-{ID}.nb.lab.example.org.evil"),
            format!("x.w-{ID}.lab.example.org"),
            "w-.nb.lab.example.org".to_owned(),
            "nb.lab.example.org".to_owned(),
        ] {
            let found = url.notebook_in(&other);
            assert!(found.is_none() || found == Some(""), "{other}: {found:?}");
        }
        assert_eq!(AccessUrl::default().domain(), "localhost");
    }

    #[test]
    fn a_domain_that_no_certificate_or_dns_could_name_is_refused_naming_the_setting() {
        let long = [
            "a".repeat(63),
            "b".repeat(63),
            "c".repeat(63),
            "d".repeat(30),
        ]
        .join(".");
        for bad in [
            ".",
            "lab.",
            ".lab",
            "Lab.Example",
            "lab..example",
            "-lab.example",
            "lab-.x",
            "lab_1.example",
            "*.lab",
            "10.0.0.1",
            "lab example",
            "lab.example/x",
            &long,
        ] {
            let settings = Settings::from_map([(DOMAIN, bad)]);
            let err = AccessUrl::from_settings(&settings).unwrap_err();
            assert_eq!(err.setting(), DOMAIN, "{bad:?}");
        }
        for good in ["lab", "lab.example", "x-1.lab.test", "10.0.0.1.nip.io"] {
            assert!(
                AccessUrl::parse_with_domain(DEFAULT, good).is_ok(),
                "{good}"
            );
        }
    }
}
