//! The hosts the gateway answers to and the origins that are its own, so that a page can't
//! reach it under a name of its own (DNS rebinding) and a write can't claim to come from the
//! dashboard because it names the host it was sent to. The installation is: its listener
//! (the address it is bound to, and `localhost`, `127.0.0.1` and `[::1]`, all at its port;
//! bound to every address, any IP address at its port, since an address can't be rebound) and
//! `EINSORA_PUBLIC_URL`'s host and port. Only the listener is plain HTTP; the public URL says
//! its own scheme.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use einsora_runtime::origin::{Authority, Origin};

/// The plain-HTTP port a Host or an `http://` origin without one means.
const HTTP_PORT: u16 = 80;

#[derive(Debug, Clone)]
pub(crate) struct Hosts {
    bound: SocketAddr,
    public: Option<Origin>,
}

impl Hosts {
    pub(crate) fn new(bound: SocketAddr, public: Option<Origin>) -> Self {
        Hosts { bound, public }
    }

    /// Whether a `Host` header (or an absolute request target's authority) names this
    /// installation.
    pub(crate) fn answers_to(&self, host: &str) -> bool {
        Authority::parse(host).is_some_and(|host| {
            self.is_listener(&host) || self.public.as_ref().is_some_and(|p| p.is(&host))
        })
    }

    /// Whether an `Origin` header is one of the installation's own origins: `http://` and a
    /// listener name, or the public URL's scheme, host and port. `null` never is.
    pub(crate) fn is_own_origin(&self, origin: &str) -> bool {
        let Some((scheme, rest)) = origin.split_once("://") else {
            return false;
        };
        let Some(authority) = Authority::parse(rest) else {
            return false;
        };
        let listener = scheme.eq_ignore_ascii_case("http") && self.is_listener(&authority);
        let public = self
            .public
            .as_ref()
            .is_some_and(|p| scheme.eq_ignore_ascii_case(p.scheme()) && p.is(&authority));
        listener || public
    }

    fn is_listener(&self, authority: &Authority) -> bool {
        if authority.port.unwrap_or(HTTP_PORT) != self.bound.port() {
            return false;
        }
        if authority.host == "localhost" {
            return true;
        }
        let Some(ip) = authority.ip() else {
            return false;
        };
        let bound = self.bound.ip().to_canonical();
        ip == IpAddr::V4(Ipv4Addr::LOCALHOST)
            || ip == IpAddr::V6(Ipv6Addr::LOCALHOST)
            || ip == bound
            || bound.is_unspecified()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(bound: &str, public: Option<&str>) -> Hosts {
        let public = public.map(|url| Origin::parse(url).unwrap());
        Hosts::new(bound.parse().unwrap(), public)
    }

    #[test]
    fn the_listener_answers_to_its_address_and_the_loopback_names_at_its_port() {
        let solo = hosts("127.0.0.1:8080", None);
        for own in [
            "127.0.0.1:8080",
            "localhost:8080",
            "LocalHost:8080",
            "[::1]:8080",
            "[0:0::1]:8080",
        ] {
            assert!(solo.answers_to(own), "{own}");
        }
        for foreign in [
            "evil.example:8080",
            "localhost:8081",
            "localhost",
            "127.0.0.1",
            "w-1.localhost:8080",
            "localhost.:8080",
            "localhost.evil.example:8080",
            "192.0.2.1:8080",
            "127.0.0.2:8080",
            "user@localhost:8080",
            "localhost:8080/x",
            "localhost:",
            "localhost:80800",
            "[::1",
            "",
        ] {
            assert!(!solo.answers_to(foreign), "{foreign:?}");
        }
        let lan = hosts("192.0.2.7:8080", None);
        assert!(lan.answers_to("192.0.2.7:8080") && lan.answers_to("localhost:8080"));
        assert!(!lan.answers_to("192.0.2.8:8080"));
        let on_port_80 = hosts("127.0.0.1:80", None);
        assert!(on_port_80.answers_to("localhost") && on_port_80.answers_to("localhost:80"));
    }

    #[test]
    fn bound_to_every_address_any_ip_address_at_the_port_is_the_listener() {
        for every in ["0.0.0.0:8080", "[::]:8080"] {
            let all = hosts(every, None);
            for own in ["192.0.2.8:8080", "[2001:db8::1]:8080", "localhost:8080"] {
                assert!(all.answers_to(own), "{every} {own}");
            }
            for foreign in ["192.0.2.8:9090", "lab.example:8080"] {
                assert!(!all.answers_to(foreign), "{every} {foreign}");
            }
        }
    }

    #[test]
    fn the_public_url_adds_its_host_at_its_own_port() {
        let proxied = hosts("127.0.0.1:8080", Some("https://Einsora.Example"));
        for own in [
            "einsora.example",
            "einsora.example:443",
            "EINSORA.EXAMPLE",
            "localhost:8080",
        ] {
            assert!(proxied.answers_to(own), "{own}");
        }
        for foreign in ["einsora.example:8080", "einsora.example:80", "example:443"] {
            assert!(!proxied.answers_to(foreign), "{foreign}");
        }
        let named = hosts("0.0.0.0:8080", Some("http://lab.example:8080"));
        assert!(named.answers_to("lab.example:8080") && !named.answers_to("lab.example"));
    }

    #[test]
    fn own_origins_are_the_listeners_over_http_and_the_public_url() {
        let solo = hosts("127.0.0.1:8080", None);
        for own in [
            "http://localhost:8080",
            "HTTP://LOCALHOST:8080",
            "http://127.0.0.1:8080",
            "http://[::1]:8080",
        ] {
            assert!(solo.is_own_origin(own), "{own}");
        }
        for foreign in [
            "null",
            "http://evil.example:8080",
            "https://localhost:8080",
            "http://localhost:8081",
            "http://localhost",
            "http://localhost:8080/",
            "localhost:8080",
            "ws://localhost:8080",
            "",
        ] {
            assert!(!solo.is_own_origin(foreign), "{foreign:?}");
        }
        let proxied = hosts("127.0.0.1:8080", Some("https://einsora.example"));
        for own in [
            "https://einsora.example",
            "https://einsora.example:443",
            "http://localhost:8080",
        ] {
            assert!(proxied.is_own_origin(own), "{own}");
        }
        for foreign in ["http://einsora.example", "https://einsora.example:8443"] {
            assert!(!proxied.is_own_origin(foreign), "{foreign}");
        }
    }
}
