//! The database made ready, and the owner account made on the first run: asked for in the
//! terminal (the same as `einsora setup`), or, with no terminal, one line saying how to make it.
//! Dev auth mode seeds its own accounts and asks for nothing.

use std::io::IsTerminal;

use anyhow::bail;
use einsora_api::setup::{AuthMode, OWNER_SLUG, setup_owner};
use einsora_store::{DatabaseUrl, Store};

use super::plan::Plan;
use crate::terminal::{prompt, prompt_hidden};

const ATTEMPTS: usize = 3;

/// Migrates the database, then makes sure the installation has its owner.
pub async fn ensure(plan: &Plan) -> anyhow::Result<()> {
    let url = DatabaseUrl::from_settings(&plan.settings)?;
    let (store, _) = einsora_store::migrate(&url).await?;
    if plan.auth_mode == AuthMode::Dev || store.tenant_by_slug(OWNER_SLUG).await?.is_some() {
        return Ok(());
    }
    if !std::io::stdin().is_terminal() {
        bail!(
            "this installation has no owner account yet: create it with `einsora setup --email \
             <you@example.com>` (`--password-stdin` to pass the password on standard input; \
             `sudo einsora setup …` for the system service), or run `einsora up` in a terminal \
             to be asked"
        );
    }
    ask(&*store).await
}

/// Asks for the owner's email and password (not echoed, typed twice) until they are accepted.
async fn ask(store: &dyn Store) -> anyhow::Result<()> {
    eprintln!("Welcome to Einsora. Create the owner account of this installation.");
    let email = prompt("Email: ")?;
    for _ in 0..ATTEMPTS {
        let password = prompt_hidden("Password (at least 12 characters): ")?;
        if prompt_hidden("Password again: ")? != password {
            eprintln!("The passwords differ; try again.");
            continue;
        }
        match setup_owner(store, &email, &password, false).await {
            Ok(_) => {
                eprintln!("Created the owner account {}.", email.trim());
                return Ok(());
            }
            Err(err) => eprintln!("{err:#}"),
        }
    }
    bail!("no owner account was created; run `einsora up` again, or `einsora setup`")
}
