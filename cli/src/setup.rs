//! `einsora setup`: the owner's account, tenant and default quotas. The password comes on
//! standard input, so scripts and tests need no terminal and it never shows in `ps`.

use std::io::Read;

use anyhow::{Context, bail};
use einsora_api::setup::{SetupOutcome, setup_owner};
use einsora_runtime::settings::Settings;
use einsora_store::DatabaseUrl;

pub fn run(settings: &Settings, email: &str, reset: bool) -> anyhow::Result<()> {
    let password = read_password(std::io::stdin())?;
    // The database is made ready first, so setup works on a fresh installation.
    crate::migrate::run(settings)?;
    let url = DatabaseUrl::from_settings(settings)?;
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let outcome = runtime.block_on(async {
        let store = einsora_store::open(&url).await?;
        setup_owner(&*store, email, &password, reset).await
    })?;
    match outcome {
        SetupOutcome::Created => eprintln!("created the owner account {}", email.trim()),
        SetupOutcome::PasswordReset => {
            eprintln!(
                "set a new password for {}; its sessions have ended",
                email.trim()
            )
        }
    }
    Ok(())
}

/// All of standard input, less one trailing newline (`\n` or `\r\n`).
fn read_password(mut input: impl Read) -> anyhow::Result<String> {
    let mut text = String::new();
    input
        .read_to_string(&mut text)
        .context("reading the password from standard input")?;
    let password = text.strip_suffix('\n').unwrap_or(&text);
    let password = password.strip_suffix('\r').unwrap_or(password);
    if password.is_empty() {
        bail!("no password on standard input (einsora setup --password-stdin < file)");
    }
    Ok(password.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_trailing_newline_is_dropped() {
        let read = |s: &str| read_password(s.as_bytes()).unwrap();
        assert_eq!(read("a long password\n"), "a long password");
        assert_eq!(read("a long password\r\n"), "a long password");
        assert_eq!(read("ends in a space \n"), "ends in a space ");
        assert!(read_password("\n".as_bytes()).is_err());
        assert!(read_password("".as_bytes()).is_err());
    }
}
