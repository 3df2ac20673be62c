//! A macos-native workload's sandbox, as the profile `sandbox-exec -f` takes (Apple's SBPL),
//! written from a typed description so that every workload's is the same text but for its
//! places. Everything is denied unless a rule below allows it; each rule says which attack it
//! stops or what the workload needs it for. What macOS really enforces can only be shown on a
//! Mac (`scripts/mac-check`, to come); here, [`check`] evaluates the rules this module writes.
//!
//! The network: the server's one Unix socket in its run directory is its only listener. No IP
//! bind or inbound connection of any kind (an explicit `bind`/`listen` on TCP or UDP), and no
//! UDP at all, since a UDP `sendto` binds its socket implicitly and can then receive: name
//! resolution goes through mDNSResponder's Unix socket, not UDP. With `outbound`, TCP
//! connections out (the owner's egress); without, none.
//!
//! Socket paths: `sun_path` on macOS holds 104 bytes with the terminating NUL, so a socket path
//! is at most 103 bytes; a longer one can't be bound, and [`Profile::new`] refuses it, naming
//! its length (the default layout under `~/Library/Application Support/Einsora/agent/run/<id>/`
//! passes that limit for any user name longer than five bytes: the driver must lay out run
//! directories elsewhere).

pub mod check;
#[cfg(test)]
mod tests;

use std::fmt::Write;
use std::path::{Component, Path, PathBuf};

/// The longest Unix socket path macOS can bind: `sun_path` is 104 bytes, NUL included.
pub const MACOS_SOCKET_PATH_MAX: usize = 103;

/// The system's parts a Python server reads: its frameworks, libraries and programs.
const SYSTEM_READ: &[&str] = &[
    "/System",
    "/usr/lib",
    "/usr/share",
    "/usr/bin",
    "/bin",
    "/Library/Apple",
    "/private/var/db/timezone",
    "/dev",
];
/// The system's programs a server may start (`/bin/sh` for a subprocess, `/usr/bin/env`).
const SYSTEM_EXEC: &[&str] = &["/usr/bin", "/bin"];
/// Where macOS resolves names: mDNSResponder's socket, instead of UDP to a DNS server.
const RESOLVER_SOCKET: &str = "/private/var/run/mDNSResponder";
/// The GPU's user clients Metal opens, and the services it looks up (its shader compiler).
const METAL_IOKIT: &[&str] = &["AGXDeviceUserClient", "IOSurfaceRootUserClient"];
const METAL_SERVICES: &[&str] = &["com.apple.MTLCompilerService", "com.apple.CARenderServer"];

/// What a workload's sandbox allows, besides the system's read-only parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// Its files (a notebook's; an endpoint's private model copy): read and written.
    pub data: PathBuf,
    /// Its run directory: its server's socket and its kernels' IPC sockets, nothing else's.
    pub run: PathBuf,
    /// Its own temporary directory (`TMPDIR`).
    pub tmp: PathBuf,
    /// Read and run, never written: its environment (the uv environment) and launcher.
    pub programs: Vec<PathBuf>,
    /// Read, never written: its token file.
    pub read_only: Vec<PathBuf>,
    /// The Unix socket its server listens on, in `run`.
    pub socket: PathBuf,
    /// The Apple GPU, reserved for it (Metal).
    pub gpu: bool,
    /// TCP connections out (the owner's egress), where the class allows it.
    pub outbound: bool,
}

/// Why a profile can't be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    #[error("{0}: a sandbox's path must be absolute, with no `.` or `..` in it")]
    NotCanonical(PathBuf),
    #[error("{0:?}: a sandbox's path must be UTF-8 with no quote, backslash or control character")]
    Unquotable(PathBuf),
    #[error(
        "{path}: a socket path of {length} bytes, over macOS's limit of {MACOS_SOCKET_PATH_MAX} \
         (sun_path holds 104 with its NUL); set EINSORA_AGENT_STATE_DIR to a shorter directory"
    )]
    SocketPathTooLong { path: PathBuf, length: usize },
    #[error("{0}: the server's socket must be in its run directory")]
    SocketOutsideRun(PathBuf),
}

impl Profile {
    /// The description, once every path is one a profile can name exactly and the socket can
    /// be bound.
    pub fn new(profile: Profile) -> Result<Profile, ProfileError> {
        let paths = [&profile.data, &profile.run, &profile.tmp, &profile.socket]
            .into_iter()
            .chain(&profile.programs)
            .chain(&profile.read_only);
        for path in paths {
            quotable(path)?;
        }
        let length = profile.socket.as_os_str().len();
        if length > MACOS_SOCKET_PATH_MAX {
            return Err(ProfileError::SocketPathTooLong {
                path: profile.socket.clone(),
                length,
            });
        }
        if profile.socket.parent() != Some(profile.run.as_path()) {
            return Err(ProfileError::SocketOutsideRun(profile.socket.clone()));
        }
        Ok(profile)
    }

