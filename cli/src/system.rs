//! The system service's installation (packaging/, docs/install.md): where a package installed
//! the unit and its settings file, `sudo einsora setup` and `sudo einsora migrate` act on the
//! service's data, with the file's settings, as the service's user — never as root, whose files
//! in the data directory the service could not open — and setup then starts the service.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail};
use einsora_runtime::settings::{DATA_DIR, Settings};

/// The service's settings, every `EINSORA_*` it reads (systemd's `EnvironmentFile`).
pub const ENV_FILE: &str = "/etc/einsora/einsora.env";
/// The system user the service runs as.
pub const USER: &str = "einsora";
const UNIT: &str = "einsora.service";
/// Present while systemd is the init system (sd_booted(3)).
const SYSTEMD_RUNNING: &str = "/run/systemd/system";

/// Whether this command acts on the system service's installation: run as root, with the
/// package's settings file there, and no data directory of root's own asked for.
pub fn applies(settings: &Settings) -> bool {
    rustix::process::geteuid().is_root()
        && !settings.is_set(DATA_DIR)
        && Path::new(ENV_FILE).exists()
}

/// `einsora setup` for the service: the owner made as the service's user, then the service
/// enabled and started.
pub fn setup() -> anyhow::Result<()> {
    let settings = run_as_service()?;
    let http_addr = settings.socket_addr(einsora_gateway::HTTP_ADDR, "127.0.0.1:8080")?;
    if !Path::new(SYSTEMD_RUNNING).exists() {
        eprintln!(
            "systemd isn't running on this machine, so nothing was started: run `einsora up` as \
             the {USER} user with the settings in {ENV_FILE} (docs/install.md, \"Without systemd\")"
        );
        return Ok(());
    }
    let status = Command::new("systemctl")
        .args(["enable", "--now", UNIT])
        .status()
        .context("running systemctl")?;
    if !status.success() {
        bail!("systemctl enable --now {UNIT}: {status}; see `systemctl status {UNIT}`");
    }
    eprintln!(
        "Einsora runs as the {UNIT} service and opens at http://{http_addr}/ once it is ready \
         (systemctl status einsora, journalctl -u einsora)"
    );
    Ok(())
}

/// Runs this same command again as the service's user, with the settings file's `EINSORA_*`
/// under this process's own (which win), and returns the settings it ran with.
pub fn run_as_service() -> anyhow::Result<Settings> {
    let ours = Settings::from_env();
    let text = std::fs::read_to_string(ENV_FILE).with_context(|| format!("reading {ENV_FILE}"))?;
    let from_file: Vec<(String, String)> = parse_env_file(&text)
        .map_err(|e| anyhow::anyhow!("{ENV_FILE}:{e}"))?
        .into_iter()
        .filter(|(name, _)| !ours.is_set(name))
        .collect();
    let account = Account::named(USER)?;
    let exe = std::env::current_exe().context("finding this program")?;
    let status = Command::new(exe)
        .args(std::env::args_os().skip(1))
        .envs(from_file.iter().map(|(k, v)| (k, v)))
        .env("HOME", &account.home)
        .env("USER", USER)
        .env("LOGNAME", USER)
        .current_dir(&account.home)
        .uid(account.uid)
        .gid(account.gid)
        .status()
        .with_context(|| format!("running as the {USER} user"))?;
    if !status.success() {
        bail!("as the {USER} user: {status}");
    }
    Ok(from_file
        .into_iter()
        .fold(ours, |settings, (name, value)| settings.with(&name, value)))
}

/// A system account, as the system's name service knows it (`getent passwd`).
#[derive(Debug, PartialEq, Eq)]
struct Account {
    uid: u32,
    gid: u32,
    home: String,
}

impl Account {
    fn named(name: &str) -> anyhow::Result<Account> {
        let out = Command::new("getent")
            .args(["passwd", name])
            .output()
            .context("running getent")?;
        if !out.status.success() {
            bail!("there is no {name} user: reinstall the einsora package, which makes it");
        }
        Account::parse(&String::from_utf8_lossy(&out.stdout))
            .with_context(|| format!("getent passwd {name}"))
    }

    /// `name:password:uid:gid:gecos:home:shell`.
    fn parse(line: &str) -> anyhow::Result<Account> {
        let fields: Vec<&str> = line.trim_end().split(':').collect();
        let [_, _, uid, gid, _, home, _] = fields.as_slice() else {
            bail!("not a passwd entry");
        };
        Ok(Account {
            uid: uid.parse().context("its uid")?,
            gid: gid.parse().context("its gid")?,
            home: (*home).to_owned(),
        })
    }
}

/// The `EINSORA_*` assignments of a systemd environment file: `NAME=value` lines, `#` and `;`
/// comments, blank lines, a value in one pair of quotes taken as what they hold. Other names
/// are the service's own business and skipped. An error names the line.
fn parse_env_file(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut vars = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let Some((name, value)) = line.split_once('=') else {
            return Err(format!("{}: not NAME=value: {line:?}", number + 1));
        };
        let name = name.trim();
        let well_formed = !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !well_formed {
            return Err(format!("{}: {name:?} is not a variable's name", number + 1));
        }
        if !name.starts_with("EINSORA_") {
            continue;
        }
        let value = value.trim();
        let unquoted = ['"', '\'']
            .iter()
            .find_map(|q| value.strip_prefix(*q)?.strip_suffix(*q))
            .unwrap_or(value);
        vars.push((name.to_owned(), unquoted.to_owned()));
    }
    Ok(vars)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_env_file_gives_its_einsora_settings_unquoted() {
        let text = "# a comment\n; another\n\nEINSORA_DATA_DIR=/var/lib/einsora\n  \
                    EINSORA_HTTP_ADDR = \"0.0.0.0:8080\"\nEINSORA_LOG='info'\nRUST_BACKTRACE=1\n\
                    #EINSORA_REGION=local\n";
        assert_eq!(
            parse_env_file(text).unwrap(),
            [
                ("EINSORA_DATA_DIR".into(), "/var/lib/einsora".into()),
                ("EINSORA_HTTP_ADDR".into(), "0.0.0.0:8080".into()),
                ("EINSORA_LOG".into(), "info".into()),
            ]
        );
    }

    #[test]
    fn a_line_that_isnt_an_assignment_is_named() {
        assert_eq!(
            parse_env_file("EINSORA_LOG=info\nexport EINSORA_REGION=local\n").unwrap_err(),
            "2: \"export EINSORA_REGION\" is not a variable's name"
        );
        assert_eq!(
            parse_env_file("\n\nEINSORA_LOG\n").unwrap_err(),
            "3: not NAME=value: \"EINSORA_LOG\""
        );
    }

    #[test]
    fn a_passwd_entry_gives_the_account() {
        assert_eq!(
            Account::parse("einsora:x:998:997::/var/lib/einsora:/usr/sbin/nologin\n").unwrap(),
            Account {
                uid: 998,
                gid: 997,
                home: "/var/lib/einsora".into()
            }
        );
        assert!(Account::parse("einsora:x:abc:997::/h:/s").is_err());
        assert!(Account::parse("garbage").is_err());
    }
}
