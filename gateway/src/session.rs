//! The session cookie: read from requests for the api (`x-einsora-session`), set from Login's
//! `session_id` (which never reaches a body), cleared at Logout. Passwords and session cookies
//! travel only over HTTPS or loopback, unless `EINSORA_INSECURE_HTTP=true`.

use axum::http::header::COOKIE;
use axum::http::{HeaderMap, HeaderValue};

use crate::edge::Caller;
use crate::errors::ApiError;

pub(crate) const COOKIE_NAME: &str = "einsora_session";
/// Seven days, the session's lifetime at the api.
const MAX_AGE_SECONDS: u32 = 604_800;

/// The session cookie's value, if the request sent one.
pub(crate) fn from_request(headers: &HeaderMap) -> Vec<&str> {
    cookie_values(headers, COOKIE_NAME)
}

/// Every non-empty value of the cookie `name` the request sent.
pub(crate) fn cookie_values<'a>(headers: &'a HeaderMap, name: &str) -> Vec<&'a str> {
    let cookies = headers.get_all(COOKIE).into_iter();
    let pairs = cookies
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'));
    pairs
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(|(found, _)| *found == name)
        .map(|(_, value)| value.trim_matches('"'))
        .filter(|value| !value.is_empty())
        .collect()
}

/// The `Set-Cookie` that holds `session_id`; `None` if the api sent an ID no cookie can carry.
pub(crate) fn set(session_id: &str, https: bool) -> Option<HeaderValue> {
    let cookie = Cookie {
        name: COOKIE_NAME,
        path: "/",
        max_age: MAX_AGE_SECONDS,
    };
    cookie.set(session_id, https)
}

/// The `Set-Cookie` that makes the browser forget the session.
pub(crate) fn clear(https: bool) -> HeaderValue {
    let cookie = Cookie {
        name: COOKIE_NAME,
        path: "/",
        max_age: 0,
    };
    HeaderValue::from_str(&cookie.text("", https)).unwrap_or(HeaderValue::from_static(""))
}

/// An HttpOnly, SameSite=Strict cookie the gateway sets (Secure over HTTPS).
pub(crate) struct Cookie {
    pub(crate) name: &'static str,
    pub(crate) path: &'static str,
    pub(crate) max_age: u32,
}

impl Cookie {
    /// Its `Set-Cookie` holding `value`; `None` for a value no cookie can carry.
    pub(crate) fn set(&self, value: &str, https: bool) -> Option<HeaderValue> {
        let cookie_safe = |c: char| c.is_ascii_graphic() && !matches!(c, '"' | ',' | ';' | '\\');
        if value.is_empty() || !value.chars().all(cookie_safe) {
            return None;
        }
        HeaderValue::from_str(&self.text(value, https)).ok()
    }

    fn text(&self, value: &str, https: bool) -> String {
        let Cookie {
            name,
            path,
            max_age,
        } = self;
        let secure = if https { "; Secure" } else { "" };
        format!("{name}={value}; HttpOnly; SameSite=Strict; Path={path}; Max-Age={max_age}{secure}")
    }
}

/// A password (a login's, or a new one) may come over plain HTTP only from this machine, or where
/// the operator allowed it.
pub(crate) fn login_allowed(caller: &Caller, insecure_http: bool) -> Result<(), ApiError> {
    if caller.https || caller.addr.is_loopback() || insecure_http {
        Ok(())
    } else {
        Err(ApiError::forbidden(
            "send passwords over HTTPS: this request came over plain HTTP from another machine \
             (the operator can allow that with EINSORA_INSECURE_HTTP=true)",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cookie_is_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.append(COOKIE, "theme=dark; einsora_sessionx=no".parse().unwrap());
        assert!(from_request(&headers).is_empty());
        headers.append(COOKIE, "a=b;einsora_session=s3cr3t; c=d".parse().unwrap());
        assert_eq!(from_request(&headers), ["s3cr3t"]);
    }

    #[test]
    fn set_and_clear_carry_the_attributes() {
        let set_plain = set("abc", false).unwrap();
        assert_eq!(
            set_plain,
            "einsora_session=abc; HttpOnly; SameSite=Strict; Path=/; Max-Age=604800"
        );
        assert!(
            set("abc", true)
                .unwrap()
                .to_str()
                .unwrap()
                .ends_with("; Secure")
        );
        assert_eq!(set("a;b", false), None);
        assert_eq!(set("", false), None);
        let cleared = clear(false);
        assert!(cleared.to_str().unwrap().starts_with("einsora_session=; "));
        assert!(cleared.to_str().unwrap().contains("Max-Age=0"));
    }

    #[test]
    fn plain_http_login_only_from_loopback_unless_allowed() {
        let caller = |addr: &str, https| Caller {
            addr: addr.parse().unwrap(),
            https,
        };
        assert!(login_allowed(&caller("127.0.0.1", false), false).is_ok());
        assert!(login_allowed(&caller("::1", false), false).is_ok());
        assert!(login_allowed(&caller("192.0.2.1", true), false).is_ok());
        assert!(login_allowed(&caller("192.0.2.1", false), true).is_ok());
        let refused = login_allowed(&caller("192.0.2.1", false), false).unwrap_err();
        assert_eq!(refused.code, "forbidden");
        assert!(refused.message.contains("EINSORA_INSECURE_HTTP"));
    }
}
