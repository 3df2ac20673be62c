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
/// Where the .deb and the .rpm put the unit.
const UNIT_FILES: [&str; 2] = [
    "/lib/systemd/system/einsora.service",
    "/usr/lib/systemd/system/einsora.service",
];
/// Present while systemd is the init system (sd_booted(3)).
const SYSTEMD_RUNNING: &str = "/run/systemd/system";
/// The client commands' settings, which an administrator's shell may well have and which
/// neither setup nor migrate reads: not refused, not passed on.
const CLIENT_SETTINGS: [&str; 3] = ["EINSORA_SERVER", "EINSORA_TOKEN", "EINSORA_CLI_CONFIG"];
/// What the command run as the service's user keeps of this environment, besides the file's.
const KEPT: [&str; 4] = ["PATH", "TERM", "LANG", "LC_ALL"];

/// Whether this command acts on the system service's installation: run as root, where a
/// package installed the service (its settings file or its unit), and no data directory of
/// root's own asked for.
pub fn applies(settings: &Settings) -> bool {
    rustix::process::geteuid().is_root()
        && !settings.is_set(DATA_DIR)
        && std::iter::once(ENV_FILE)
            .chain(UNIT_FILES)
            .any(|path| Path::new(path).exists())
}

/// `einsora setup` for the service: the owner made as the service's user, then the service
/// enabled and started.
pub fn setup() -> anyhow::Result<()> {
    let settings = rerun_as_service_user()?;
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

/// Runs this same command again as the service's user, with the service's settings exactly:
/// the settings file's, nothing of this environment's but [`KEPT`]. Returns those settings.
#[allow(clippy::disallowed_methods)] // KEPT is what the re-run keeps of this environment: not settings
pub fn rerun_as_service_user() -> anyhow::Result<Settings> {
    let inherited: Vec<String> = Settings::from_env()
        .names()
        .filter(|name| name.starts_with("EINSORA_") && !CLIENT_SETTINGS.contains(name))
        .map(str::to_owned)
        .collect();
    if let Some(name) = inherited.first() {
        bail!(
            "{name} is set here, but the service reads its settings from {ENV_FILE} only: put it \
             there, or unset it (or set EINSORA_DATA_DIR for an installation of your own)"
        );
    }
    let from_file = read_env_file(Path::new(ENV_FILE))?;
    let account = Account::named(USER)?;
    let exe = std::env::current_exe().context("finding this program")?;
    let mut command = Command::new(exe);
    command
        .args(std::env::args_os().skip(1))
        .env_clear()
        .envs(
            KEPT.iter()
                .filter_map(|name| Some((name, std::env::var_os(name)?))),
        )
        .envs(from_file.iter().map(|(k, v)| (k, v)))
        .env("HOME", &account.home)
        .env("USER", USER)
        .env("LOGNAME", USER)
        .current_dir(&account.home)
        .uid(account.uid)
        .gid(account.gid);
    let status = command
        .status()
        .with_context(|| format!("running as the {USER} user"))?;
    if !status.success() {
        bail!("as the {USER} user: {status}");
    }
    Ok(Settings::from_map(from_file))
}

/// The settings file, once it is root's alone to change (as sshd's StrictModes asks of its
/// files): whoever can write it chooses what the service runs with.
fn read_env_file(path: &Path) -> anyhow::Result<Vec<(String, String)>> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).with_context(|| {
        format!(
            "{}: the einsora package's settings file is missing; reinstall the package to \
             restore it (apt-get install --reinstall -o Dpkg::Options::=--force-confmiss einsora)",
            path.display()
        )
    })?;
    if meta.uid() != 0 || meta.mode() & 0o022 != 0 {
        bail!(
            "{}: must be owned by root and writable by root only (it is uid {}, mode {:o})",
            path.display(),
            meta.uid(),
            meta.mode() & 0o7777
        );
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    parse_env_file(&text).map_err(|e| anyhow::anyhow!("{}:{e}", path.display()))
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
        let uid: u32 = uid.parse().context("its uid")?;
        if uid == 0 {
            bail!("the account is root's uid; the service must run as a user of its own");
        }
        Ok(Account {
            uid,
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
        assert!(Account::parse("einsora:x:0:0::/root:/bin/sh").is_err());
        assert!(Account::parse("garbage").is_err());
    }
}
