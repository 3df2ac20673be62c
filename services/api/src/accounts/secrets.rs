//! The secrets Einsora hands out (session IDs, CSRF tokens, API tokens, inference keys,
//! enrolment tokens, access tickets): random from the OS, and stored only as their SHA-256.

use einsora_store::SecretHash;
use subtle::ConstantTimeEq;

pub const TOKEN_PREFIX: &str = "tsk_";
const ENROLMENT_TOKEN_PREFIX: &str = "enr_";
/// Inference keys: they call endpoints at the access proxy, and nothing else.
pub const INFERENCE_KEY_PREFIX: &str = "isk_";
/// Base62 characters after the prefix: 32 × log2(62) ≈ 190 random bits.
const TOKEN_CHARS: usize = 32;
/// The prefix (`tsk_`, `enr_`) and four characters: enough to recognise a token, far too
/// little to guess it.
const DISPLAY_PREFIX_CHARS: usize = TOKEN_PREFIX.len() + 4;
/// Session IDs, CSRF tokens and tickets: 256 random bits, as hex.
const SECRET_BYTES: usize = 32;

const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

pub use einsora_store::secret_hash as sha256;

/// Compares two hashes in constant time.
pub fn same_hash(a: &SecretHash, b: &SecretHash) -> bool {
    a.ct_eq(b).into()
}

/// 256 random bits as 64 lowercase hex digits: a session ID, a CSRF token or a ticket.
pub fn new_secret() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; SECRET_BYTES];
    getrandom::fill(&mut bytes)?;
    Ok(hex(&bytes))
}

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A notebook's one-time ticket and the hash to store (`NewTicket`), valid for
/// `TICKET_LIFETIME`; `ApiInternalService.RedeemTicket` takes it once.
pub fn new_ticket() -> Result<(String, SecretHash), getrandom::Error> {
    let ticket = new_secret()?;
    let hash = sha256(&ticket);
    Ok((ticket, hash))
}

pub const TICKET_LIFETIME: std::time::Duration = std::time::Duration::from_secs(60);

pub fn looks_like_secret(s: &str) -> bool {
    s.len() == 2 * SECRET_BYTES && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// A new API token: `tsk_` and 32 base62 characters.
pub fn new_token() -> Result<String, getrandom::Error> {
    base62_token(TOKEN_PREFIX)
}

/// A new inference key: `isk_` and 32 base62 characters.
pub fn new_inference_key() -> Result<String, getrandom::Error> {
    base62_token(INFERENCE_KEY_PREFIX)
}

/// A new enrolment token: `enr_` and 32 base62 characters.
pub fn new_enrolment_token() -> Result<String, getrandom::Error> {
    base62_token(ENROLMENT_TOKEN_PREFIX)
}

fn base62_token(prefix: &str) -> Result<String, getrandom::Error> {
    let mut token = String::with_capacity(prefix.len() + TOKEN_CHARS);
    token.push_str(prefix);
    let mut chars = 0;
    while chars < TOKEN_CHARS {
        let mut bytes = [0u8; 64];
        getrandom::fill(&mut bytes)?;
        // 248 = 4 × 62: dropping the bytes above it keeps every character equally likely.
        for b in bytes
            .into_iter()
            .filter(|&b| b < 248)
            .take(TOKEN_CHARS - chars)
        {
            token.push(char::from(BASE62[usize::from(b % 62)]));
            chars += 1;
        }
    }
    Ok(token)
}

pub fn looks_like_token(s: &str) -> bool {
    has_form(s, TOKEN_PREFIX)
}

pub fn looks_like_inference_key(s: &str) -> bool {
    has_form(s, INFERENCE_KEY_PREFIX)
}

/// `prefix` and 32 base62 characters.
fn has_form(s: &str, prefix: &str) -> bool {
    s.strip_prefix(prefix).is_some_and(|rest| {
        rest.len() == TOKEN_CHARS && rest.bytes().all(|b| b.is_ascii_alphanumeric())
    })
}

/// What a token is shown as in lists and timelines (`tsk_Ab3x`, `isk_Ab3x`, `enr_Ab3x`).
pub fn display_prefix(token: &str) -> String {
    token.chars().take(DISPLAY_PREFIX_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_have_the_prefix_190_bits_and_differ() {
        let a = new_token().unwrap();
        let b = new_token().unwrap();
        assert_ne!(a, b);
        assert!(looks_like_token(&a), "{a}");
        assert_eq!(a.len(), 4 + 32);
        assert_eq!(display_prefix(&a).len(), 8);
        assert!(a.starts_with(&display_prefix(&a)));
        assert!(!looks_like_token("tsk_short"));
        assert!(!looks_like_token(&a.replacen("tsk_", "tsx_", 1)));
        assert!(!looks_like_token(&format!("{a}!")));
    }

    #[test]
    fn enrolment_tokens_have_their_own_prefix_and_190_bits() {
        let e = new_enrolment_token().unwrap();
        assert!(e.starts_with("enr_") && e.len() == 4 + 32, "{e}");
        assert!(e[4..].bytes().all(|b| b.is_ascii_alphanumeric()));
        assert_ne!(e, new_enrolment_token().unwrap());
        assert_eq!(display_prefix(&e), e[..8]);
        assert!(!looks_like_token(&e), "not an API token");
    }

    #[test]
    fn inference_keys_have_their_own_prefix_and_are_no_api_tokens() {
        let k = new_inference_key().unwrap();
        assert!(looks_like_inference_key(&k), "{k}");
        assert_eq!(k.len(), 4 + 32);
        assert_eq!(display_prefix(&k), k[..8]);
        assert!(!looks_like_token(&k), "an inference key manages nothing");
        assert!(!looks_like_inference_key(&new_token().unwrap()));
        assert!(!looks_like_inference_key("isk_short"));
        assert_ne!(k, new_inference_key().unwrap());
    }

    #[test]
    fn token_characters_cover_the_alphabet() {
        let seen: std::collections::BTreeSet<char> = (0..200)
            .flat_map(|_| new_token().unwrap().chars().skip(4).collect::<Vec<_>>())
            .collect();
        assert_eq!(
            seen.len(),
            62,
            "rejection sampling must reach every base62 character"
        );
    }

    #[test]
    fn secrets_are_256_bit_hex() {
        let s = new_secret().unwrap();
        assert!(looks_like_secret(&s), "{s}");
        assert_ne!(s, new_secret().unwrap());
        assert!(!looks_like_secret(&s.to_uppercase()));
        assert!(!looks_like_secret(&s[1..]));
    }

    #[test]
    fn hashes_compare_equal_only_when_equal() {
        let a = sha256("csrf-a");
        assert!(same_hash(&a, &sha256("csrf-a")));
        assert!(!same_hash(&a, &sha256("csrf-b")));
    }
}
