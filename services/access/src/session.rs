//! Notebook sessions: a redeemed ticket becomes a random 256-bit session ID in a host-only
//! cookie, `einsora_access`, backed by a session in memory, bound to one workload, the attempt
//! that was running when it opened, and the credential that asked for the ticket (its grant).
//! Sessions are found by the ID's SHA-256, so the map never holds the secret itself. Ending a
//! session ends everything it has open (WebSockets, streamed answers) at once; `sweep.rs` ends
//! those whose grant or attempt is gone.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::header::{COOKIE, HeaderMap, HeaderValue, SET_COOKIE};
use einsora_runtime::shutdown::Shutdown;
use sha2::{Digest, Sha256};
use uuid::Uuid;

pub(crate) const COOKIE_NAME: &str = "einsora_access";
pub(crate) const LIFETIME: Duration = Duration::from_secs(12 * 60 * 60);

#[derive(Debug, Clone)]
pub(crate) struct Session {
    pub(crate) tenant_id: String,
    pub(crate) user_id: String,
    pub(crate) subject: String,
    pub(crate) workload: Uuid,
    pub(crate) attempt: u32,
    pub(crate) expires: Instant,
    /// The credential the ticket was asked for with (opaque, the api's).
    pub(crate) grant: String,
    /// Triggered when the session ends: what it has open ends with it.
    pub(crate) ended: Shutdown,
}

type Key = [u8; 32];

#[derive(Debug, Default)]
pub(crate) struct Sessions {
    /// Shared with the requests that found them, rather than copied for each.
    by_key: Mutex<HashMap<Key, Arc<Session>>>,
}

/// A session found for a request: what it is, and how to end it.
#[derive(Debug)]
pub(crate) struct Found {
    key: Key,
    pub(crate) session: Arc<Session>,
}

impl Sessions {
    /// Stores `session` under a new random ID, which only the returned cookie value carries.
    pub(crate) fn open(&self, session: Session) -> std::io::Result<String> {
        let id = random_hex::<32>()?;
        let now = Instant::now();
        let mut map = self.lock();
        // Expired ones end here, and ended ones (an SSH session closed) go.
        map.retain(|_, s| {
            let live = s.expires > now && !s.ended.is_triggered();
            if !live {
                s.ended.trigger();
            }
            live
        });
        map.insert(key(&id), Arc::new(session));
        Ok(id)
    }

    /// Every open session, for the sweep.
    pub(crate) fn snapshot(&self) -> Vec<Arc<Session>> {
        self.lock().values().cloned().collect()
    }

    /// Ends every session `gone` says should end; how many it ended.
    pub(crate) fn end_where(&self, gone: impl Fn(&Session) -> bool) -> usize {
        let now = Instant::now();
        let mut ended = 0;
        self.lock().retain(|_, s| {
            let keep = s.expires > now && !gone(s);
            if !keep {
                s.ended.trigger();
                ended += 1;
            }
            keep
        });
        ended
    }

    /// The live session, among the request's `einsora_access` cookies, for `workload`.
    pub(crate) fn find(&self, headers: &HeaderMap, workload: Uuid) -> Option<Found> {
        let now = Instant::now();
        let map = self.lock();
        cookie_values(headers).find_map(|value| {
            let key = key(value);
            let session = map.get(&key)?;
            (session.workload == workload && session.expires > now).then(|| Found {
                key,
                session: Arc::clone(session),
            })
        })
    }

    pub(crate) fn end(&self, found: &Found) {
        if let Some(session) = self.lock().remove(&found.key) {
            session.ended.trigger();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Arc<Session>>> {
        self.by_key.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// `N` random bytes from the OS, in hex.
pub(crate) fn random_hex<const N: usize>() -> std::io::Result<String> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes)?;
    Ok(bytes.iter().fold(String::with_capacity(2 * N), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    }))
}

fn key(id: &str) -> Key {
    Sha256::digest(id.as_bytes()).into()
}

/// Host-only (no Domain), so it goes to this workload's host alone; a browser-session cookie,
/// since the session in memory ends first or with the proxy anyway.
pub(crate) fn set_cookie(id: &str, secure: bool) -> HeaderValue {
    cookie_header(format!("{COOKIE_NAME}={id}"), secure)
}

pub(crate) fn clear_cookie(secure: bool) -> HeaderValue {
    cookie_header(format!("{COOKIE_NAME}=; Max-Age=0"), secure)
}

fn cookie_header(start: String, secure: bool) -> HeaderValue {
    let secure = if secure { "; Secure" } else { "" };
    let text = format!("{start}; Path=/; HttpOnly; SameSite=Strict{secure}");
    HeaderValue::from_str(&text).expect("session IDs are hex")
}

/// Every `einsora_access` value in the request's Cookie headers.
fn cookie_values(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    cookie_pairs(headers).filter_map(|(name, value)| (name == COOKIE_NAME).then_some(value))
}

fn cookie_pairs(headers: &HeaderMap) -> impl Iterator<Item = (&str, &str)> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| {
            let (name, value) = pair.split_once('=')?;
            Some((name.trim(), value.trim()))
        })
}

