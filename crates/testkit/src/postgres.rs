//! A throwaway PostgreSQL server from the installed server binaries (initdb + pg_ctl in a temp
//! directory), never a mock. One per test process, shared by its tests, each of which takes a
//! fresh database; a watchdog stops the server and removes its directory when the process ends,
//! however it ends.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{Context, Result, bail};

use crate::Port;

const SUPERUSER: &str = "einsora";

#[derive(Debug)]
pub struct TempPostgres {
    bin: PathBuf,
    dir: PathBuf,
    /// Held for as long as this lives, so no one takes it while the server is stopped.
    port: Port,
    /// What `pg_ctl start` is given, to start it again after `stop`.
    options: String,
    /// The unprivileged user the server runs as when tests run as root (Postgres refuses root).
    run_as: Option<(u32, u32)>,
    next_db: AtomicU32,
}

impl TempPostgres {
    /// The process's shared server, started on first use.
    pub fn shared() -> &'static TempPostgres {
        static SERVER: OnceLock<TempPostgres> = OnceLock::new();
        SERVER.get_or_init(|| match TempPostgres::start(None) {
            Ok(pg) => pg,
            Err(e) => panic!("can't start a throwaway Postgres: {e:#}"),
        })
    }

    /// The directory holding `initdb`, `pg_ctl` and `pgbench`: EINSORA_PG_BIN, else the newest
    /// under /usr/lib/postgresql/<version>/bin (Debian's layout), else PATH.
    pub fn bin_dir() -> Result<PathBuf> {
        if let Some(dir) = std::env::var_os("EINSORA_PG_BIN") {
            return Ok(PathBuf::from(dir));
        }
        let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let v = e.file_name().to_str()?.parse().ok()?;
                let bin = e.path().join("bin");
                bin.join("initdb").exists().then_some((v, bin))
            })
            .collect();
        versions.sort();
        if let Some((_, bin)) = versions.pop() {
            return Ok(bin);
        }
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .find(|d| d.join("initdb").exists())
            .context(
                "no PostgreSQL server binaries (initdb): install postgresql or set EINSORA_PG_BIN",
            )
    }

    /// A server of its own, for tests that stop and start it.
    pub fn own() -> Result<Self> {
        TempPostgres::start(None)
    }

    /// A server of its own that also speaks TLS with this certificate and key (PEM), for tests
    /// of encrypted connections.
    pub fn with_tls(cert_pem: &str, key_pem: &str) -> Result<Self> {
        TempPostgres::start(Some((cert_pem, key_pem)))
    }

    fn start(tls: Option<(&str, &str)>) -> Result<Self> {
        let bin = Self::bin_dir()?;
        let dir = tempfile::Builder::new()
            .prefix("einsora-pg-")
            .tempdir()?
            .keep();
        let run_as = unprivileged_user()?;
        if let Some((uid, gid)) = run_as {
            std::os::unix::fs::chown(&dir, Some(uid), Some(gid))?;
        }
        let data = dir.join("data");
        let port = Port::try_on(std::net::Ipv4Addr::LOCALHOST.into())?;
        let mut options = format!(
            "-p {} -c listen_addresses=127.0.0.1 -c unix_socket_directories={} -c fsync=off \
             -c max_connections=200",
            port.port(),
            dir.display()
        );
        if tls.is_some() {
            options.push_str(" -c ssl=on -c ssl_cert_file=server.crt -c ssl_key_file=server.key");
        }
        let pg = TempPostgres {
            bin,
            dir,
            port,
            options,
            run_as,
            next_db: AtomicU32::new(0),
        };
        pg.run(
            Command::new(pg.bin.join("initdb"))
                .args([
                    "--auth=trust",
                    "--encoding=UTF8",
                    "--no-locale",
                    "--no-sync",
                    "-U",
                    SUPERUSER,
                    "-D",
                ])
                .arg(&data),
        )?;
        if let Some((cert, key)) = tls {
            pg.write_private(&data.join("server.crt"), cert)?;
            pg.write_private(&data.join("server.key"), key)?;
        }
        pg.start_again()?;
        pg.spawn_watchdog(&data)?;
        Ok(pg)
    }

    /// Stops the server at once (open connections are cut), keeping its data.
    pub fn stop(&self) -> Result<()> {
        self.run(
            Command::new(self.bin.join("pg_ctl"))
                .args(["-w", "-t", "60", "-m", "fast", "-D"])
                .arg(self.dir.join("data"))
                .arg("stop"),
        )
    }

    /// Starts the server (again), on the same port with the same data.
    pub fn start_again(&self) -> Result<()> {
        self.run(
            Command::new(self.bin.join("pg_ctl"))
                .args(["-w", "-t", "60", "-D"])
                .arg(self.dir.join("data"))
                .args(["-o", &self.options, "-l"])
                .arg(self.dir.join("server.log"))
                .arg("start"),
        )
    }

    /// Postgres refuses a key file others can read, and runs as `run_as`.
    fn write_private(&self, path: &Path, contents: &str) -> Result<()> {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(path, contents)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        if let Some((uid, gid)) = self.run_as {
            std::os::unix::fs::chown(path, Some(uid), Some(gid))?;
        }
        Ok(())
    }

    /// A new, empty database on this server.
    pub fn fresh_database(&self) -> Result<String> {
        let name = format!(
            "t{}_{}",
            std::process::id(),
            self.next_db.fetch_add(1, Ordering::Relaxed)
        );
        self.run(
            Command::new(self.bin.join("createdb"))
                .args([
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &self.port.port().to_string(),
                    "-U",
                    SUPERUSER,
                ])
                .arg(&name),
        )?;
        Ok(self.url(&name))
    }

    pub fn url(&self, database: &str) -> String {
        format!("postgres://{SUPERUSER}@{}/{database}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port.port()
    }

    pub fn bin(&self) -> &Path {
        &self.bin
    }

    fn run(&self, cmd: &mut Command) -> Result<()> {
        if let Some((uid, gid)) = self.run_as {
            cmd.uid(uid).gid(gid);
        }
        let out = cmd.current_dir(&self.dir).stdin(Stdio::null()).output()?;
        if !out.status.success() {
            bail!(
                "{:?} failed: {}{}",
                cmd.get_program(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    }

    /// Stops the server (by the PID in its postmaster.pid: SIGQUIT is an immediate shutdown) and
    /// removes its directory once this process is gone. It runs as this process's user, which
    /// can signal both this process and the server.
    fn spawn_watchdog(&self, data: &Path) -> Result<()> {
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 0.5; done; \
             pg=$(head -n 1 '{data}/postmaster.pid'); kill -QUIT \"$pg\"; \
             while kill -0 \"$pg\" 2>/dev/null; do sleep 0.1; done; rm -rf '{dir}'",
            pid = std::process::id(),
            data = data.display(),
            dir = self.dir.display(),
        );
        Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .context("starting the Postgres watchdog")?;
        Ok(())
    }
}

/// Postgres refuses to run as root: under root, use the `postgres` account (or `nobody`).
fn unprivileged_user() -> Result<Option<(u32, u32)>> {
    let passwd = std::fs::read_to_string("/etc/passwd")?;
    let entry = |name: &str| {
        passwd.lines().find_map(|line| {
            let f: Vec<&str> = line.split(':').collect();
            (f.first() == Some(&name) && f.len() > 3)
                .then(|| Some((f[2].parse().ok()?, f[3].parse().ok()?)))
                .flatten()
        })
    };
    let me = std::fs::metadata("/proc/self").map(|m| std::os::unix::fs::MetadataExt::uid(&m))?;
    if me != 0 {
        return Ok(None);
    }
    entry("postgres")
        .or_else(|| entry("nobody"))
        .map(Some)
        .context("running as root and found no postgres or nobody account to run Postgres as")
}
