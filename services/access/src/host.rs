//! Which site a request is for, from its Host alone. The proxy answers only
//! `w-<uuid>.<domain>` (each notebook) and the public URL's host (endpoints), so a page can't
//! reach it under a name of its own (DNS rebinding). Anything ambiguous is refused before any
//! lookup or upstream connection.

use axum::http::header::HOST;
use axum::http::request::Parts;
use uuid::Uuid;

use crate::errors::Failure;
use einsora_runtime::access_url::AccessUrl;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Site {
    Notebook(Uuid),
    Endpoints,
}

/// Headers through which a client could name another host than its Host header.
const OTHER_HOSTS: [&str; 3] = ["forwarded", "x-forwarded-host", "x-forwarded-server"];

pub(crate) fn site(parts: &Parts, public: &AccessUrl) -> Result<Site, Failure> {
    if parts.uri.scheme().is_some() || parts.uri.authority().is_some() {
        return Err(Failure::invalid(
            "only origin-form request targets are served",
        ));
    }
    if OTHER_HOSTS.iter().any(|h| parts.headers.contains_key(*h)) {
        return Err(Failure::invalid(
            "Forwarded and X-Forwarded-Host headers are not accepted",
        ));
    }
    let mut hosts = parts.headers.get_all(HOST).iter();
    let (Some(host), None) = (hosts.next(), hosts.next()) else {
        return Err(Failure::invalid("a request needs exactly one Host header"));
    };
    let host = host.to_str().map_err(|_| not_served())?;
    site_of(host, public).ok_or_else(not_served)
}

fn site_of(host: &str, public: &AccessUrl) -> Option<Site> {
    let (name, port) = split_port(host);
    if !public.port_matches(port) {
        return None;
    }
    if let Some(id) = public.notebook_in(name) {
        return canonical_uuid(id).map(Site::Notebook);
    }
    (!name.is_empty() && name.eq_ignore_ascii_case(public.host())).then_some(Site::Endpoints)
}

/// Only the lowercase hyphenated spelling, so one workload has exactly one origin.
pub(crate) fn canonical_uuid(text: &str) -> Option<Uuid> {
    let id = Uuid::try_parse(text).ok()?;
    (id.hyphenated().to_string() == text).then_some(id)
}

fn not_served() -> Failure {
    Failure::not_found("nothing is served at this host")
}

/// `host[:port]`; a colon inside IPv6 brackets is not a port's. (Notebook hosts are matched
/// exactly as written, not case-folded as `origin::Authority` does.)
fn split_port(authority: &str) -> (&str, Option<&str>) {
    match authority.rfind(':') {
        Some(i) if !authority[i..].contains(']') => (&authority[..i], Some(&authority[i + 1..])),
        _ => (authority, None),
    }
}

#[cfg(test)]
mod tests {
    use axum::http::Request;

    use super::*;

    const ID: &str = "0190a5b2-7c1e-7d3f-8a9b-0c1d2e3f4a5b";

    fn parts(uri: &str, headers: &[(&str, &str)]) -> Parts {
        let mut request = Request::builder().uri(uri);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.body(()).unwrap().into_parts().0
    }

    fn host(value: &str) -> Result<Site, Failure> {
        site(&parts("/", &[("host", value)]), &AccessUrl::default())
    }

    #[test]
    fn notebook_hosts_and_the_public_host_are_served() {
        let id = Uuid::parse_str(ID).unwrap();
        assert_eq!(host(&format!("w-{ID}.localhost")), Ok(Site::Notebook(id)));
        assert_eq!(
            host(&format!("w-{ID}.localhost:8090")),
            Ok(Site::Notebook(id))
        );
        assert_eq!(host("localhost:8090"), Ok(Site::Endpoints));
        assert_eq!(host("LocalHost"), Ok(Site::Endpoints));
    }

    #[test]
    fn every_other_name_is_refused() {
        let upper = ID.to_uppercase();
        let simple = ID.replace('-', "");
        for bad in [
            "evil.com".to_owned(),
            String::new(),
            format!("w-{ID}.localhost.evil.com"),
            format!("evil.w-{ID}.localhost"),
            format!("w-{ID}.localhost."),
            format!("w-{ID}.localhost.:8090"),
            format!("W-{ID}.localhost"),
            format!("w-{ID}.LOCALHOST"),
            format!("w-{upper}.localhost"),
            format!("w-{{{ID}}}.localhost"),
            format!("w-{simple}.localhost"),
            format!("w-urn:uuid:{ID}.localhost"),
            format!("w-{ID}.localhost:9999"),
            format!("w-{ID}.localhost:08090"),
            format!("w-{ID}.localhost:"),
            "w-.localhost".to_owned(),
            "localhost:1".to_owned(),
            "127.0.0.1:8090".to_owned(),
        ] {
            let refused = host(&bad).unwrap_err();
            assert_eq!(refused.code(), "not_found", "{bad}");
        }
    }

    #[test]
    fn under_a_labs_domain_its_hosts_are_served_and_localhost_no_longer() {
        let public =
            AccessUrl::parse_with_domain("https://lab.example:8443", "nb.lab.example").unwrap();
        let at = |h: &str| site_of(h, &public);
        let id = Uuid::parse_str(ID).unwrap();
        assert_eq!(
            at(&format!("w-{ID}.nb.lab.example:8443")),
            Some(Site::Notebook(id))
        );
        assert_eq!(at("lab.example:8443"), Some(Site::Endpoints));
        for refused in [
            format!("w-{ID}.localhost:8443"),
            format!("w-{ID}.lab.example:8443"),
            format!("w-{ID}.nb.lab.example:8090"),
            format!("w-{ID}.nb.lab.example.evil:8443"),
            "localhost:8443".to_owned(),
        ] {
            assert_eq!(at(&refused), None, "{refused}");
        }
    }

    #[test]
    fn ambiguous_requests_are_refused() {
        let good = format!("w-{ID}.localhost:8090");
        let public = AccessUrl::default();
        let cases = [
            parts("/", &[]),
            parts("/", &[("host", &good), ("host", &good)]),
            parts("http://evil.com/", &[("host", &good)]),
            parts(&format!("http://{good}/"), &[("host", &good)]),
            parts("/", &[("host", &good), ("x-forwarded-host", "evil.com")]),
            parts("/", &[("host", &good), ("forwarded", "host=evil.com")]),
        ];
        for case in cases {
            let refused = site(&case, &public).unwrap_err();
            assert_eq!(refused.code(), "invalid_request", "{case:?}");
        }
    }
}
