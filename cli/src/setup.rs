//! `einsora setup`: the owner's account, tenant and default quotas. The password is asked for
//! in the terminal, or comes on standard input (`--password-stdin`) so scripts and tests need no
//! terminal; never as an argument, where `ps` would show it.

use std::io::{IsTerminal, Read};

use anyhow::{Context, bail};
use einsora_api::setup::{SetupOutcome, setup_owner};
use einsora_runtime::settings::Settings;
use einsora_store::DatabaseUrl;

use crate::terminal::prompt_hidden;

pub fn run(settings: &Settings, email: &str, stdin: bool, reset: bool) -> anyhow::Result<()> {
    // It holds a password: no core dump of it, and no other process of this user (the
    // service's, under `sudo einsora setup`) may attach to it. Linux's prctl; macOS has no
    // counterpart without unsafe code (ptrace's PT_DENY_ATTACH), so nothing is done there.
    #[cfg(target_os = "linux")]
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .context("making this process undumpable")?;
    let password = if stdin {
        read_password(std::io::stdin())?
    } else {
        ask_password()?
    };
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

/// The password, typed twice with the echo off.
fn ask_password() -> anyhow::Result<String> {
    if !std::io::stdin().is_terminal() {
        bail!(
            "no terminal to ask for the password in: pass it on standard input with --password-stdin"
        );
    }
    let password = prompt_hidden("Password (at least 12 characters): ")?;
    if prompt_hidden("Password again: ")? != password {
        bail!("the passwords differ; nothing was changed");
    }
    Ok(password)
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
