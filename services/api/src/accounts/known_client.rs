//! Known clients. Every sign-in hands the client a proof that it signed in to the account;
//! presenting it at a later sign-in gives the attempt a limiter bucket of its own, so no other
//! client's failures, a flood from the same address included, delay it (limiter.rs).
//!
//! A proof is `v1.<expiry>.<nonce>.<mac>`: the Unix second it expires, 128 random bits, and an
//! HMAC-SHA256 of the user, the expiry and the nonce, keyed by the SHA-256 of the account's
//! password hash (its PHC string). It needs no storage, holds across restarts and replicas, is
//! worth nothing for another account, and dies with the password: a new password voids every
//! proof. It is a secret: the gateway keeps it in an HttpOnly cookie, never in a log.

use std::time::Duration;

use einsora_core::ids::UserId;
use einsora_store::SecretHash;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use time::OffsetDateTime;
use tonic::metadata::MetadataMap;

use super::secrets;

/// The metadata that carries proofs: the gateway's on Login, the api's on its answer.
pub use einsora_proto::metadata::KNOWN_CLIENT as METADATA;
/// Ninety days; the gateway's cookie lasts as long.
pub const LIFETIME: Duration = Duration::from_secs(90 * 24 * 3600);

const VERSION: &str = "v1";
const NONCE_BYTES: usize = 16;
const KEY_CONTEXT: &[u8] = b"einsora known-client key\0";
const MAC_CONTEXT: &[u8] = b"einsora known-client proof v1\0";

/// A new proof that `user` (whose PHC string is `phc`) signed in at `now`.
pub fn issue(user: &UserId, phc: &str, now: OffsetDateTime) -> Result<String, getrandom::Error> {
    let mut nonce = [0u8; NONCE_BYTES];
    getrandom::fill(&mut nonce)?;
    let expiry = (now + LIFETIME).unix_timestamp();
    let mac = mac(user, phc, expiry, &nonce);
    Ok(format!(
        "{VERSION}.{expiry}.{}.{}",
        secrets::hex(&nonce),
        secrets::hex(&mac)
    ))
}

/// The proofs a request presents (any number; garbage among them is ignored).
pub fn presented(metadata: &MetadataMap) -> Vec<String> {
    metadata
        .get_all(METADATA)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter(|v| well_formed(v))
        .map(str::to_owned)
        .collect()
}

/// The limiter key of the first of `proofs` that is `user`'s and unexpired.
pub fn check(
    proofs: &[String],
    user: &UserId,
    phc: &str,
    now: OffsetDateTime,
) -> Option<SecretHash> {
    proofs
        .iter()
        .find(|proof| valid(proof, user, phc, now))
        .map(|proof| secrets::sha256(proof))
}

/// A proof's shape: checked before anything is looked up for it.
fn well_formed(proof: &str) -> bool {
    let hex = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
    let parts: Vec<&str> = proof.split('.').collect();
    matches!(
        parts.as_slice(),
        [VERSION, expiry, nonce, mac]
            if expiry.len() <= 20 && expiry.parse::<i64>().is_ok()
                && hex(nonce, 2 * NONCE_BYTES) && hex(mac, 64)
    )
}

fn valid(proof: &str, user: &UserId, phc: &str, now: OffsetDateTime) -> bool {
    let parts: Vec<&str> = proof.split('.').collect();
    let [VERSION, expiry, nonce, presented] = parts.as_slice() else {
        return false;
    };
    let (Ok(expiry), Some(nonce)) = (expiry.parse::<i64>(), unhex(nonce)) else {
        return false;
    };
    if expiry <= now.unix_timestamp() {
        return false;
    }
    let expected = secrets::hex(&mac(user, phc, expiry, &nonce));
    expected.as_bytes().ct_eq(presented.as_bytes()).into()
}

fn mac(user: &UserId, phc: &str, expiry: i64, nonce: &[u8]) -> [u8; 32] {
    let key = Sha256::new()
        .chain_update(KEY_CONTEXT)
        .chain_update(phc.as_bytes())
        .finalize();
    let mut message = MAC_CONTEXT.to_vec();
    message.extend_from_slice(user.to_string().as_bytes());
    message.push(0);
    message.extend_from_slice(&expiry.to_be_bytes());
    message.extend_from_slice(nonce);
    hmac_sha256(&key, &message)
}

/// HMAC-SHA256 (RFC 2104).
fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.map(|b| b ^ byte);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    let digit = |b: u8| char::from(b).to_digit(16);
    text.as_bytes()
        .chunks(2)
        .map(|pair| match pair {
            [hi, lo] => Some(u8::try_from(digit(*hi)? * 16 + digit(*lo)?).ok()?),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests;