/// The Cookie header without the proxy's own cookie; gone if nothing else is left.
pub(crate) fn strip_request_cookie(headers: &mut HeaderMap) {
    let mut kept = String::new();
    let others = headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .map(str::trim)
        .filter(|pair| !pair.is_empty() && !is_ours(pair));
    for pair in others {
        if !kept.is_empty() {
            kept.push_str("; ");
        }
        kept.push_str(pair);
    }
    headers.remove(COOKIE);
    if let Ok(value) = HeaderValue::from_str(&kept)
        && !kept.is_empty()
    {
        headers.insert(COOKIE, value);
    }
}

/// Drops any Set-Cookie that would set or clear the proxy's own cookie.
pub(crate) fn strip_set_cookie(headers: &mut HeaderMap) {
    let kept: Vec<HeaderValue> = headers
        .get_all(SET_COOKIE)
        .iter()
        .filter(|v| !v.to_str().is_ok_and(is_ours))
        .cloned()
        .collect();
    headers.remove(SET_COOKIE);
    for value in kept {
        headers.append(SET_COOKIE, value);
    }
}

fn is_ours(pair: &str) -> bool {
    let name = pair.split_once('=').map_or(pair, |(name, _)| name);
    name.trim().eq_ignore_ascii_case(COOKIE_NAME)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_proxys_cookie_is_stripped_and_others_kept() {
        let mut headers = HeaderMap::new();
        headers.append(COOKIE, HeaderValue::from_static("a=1; einsora_access=s1"));
        headers.append(COOKIE, HeaderValue::from_static(" Einsora_Access =s2;b=2"));
        strip_request_cookie(&mut headers);
        assert_eq!(headers.get_all(COOKIE).iter().count(), 1);
        assert_eq!(headers[COOKIE], "a=1; b=2");

        let mut only_ours = HeaderMap::new();
        only_ours.insert(COOKIE, HeaderValue::from_static("einsora_access=s"));
        strip_request_cookie(&mut only_ours);
        assert!(only_ours.get(COOKIE).is_none());

        let mut answer = HeaderMap::new();
        answer.append(
            SET_COOKIE,
            HeaderValue::from_static("einsora_access=x; Path=/"),
        );
        answer.append(SET_COOKIE, HeaderValue::from_static("_xsrf=y; Path=/"));
        strip_set_cookie(&mut answer);
        let left: Vec<_> = answer.get_all(SET_COOKIE).iter().collect();
        assert_eq!(left, ["_xsrf=y; Path=/"]);
    }

    #[test]
    fn a_session_is_found_only_at_its_workload_and_until_it_ends() {
        let sessions = Sessions::default();
        let (mine, other) = (Uuid::now_v7(), Uuid::now_v7());
        let id = sessions
            .open(Session {
                tenant_id: "t".into(),
                user_id: "u".into(),
                subject: "s".into(),
                workload: mine,
                attempt: 1,
                expires: Instant::now() + LIFETIME,
                grant: "session:x".into(),
                ended: Shutdown::new(),
            })
            .unwrap();
        assert_eq!(id.len(), 64);
        let mut headers = HeaderMap::new();
        let cookie = format!("einsora_access=planted; einsora_access={id}");
        headers.insert(COOKIE, HeaderValue::from_str(&cookie).unwrap());
        assert!(sessions.find(&headers, other).is_none());
        let found = sessions.find(&headers, mine).unwrap();
        assert_eq!(found.session.attempt, 1);
        sessions.end(&found);
        assert!(sessions.find(&headers, mine).is_none());
    }
}
