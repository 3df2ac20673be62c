//! Passwords: argon2id at OWASP's parameters (19 MiB, 2 passes, 1 lane), hashed on tokio's
//! blocking pool behind a semaphore, so a login flood queues here instead of exhausting memory
//! or starving the API's other calls.

use std::sync::Arc;
use std::time::Duration;

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};
use tokio::sync::Semaphore;
use tonic::Status;

use crate::status;

pub const MEMORY_KIB: u32 = 19_456;
pub const PASSES: u32 = 2;
pub const LANES: u32 = 1;
pub const MIN_CHARS: usize = 12;
/// Long enough for any passphrase, short enough that hashing it costs nothing extra. Counted
/// in characters like the minimum, as the OpenAPI document's `maxLength` counts.
pub const MAX_CHARS: usize = 1024;
/// Hashes at once: each holds 19 MiB and a core for ~20-50 ms.
const CONCURRENT_HASHES: usize = 2;
/// A caller waits this long for a turn before being told to come back.
const QUEUE_WAIT: Duration = Duration::from_secs(10);

fn argon2() -> Argon2<'static> {
    let params =
        Params::new(MEMORY_KIB, PASSES, LANES, None).expect("OWASP's parameters are valid");
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
}

/// A new PHC string for `password`, on the calling thread (blocking: ~20-50 ms).
pub fn hash_blocking(password: &str) -> Result<String, argon2::password_hash::Error> {
    let mut salt = [0u8; 16];
    getrandom::fill(&mut salt).map_err(|_| argon2::password_hash::Error::Crypto)?;
    let salt = SaltString::encode_b64(&salt)?;
    Ok(argon2()
        .hash_password(password.as_bytes(), &salt)?
        .to_string())
}

fn verify_blocking(password: &str, phc: &str) -> bool {
    PasswordHash::new(phc).is_ok_and(|h| argon2().verify_password(password.as_bytes(), &h).is_ok())
}

/// The rule for a new password, in one place (setup, change).
pub fn check_new(password: &str) -> Result<(), String> {
    let chars = password.chars().count();
    if chars < MIN_CHARS {
        return Err(format!("a password needs at least {MIN_CHARS} characters"));
    }
    if chars > MAX_CHARS {
        return Err(format!(
            "a password can have at most {MAX_CHARS} characters"
        ));
    }
    Ok(())
}

/// Hashing and checking passwords, a few at a time.
#[derive(Debug)]
pub struct Passwords {
    permits: Arc<Semaphore>,
    /// Checked when the email is unknown, so that answer takes as long as a wrong password.
    dummy_phc: String,
}

impl Passwords {
    pub async fn new() -> anyhow::Result<Self> {
        let dummy_phc = tokio::task::spawn_blocking(|| {
            let password = super::secrets::new_secret()?;
            hash_blocking(&password).map_err(|e| anyhow::anyhow!("hashing: {e}"))
        })
        .await??;
        Ok(Passwords {
            permits: Arc::new(Semaphore::new(CONCURRENT_HASHES)),
            dummy_phc,
        })
    }

    pub async fn hash(&self, password: String) -> Result<String, Status> {
        self.blocking(move || hash_blocking(&password))
            .await?
            .map_err(status::internal)
    }

    /// Whether `password` is the one `phc` was made from; with no PHC string (unknown email),
    /// a dummy is checked so that the answer takes as long, and is no.
    pub async fn verify(&self, password: String, phc: Option<String>) -> Result<bool, Status> {
        let known = phc.is_some();
        let phc = phc.unwrap_or_else(|| self.dummy_phc.clone());
        let matches = self
            .blocking(move || {
                password.chars().count() <= MAX_CHARS && verify_blocking(&password, &phc)
            })
            .await?;
        Ok(known && matches)
    }

    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Status> {
        let permit = tokio::time::timeout(QUEUE_WAIT, Arc::clone(&self.permits).acquire_owned())
            .await
            .map_err(|_| Status::unavailable("too many sign-ins at once; try again shortly"))?
            .map_err(status::internal)?;
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            work()
        })
        .await
        .map_err(status::internal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phc_strings_carry_owasp_parameters() {
        let phc = hash_blocking("correct horse battery staple").unwrap();
        let parsed = PasswordHash::new(&phc).unwrap();
        assert_eq!(parsed.algorithm.as_str(), "argon2id");
        assert_eq!(parsed.version, Some(0x13));
        let params = Params::try_from(&parsed).unwrap();
        assert_eq!(
            (params.m_cost(), params.t_cost(), params.p_cost()),
            (19_456, 2, 1)
        );
        assert!(phc.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{phc}");
        assert!(verify_blocking("correct horse battery staple", &phc));
        assert!(!verify_blocking("correct horse battery stapler", &phc));
    }

    #[test]
    fn salts_differ() {
        assert_ne!(
            hash_blocking("same password!").unwrap(),
            hash_blocking("same password!").unwrap()
        );
    }

    #[test]
    fn the_openapi_rules_bound_new_passwords_as_check_new_does() {
        let rules = einsora_proto::schema::Schema::load().unwrap().field_rules();
        let (_, new) = rules
            .iter()
            .find(|(f, _)| f == "einsora.accounts.v1.ChangePasswordRequest.new_password")
            .unwrap();
        assert!(new.required);
        let chars = |n: Option<u32>| usize::try_from(n.unwrap()).unwrap();
        assert_eq!(chars(new.min_length), MIN_CHARS);
        assert_eq!(chars(new.max_length), MAX_CHARS);
    }

    #[test]
    fn new_passwords_need_twelve_characters() {
        assert!(check_new("eleven char").is_err());
        assert!(check_new("twelve chars").is_ok());
        assert!(check_new("ünïcödé pässwörd").is_ok());
        assert!(check_new(&"é".repeat(MAX_CHARS)).is_ok());
        assert!(check_new(&"x".repeat(MAX_CHARS + 1)).is_err());
    }

    #[tokio::test]
    async fn unknown_users_never_verify() {
        let passwords = Passwords::new().await.unwrap();
        let phc = passwords.hash("a good long password".into()).await.unwrap();
        assert!(
            passwords
                .verify("a good long password".into(), Some(phc))
                .await
                .unwrap()
        );
        assert!(
            !passwords
                .verify("a good long password".into(), None)
                .await
                .unwrap()
        );
    }
}
