//! Origins as settings name them (`EINSORA_PUBLIC_URL`, `EINSORA_ACCESS_URL`: the scheme, host
//! and port browsers use), and the `host[:port]` grammar they share with `Host` and `Origin`
//! headers: one parser for the gateway and the access proxy.

use std::fmt;

use std::net::IpAddr;

/// An `http(s)://host[:port][/]` URL: an origin, so no path, query, fragment or user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    https: bool,
    /// Lowercase; an IPv6 address keeps its brackets.
    host: String,
    /// The explicit port, else the scheme's.
    port: u16,
}

impl Origin {
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
            return Err("must be an origin: no path, query or fragment".into());
        }
        if authority.contains('@') {
            return Err("must not carry a user name or password".into());
        }
        let authority = Authority::parse(authority)
            .ok_or_else(|| "has no valid host, or a port that is not 1 to 65535".to_owned())?;
        Ok(Origin {
            https,
            port: authority.port.unwrap_or(default_port(https)),
            host: authority.host,
        })
    }

    pub fn scheme(&self) -> &'static str {
        if self.https { "https" } else { "http" }
    }

    pub fn is_https(&self) -> bool {
        self.https
    }

    /// Lowercase; an IPv6 address keeps its brackets.
    pub fn host(&self) -> &str {
        &self.host
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Whether a Host or an origin's authority names this URL's host and port (none written
    /// is this URL's scheme's).
    pub fn is(&self, authority: &Authority) -> bool {
        authority.host == self.host
            && authority.port.unwrap_or(default_port(self.https)) == self.port
    }

    /// `:port`, or nothing for the scheme's own, as browsers write origins.
    pub fn port_suffix(&self) -> String {
        if self.port == default_port(self.https) {
            String::new()
        } else {
            format!(":{}", self.port)
        }
    }
}

/// As browsers write it: the scheme's own port left out.
impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}{}", self.scheme(), self.host, self.port_suffix())
    }
}

fn default_port(https: bool) -> u16 {
    if https { 443 } else { 80 }
}

/// `host[:port]` as a Host header or an origin writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authority {
    /// Lowercase; an IPv6 address keeps its brackets.
    pub host: String,
    pub port: Option<u16>,
}

impl Authority {
    /// `None` for anything but a name, an IPv4 address or a bracketed IPv6 address, with an
    /// optional port from 1 to 65535: no user, path, spaces or empty port.
    pub fn parse(text: &str) -> Option<Self> {
        let allowed =
            |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | ':' | '[' | ']' | '_');
        if text.is_empty() || !text.chars().all(allowed) {
            return None;
        }
        let (host, port) = match text.rfind(':') {
            // A colon inside brackets belongs to an IPv6 address, not to a port.
            Some(i) if !text[i..].contains(']') => (&text[..i], Some(&text[i + 1..])),
            _ => (text, None),
        };
        let port = match port {
            None => None,
            Some(digits) => Some(
                digits
                    .parse::<u16>()
                    .ok()
                    .filter(|p| *p != 0 && digits.bytes().all(|b| b.is_ascii_digit()))?,
            ),
        };
        let bracketed = host.strip_prefix('[').and_then(|h| h.strip_suffix(']'));
        let valid = match bracketed {
            Some(v6) => v6.parse::<std::net::Ipv6Addr>().is_ok(),
            None => !host.is_empty() && !host.contains(['[', ']', ':']),
        };
        valid.then(|| Authority {
            host: host.to_ascii_lowercase(),
            port,
        })
    }

    /// The host as an IP address (IPv4-mapped IPv6 as IPv4), if it is one.
    pub fn ip(&self) -> Option<IpAddr> {
        let bare = self
            .host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(&self.host);
        bare.parse::<IpAddr>().ok().map(|ip| ip.to_canonical())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_urls_are_origins() {
        let url = Origin::parse("https://Einsora.Example/").unwrap();
        assert_eq!(
            (url.scheme(), url.host.as_str(), url.port),
            ("https", "einsora.example", 443)
        );
        let url = Origin::parse("http://[::1]:9000").unwrap();
        assert_eq!((url.host.as_str(), url.port), ("[::1]", 9000));
        assert_eq!(Origin::parse("http://lab:8080").unwrap().port, 8080);
        assert_eq!(url.to_string(), "http://[::1]:9000");
        assert_eq!(
            Origin::parse("https://x.example:443").unwrap().to_string(),
            "https://x.example"
        );
        for bad in [
            "einsora.example",
            "ftp://einsora.example",
            "https://einsora.example/dashboard",
            "https://einsora.example?x",
            "https://einsora.example#x",
            "https://u:p@einsora.example",
            "https://einsora.example:0",
            "https://einsora.example:99999",
            "https://einsora.example:+80",
            "https://",
            "https://[::1",
            "https://ein sora.example",
        ] {
            assert!(Origin::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn authorities_are_a_host_and_maybe_a_port() {
        let parsed = Authority::parse("Example.COM:8080").unwrap();
        assert_eq!(
            (parsed.host.as_str(), parsed.port),
            ("example.com", Some(8080))
        );
        assert_eq!(Authority::parse("[::1]").unwrap().port, None);
        assert_eq!(
            Authority::parse("[::ffff:127.0.0.1]:1").unwrap().ip(),
            Some("127.0.0.1".parse().unwrap())
        );
        assert_eq!(Authority::parse("localhost").unwrap().ip(), None);
        for bad in [
            "", ":80", "a:b", "a::80", "[x]:80", "a b", "a\u{e9}", "[::1]x", "a:",
        ] {
            assert_eq!(Authority::parse(bad), None, "{bad:?}");
        }
    }
}
