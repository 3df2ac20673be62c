//! Accounts that exist before anyone can sign in: the owner's (`einsora setup`), and in
//! EINSORA_AUTH_MODE=dev two seeded tenants with one user each, so isolation can be tried.

use anyhow::{Context, bail};
use einsora_core::ids::{TenantId, UserId};
use einsora_core::role::Role;
use einsora_runtime::settings::{ConfigError, Settings};
use einsora_store::{NewTenant, NewUser, QuotaClass, Store};

use crate::accounts::{normalize_email, passwords, secrets};

pub const AUTH_MODE: &str = "EINSORA_AUTH_MODE";
pub const OWNER_SLUG: &str = "owner";
/// The trusted dev tenant, which stands for the owner in dev auth mode.
pub const DEV_OWNER_SLUG: &str = "acme";

/// `local`: accounts made with `einsora setup`; `dev`: also the seeded dev accounts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMode {
    Local,
    Dev,
}

impl AuthMode {
    pub fn from_settings(settings: &Settings) -> Result<Self, ConfigError> {
        settings.choice(
            AUTH_MODE,
            &[("local", AuthMode::Local), ("dev", AuthMode::Dev)],
            "local",
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetupOutcome {
    Created,
    PasswordReset,
}

/// Creates the owner's tenant (`owner`, unlimited quota for every class until a configured
/// quota says otherwise) and account; with `reset`, sets a new password for an existing
/// account instead and ends its sessions.
pub async fn setup_owner(
    store: &dyn Store,
    email: &str,
    password: &str,
    reset: bool,
) -> anyhow::Result<SetupOutcome> {
    let email = normalize_email(email);
    check_email(&email)?;
    passwords::check_new(password).map_err(anyhow::Error::msg)?;
    let phc = hash(password).await?;
    match (store.password_login(&email).await?, reset) {
        (Some(login), true) => {
            store.set_password(login.user.id, &phc).await?;
            store.delete_other_sessions(login.user.id, None).await?;
            Ok(SetupOutcome::PasswordReset)
        }
        (Some(_), false) => {
            bail!("{email} already has an account: add --reset-password to set a new password")
        }
        (None, true) => bail!("there is no account for {email} to reset"),
        (None, false) => {
            if store.tenant_by_slug(OWNER_SLUG).await?.is_some() {
                bail!(
                    "this installation already has its owner: add --reset-password with the \
                     owner's email to set a new password"
                );
            }
            let tenant = create_tenant(store, OWNER_SLUG, "Owner", true).await?;
            create_user(store, tenant, &email, phc).await?;
            Ok(SetupOutcome::Created)
        }
    }
}

/// A dev account and its password, printed once at start-up (dev credentials by design).
#[derive(Debug, Clone)]
pub struct DevAccount {
    pub tenant: &'static str,
    pub email: &'static str,
    pub password: String,
}

/// Seeds `acme` (trusted) and `globex` (not) with one user each, and gives both users a new
/// random password at every start; safe to run again.
pub async fn seed_dev(store: &dyn Store) -> anyhow::Result<Vec<DevAccount>> {
    let mut accounts = Vec::new();
    for (slug, name, trusted, email) in [
        (DEV_OWNER_SLUG, "Acme", true, "dev@acme"),
        ("globex", "Globex", false, "dev@globex"),
    ] {
        let tenant = match store.tenant_by_slug(slug).await? {
            Some(id) => id,
            None => create_tenant(store, slug, name, trusted).await?,
        };
        let password = secrets::new_secret()?.chars().take(24).collect::<String>();
        let phc = hash(&password).await?;
        match store.password_login(email).await? {
            Some(login) => store.set_password(login.user.id, &phc).await?,
            None => create_user(store, tenant, email, phc).await?,
        }
        accounts.push(DevAccount {
            tenant: slug,
            email,
            password,
        });
    }
    Ok(accounts)
}

/// On standard output, not the log: the log never holds a password.
/// A closed standard output is no reason to stop the api, so write errors are ignored.
pub fn announce(accounts: &[DevAccount]) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "EINSORA_AUTH_MODE=dev: development accounts (new passwords at every start):"
    );
    for a in accounts {
        let _ = writeln!(
            out,
            "  tenant {:<8} email {:<12} password {}",
            a.tenant, a.email, a.password
        );
    }
    let _ = out.flush();
}

fn check_email(email: &str) -> anyhow::Result<()> {
    crate::accounts::check_email(email).map_err(anyhow::Error::msg)
}

async fn hash(password: &str) -> anyhow::Result<String> {
    let password = password.to_owned();
    tokio::task::spawn_blocking(move || passwords::hash_blocking(&password))
        .await?
        .map_err(|e| anyhow::anyhow!("hashing the password: {e}"))
}

async fn create_tenant(
    store: &dyn Store,
    slug: &str,
    name: &str,
    trusted: bool,
) -> anyhow::Result<TenantId> {
    let id = TenantId::new();
    store
        .create_tenant(&NewTenant {
            id,
            slug: slug.into(),
            name: name.into(),
            trusted,
        })
        .await
        .with_context(|| format!("creating the tenant {slug:?}"))?;
    // Unlimited for every class: the machines' capacity is the real limit.
    store.set_quota(id, &QuotaClass::Default, None).await?;
    Ok(id)
}

async fn create_user(
    store: &dyn Store,
    tenant: TenantId,
    email: &str,
    phc: String,
) -> anyhow::Result<()> {
    let user = NewUser {
        id: UserId::new(),
        tenant_id: tenant,
        email: email.into(),
        display_name: email.split('@').next().unwrap_or(email).into(),
        // Each account made here founds its tenant.
        role: Role::Owner,
        phc,
    };
    Ok(store.create_user(&user).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails_need_an_at_and_no_spaces() {
        assert!(check_email("you@example.com").is_ok());
        assert!(check_email("dev@acme").is_ok());
        assert!(check_email("you").is_err());
        assert!(check_email("@example.com").is_err());
        assert!(check_email("you @example.com").is_err());
    }

    #[test]
    fn auth_mode_defaults_to_local() {
        let mode = |vars: &[(&str, &str)]| {
            AuthMode::from_settings(&Settings::from_map(vars.iter().copied()))
        };
        assert_eq!(mode(&[]).unwrap(), AuthMode::Local);
        assert_eq!(mode(&[(AUTH_MODE, "dev")]).unwrap(), AuthMode::Dev);
        assert!(mode(&[(AUTH_MODE, "none")]).is_err());
    }
}
