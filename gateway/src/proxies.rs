//! `EINSORA_TRUSTED_PROXIES`: the reverse proxies whose `X-Forwarded-For` and
//! `X-Forwarded-Proto` the gateway believes. Anyone else could write those headers.

use std::net::IpAddr;
use std::str::FromStr;

use axum::http::HeaderMap;

/// An address or a CIDR block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Block {
    network: IpAddr,
    prefix: u8,
}

impl Block {
    fn contains(&self, ip: IpAddr) -> bool {
        match (self.network, canonical(ip)) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => masked(
                u128::from(u32::from(net)),
                u128::from(u32::from(ip)),
                self.prefix,
                32,
            ),
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                masked(u128::from(net), u128::from(ip), self.prefix, 128)
            }
            _ => false,
        }
    }
}

fn masked(net: u128, ip: u128, prefix: u8, bits: u8) -> bool {
    let shift = bits - prefix;
    shift == bits || (net >> shift) == (ip >> shift)
}

impl FromStr for Block {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let bad = || format!("{text:?} is not an IP address or CIDR block");
        let (ip, prefix) = match text.split_once('/') {
            Some((ip, prefix)) => (ip, Some(prefix)),
            None => (text, None),
        };
        let network = canonical(ip.parse().map_err(|_| bad())?);
        let bits = if network.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) => p.parse().ok().filter(|p| *p <= bits).ok_or_else(bad)?,
            None => bits,
        };
        Ok(Block { network, prefix })
    }
}

/// IPv4-mapped IPv6 addresses (`::ffff:a.b.c.d`, what a dual-stack socket reports) as IPv4.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// The trusted proxies; empty trusts none.
#[derive(Debug, Clone, Default)]
pub struct TrustedProxies(Vec<Block>);

impl TrustedProxies {
    /// A comma-separated list of IPs and CIDR blocks, e.g. `10.0.0.0/8, ::1`.
    pub fn parse(list: &str) -> Result<Self, String> {
        let items = list.split(',').map(str::trim).filter(|s| !s.is_empty());
        items
            .map(str::parse)
            .collect::<Result<_, _>>()
            .map(TrustedProxies)
    }

    fn trusts(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|b| b.contains(ip))
    }

    /// The caller's address: the socket's peer, or, while the hop in hand is a trusted proxy,
    /// the hop before it in `X-Forwarded-For`, read from the right.
    pub(crate) fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let mut client = canonical(peer);
        let forwarded = headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .collect::<Vec<_>>();
        for hop in forwarded.iter().rev() {
            if !self.trusts(client) {
                break;
            }
            match hop.trim().parse() {
                Ok(ip) => client = canonical(ip),
                Err(_) => break,
            }
        }
        client
    }

    /// Whether the request reached the gateway over HTTPS: only a trusted proxy can say so,
    /// since the gateway itself serves plain HTTP.
    pub(crate) fn https(&self, peer: IpAddr, headers: &HeaderMap) -> bool {
        let proto = headers
            .get("x-forwarded-proto")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.rsplit(',').next());
        self.trusts(canonical(peer))
            && proto.is_some_and(|p| p.trim().eq_ignore_ascii_case("https"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.append(*k, v.parse().unwrap());
        }
        map
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn blocks_parse_and_match() {
        let proxies = TrustedProxies::parse("10.0.0.0/8, 192.168.1.7 ,fd00::/8").unwrap();
        assert!(proxies.trusts(ip("10.200.3.4")));
        assert!(proxies.trusts(ip("::ffff:10.1.1.1")));
        assert!(proxies.trusts(ip("192.168.1.7")) && !proxies.trusts(ip("192.168.1.8")));
        assert!(proxies.trusts(ip("fd12::1")) && !proxies.trusts(ip("fe80::1")));
        assert!(
            TrustedProxies::parse("0.0.0.0/0")
                .unwrap()
                .trusts(ip("8.8.8.8"))
        );
        for bad in ["10.0.0.0/33", "nonsense", "10.0.0.1/x", "::1/129"] {
            assert!(TrustedProxies::parse(bad).is_err(), "{bad}");
        }
        assert!(TrustedProxies::parse("").unwrap().0.is_empty());
    }

    #[test]
    fn the_client_is_the_last_untrusted_hop() {
        let proxies = TrustedProxies::parse("10.0.0.0/8").unwrap();
        let xff = headers(&[
            ("x-forwarded-for", "6.6.6.6, 1.2.3.4"),
            ("x-forwarded-for", "10.0.0.2"),
        ]);
        // 10.0.0.1 (peer) and 10.0.0.2 are proxies; 1.2.3.4 is the client; 6.6.6.6 is whatever
        // the client claimed.
        assert_eq!(proxies.client(ip("10.0.0.1"), &xff), ip("1.2.3.4"));
        // An untrusted peer's header is ignored.
        assert_eq!(proxies.client(ip("5.5.5.5"), &xff), ip("5.5.5.5"));
        // No proxies trusted: always the socket.
        assert_eq!(
            TrustedProxies::default().client(ip("10.0.0.1"), &xff),
            ip("10.0.0.1")
        );
        // Garbage stops the walk at the proxy that passed it on.
        let junk = headers(&[("x-forwarded-for", "1.2.3.4, junk")]);
        assert_eq!(proxies.client(ip("10.0.0.1"), &junk), ip("10.0.0.1"));
        // Every hop trusted: the first one.
        let all = headers(&[("x-forwarded-for", "10.9.9.9")]);
        assert_eq!(proxies.client(ip("10.0.0.1"), &all), ip("10.9.9.9"));
    }

    #[test]
    fn only_a_trusted_proxy_can_say_https() {
        let proxies = TrustedProxies::parse("127.0.0.1").unwrap();
        let https = headers(&[("x-forwarded-proto", "https")]);
        assert!(proxies.https(ip("127.0.0.1"), &https));
        assert!(!proxies.https(ip("127.0.0.2"), &https));
        assert!(!proxies.https(ip("127.0.0.1"), &headers(&[("x-forwarded-proto", "http")])));
        assert!(!proxies.https(ip("127.0.0.1"), &HeaderMap::new()));
    }
}