    /// The profile's text, for `sandbox-exec -f`.
    pub fn render(&self) -> String {
        let mut out = String::from("(version 1)\n");
        let mut rule = |why: &str, text: String| {
            let _ = writeln!(out, "\n; {why}\n{text}");
        };
        let paths = |filter: &str, paths: &mut dyn Iterator<Item = &Path>| {
            paths
                .map(|p| format!(" ({filter} {})", quoted(p)))
                .collect::<String>()
        };
        rule(
            "Anything not allowed below is denied: files, network, processes, IPC, devices.",
            "(deny default)".into(),
        );
        rule(
            "Its own processes: the server, its kernels and their children, signalling only \
             each other.",
            "(allow process-fork)\n(allow signal (target same-sandbox))".into(),
        );
        let programs = paths(
            "subpath",
            &mut self
                .programs
                .iter()
                .map(PathBuf::as_path)
                .chain(SYSTEM_EXEC.iter().map(Path::new)),
        );
        rule(
            "Programs from its environment and the system's only: a file it downloaded or \
             wrote into its directories can't be run as a program.",
            format!("(allow process-exec{programs})"),
        );
        let readable = paths(
            "subpath",
            &mut SYSTEM_READ
                .iter()
                .map(Path::new)
                .chain(self.programs.iter().map(PathBuf::as_path)),
        );
        rule(
            "Reading the system's frameworks and libraries and its environment; not the \
             owner's home, other workloads' files, or the agent's state. A file's metadata \
             anywhere (Python finds modules by stat): its name and size, not its contents.",
            format!("(allow file-read*{readable})\n(allow file-read-metadata)"),
        );
        let read_only = paths("literal", &mut self.read_only.iter().map(PathBuf::as_path));
        rule(
            "Its token, read but never replaced.",
            format!("(allow file-read*{read_only})"),
        );
        let own = paths(
            "subpath",
            &mut [&self.data, &self.run, &self.tmp]
                .into_iter()
                .map(PathBuf::as_path),
        );
        rule(
            "Writing only its own directories: nothing outside them (the owner's files, other \
             workloads', the agent's) can be changed.",
            format!(
                "(allow file-read* file-write*{own})\n(allow file-write* (literal \"/dev/null\"))"
            ),
        );
        rule(
            "The system's information and shared memory within the sandbox (PyTorch's \
             workers, Python's multiprocessing).",
            "(allow sysctl-read)\n(allow ipc-posix-shm ipc-posix-sem)".into(),
        );
        rule(
            "Its one listener: its server's socket in its run directory, the only thing the \
             access proxy dials; its kernels talk over Unix sockets there too.",
            format!(
                "(allow network-bind network-inbound (local unix-socket (subpath {})))\n\
                 (allow network-outbound (remote unix-socket (subpath {})))",
                quoted(&self.run),
                quoted(&self.run)
            ),
        );
        rule(
            "Names resolved by mDNSResponder's socket, so no UDP is needed for DNS.",
            format!(
                "(allow network-outbound (remote unix-socket (path-literal {})))",
                quoted(Path::new(RESOLVER_SOCKET))
            ),
        );
        if self.outbound {
            rule(
                "The owner's egress: TCP connections out. Not UDP, whose first send binds a \
                 port that then receives: an implicit listener.",
                "(allow network-outbound (remote tcp \"*:*\"))".into(),
            );
        }
        if self.gpu {
            let clients = METAL_IOKIT
                .iter()
                .map(|c| format!(" \"{c}\""))
                .collect::<String>();
            let services = METAL_SERVICES
                .iter()
                .map(|s| format!(" (global-name \"{s}\")"))
                .collect::<String>();
            rule(
                "Metal on the Apple GPU reserved for it: the GPU's user clients and Metal's \
                 shader compiler.",
                format!(
                    "(allow iokit-open (iokit-user-client-class{clients}))\n\
                     (allow mach-lookup{services})"
                ),
            );
        }
        rule(
            "Said again, last, so no rule above can be widened into one: no IP listener or \
             inbound connection (TCP or UDP, explicit or by a first send), and no UDP out.",
            "(deny network-bind network-inbound (local ip \"*:*\"))\n\
             (deny network-outbound (remote udp \"*:*\"))"
                .into(),
        );
        out
    }
}

/// `path` as an SBPL string.
fn quoted(path: &Path) -> String {
    format!("\"{}\"", path.display())
}

/// A path a profile can name exactly: absolute, canonical in form, and a string that needs no
/// escaping (a quote or backslash could end the string and add rules of its own).
fn quotable(path: &Path) -> Result<(), ProfileError> {
    let canonical = path.is_absolute()
        && path
            .components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    if !canonical {
        return Err(ProfileError::NotCanonical(path.to_owned()));
    }
    let text = path
        .to_str()
        .ok_or_else(|| ProfileError::Unquotable(path.to_owned()))?;
    if text
        .chars()
        .any(|c| c == '"' || c == '\\' || c.is_control())
    {
        return Err(ProfileError::Unquotable(path.to_owned()));
    }
    // Path::components reads `/a/./b` and `/a//b/` as `/a/b`; the sandbox matches the text.
    let spelled_once = !text.contains("//") && !text.contains("/./") && !text.ends_with("/.");
    if !spelled_once || (text.len() > 1 && text.ends_with('/')) {
        return Err(ProfileError::NotCanonical(path.to_owned()));
    }
    Ok(())
}
