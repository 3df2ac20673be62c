//! The known-client cookie: the proof of a sign-in the api hands out with each Login answer
//! (its `x-einsora-known-client` metadata), kept by the browser for the next sign-in alone
//! (`Path=/v1/sessions`) and passed back to the api on Login, where it gives the client login
//! limits of its own, so that nobody else's failed sign-ins delay it (docs/security.md). A
//! secret, like the session cookie: it reaches the api and nothing else.

use axum::http::{HeaderMap, HeaderValue};

use crate::session::{Cookie, cookie_values};

pub(crate) use einsora_proto::metadata::KNOWN_CLIENT as METADATA;
const COOKIE: Cookie = Cookie {
    name: "einsora_client",
    path: "/v1/sessions",
    // Ninety days, the proof's lifetime at the api.
    max_age: 7_776_000,
};

/// The proofs the request's cookies hold.
pub(crate) fn from_request(headers: &HeaderMap) -> Vec<&str> {
    cookie_values(headers, COOKIE.name)
}

/// The `Set-Cookie` that keeps the proof in the api's answer, if there is a usable one.
pub(crate) fn set(answer: &tonic::metadata::MetadataMap, https: bool) -> Option<HeaderValue> {
    let proof = answer.get(METADATA)?.to_str().ok()?;
    COOKIE.set(proof, https)
}

#[cfg(test)]
mod tests {
    use axum::http::header::COOKIE as COOKIE_HEADER;

    use super::*;

    #[test]
    fn the_proof_is_kept_for_sign_ins_only() {
        let mut answer = tonic::metadata::MetadataMap::new();
        assert_eq!(set(&answer, false), None);
        answer.insert(METADATA, "v1.1.ab.cd".parse().unwrap());
        assert_eq!(
            set(&answer, false).unwrap(),
            "einsora_client=v1.1.ab.cd; HttpOnly; SameSite=Strict; Path=/v1/sessions; \
             Max-Age=7776000"
        );
        assert!(
            set(&answer, true)
                .unwrap()
                .to_str()
                .unwrap()
                .ends_with("; Secure")
        );
        let mut headers = HeaderMap::new();
        let cookies = "einsora_session=s; einsora_client=v1.2.ef.01; einsora_clientx=no";
        headers.insert(COOKIE_HEADER, cookies.parse().unwrap());
        assert_eq!(from_request(&headers), ["v1.2.ef.01"]);
    }
}
