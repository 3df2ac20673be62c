//! A ticket's grant as the access proxy holds it: an opaque ID, `session:<hash hex>` or
//! `token:<uuid>`, which only this module reads or writes. It names the credential that asked
//! for the ticket (never the credential's secret: a session by its ID's SHA-256).

use einsora_core::ids::TokenId;
use einsora_store::{Grant, SecretHash};

use crate::accounts::secrets;
use crate::caller::Presented;

/// At most this many grants in one LiveGrants call.
pub const MOST_PER_CALL: usize = 10_000;

/// The grant of a ticket asked for with `credential`.
pub(crate) fn of(credential: &Presented) -> Grant {
    match credential {
        Presented::Session { id_hash, .. } => Grant::Session(*id_hash),
        Presented::Token(token) => Grant::Token(token.id),
    }
}

pub fn encode(grant: &Grant) -> String {
    match grant {
        Grant::Session(hash) => format!("session:{}", secrets::hex(hash)),
        Grant::Token(id) => format!("token:{id}"),
    }
}

/// `None` for anything [`encode`] didn't make.
pub fn decode(text: &str) -> Option<Grant> {
    match text.split_once(':')? {
        ("session", hex) => Some(Grant::Session(unhex(hex)?)),
        ("token", id) => Some(Grant::Token(id.parse::<TokenId>().ok()?)),
        _ => None,
    }
}

fn unhex(text: &str) -> Option<SecretHash> {
    if text.len() != 64 || !text.is_ascii() {
        return None;
    }
    let mut out = [0_u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_round_trip_and_nothing_else_decodes() {
        let token = Grant::Token(TokenId::new());
        let session = Grant::Session([0xab; 32]);
        for grant in [token, session] {
            assert_eq!(decode(&encode(&grant)), Some(grant));
        }
        for bad in [
            "",
            "session:",
            "session:zz",
            &format!("session:{}", "é".repeat(32)),
            "token:not-a-uuid",
            "cookie:abc",
            "session",
        ] {
            assert_eq!(decode(bad), None, "{bad:?}");
        }
    }
}
