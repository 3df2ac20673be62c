//! A macos-native workload's sandbox, as the profile `sandbox-exec -f` takes (Apple's SBPL),
//! written from a typed description ([`Places`]) so that every workload's is the same text but
//! for its places. Everything is denied unless a rule allows it; each rule says which attack it
//! stops or what the workload needs it for. What macOS really enforces can only be shown on a
//! Mac (`scripts/mac-check`, to come); here, [`check`] evaluates the rules this module writes.
//!
//! The network: the server's Unix sockets in its run directory are its only listeners. No IP
//! bind or inbound connection of any kind (an explicit `bind`/`listen` on TCP or UDP), and no
//! UDP at all, since a UDP `sendto` binds its socket implicitly and can then receive: name
//! resolution goes through mDNSResponder's Unix socket. With `outbound`, TCP connections out,
//! but not to this Mac's loopback (the control plane, the agents' port); the Mac's other
//! addresses and its LAN stay reachable, which SBPL can't name: a fence like Linux's (an
//! agent-side proxy) is later work.
//!
//! Socket paths: `sun_path` on macOS holds 104 bytes with the terminating NUL, so a socket path
//! is at most 103 bytes. [`Profile::new`] refuses a run directory whose longest socket (a
//! kernel's, `kernel-<uuid>-ipc-<n>`) would pass that, naming the length. Solo's default
//! layout, `~/Library/Application Support/Einsora/agent/run/<id>/`, passes it for any user, so
//! the driver lays its run directories out apart: `/private/tmp/einsora-<uid>/<26-character
//! ID>` (`einsora_core::run_dirs::RunDirs`).
//!
//! Its run directory is writable, so the server's socket there is the workload's to replace
//! (a link to another socket): the access proxy dials it by inode, as on Linux (ADR 0007), which
//! the Mac's driver must bring before anything is opened.
//!
//! Not held by the profile, and why: a file's metadata (not contents) anywhere, since Python finds
//! modules by stat; POSIX shared memory and semaphores, whose names are per user, not per
//! sandbox (PyTorch's workers need them); mDNSResponder's whole API (Bonjour as well as names).

pub mod check;
#[cfg(test)]
mod tests;

use std::fmt::Write;
use std::path::{Component, Path, PathBuf};

/// The longest Unix socket path macOS can bind: `sun_path` is 104 bytes, NUL included.
pub const MACOS_SOCKET_PATH_MAX: usize = 103;
/// The longest socket name a server binds in its run directory (its `JUPYTER_RUNTIME_DIR`): a
/// kernel's over IPC, `kernel-<36-character id>-ipc-<n>`, its five channels numbered from 1.
pub const LONGEST_SOCKET_NAME: usize = "kernel-".len() + 36 + "-ipc-".len() + 1;

/// The system's parts a Python server reads: its frameworks and libraries (not `/System` whole:
/// `/System/Volumes/Data` reaches every user's files), the time zones, a few files of /etc.
const SYSTEM_READ: &[&str] = &[
    "/System/Library",
    "/System/Cryptexes",
    "/usr/lib",
    "/usr/share",
    "/Library/Apple",
    "/private/var/db/timezone",
];
const SYSTEM_FILES: &[&str] = &[
    "/private/etc/hosts",
    "/private/etc/services",
    "/private/etc/protocols",
    "/private/etc/passwd",
    "/private/etc/ssl/cert.pem",
    "/private/etc/ssl/openssl.cnf",
    "/dev/null",
    "/dev/zero",
    "/dev/random",
    "/dev/urandom",
    "/dev/dtracehelper",
];
/// Where the system's libraries are mapped from as code.
const SYSTEM_CODE: &[&str] = &["/System/Library", "/System/Cryptexes", "/usr/lib"];
/// The system's programs a server may start: a shell for a subprocess, `env`.
const SYSTEM_EXEC: &[&str] = &["/bin/sh", "/bin/bash", "/bin/zsh", "/usr/bin/env"];
/// What `sysctl` may tell it: the hardware and the OS's version; not `kern.proc.*` (other
/// processes' arguments and environments).
const SYSCTL_NAMES: &[&str] = &[
    "kern.osrelease",
    "kern.osversion",
    "kern.ostype",
    "kern.version",
    "kern.hostname",
    "kern.maxfilesperproc",
    "machdep.cpu.brand_string",
];
/// Where macOS resolves names: mDNSResponder's socket, instead of UDP to a DNS server.
const RESOLVER_SOCKET: &str = "/private/var/run/mDNSResponder";
/// User and group names (`getpwuid`), through Open Directory.
const LIBINFO: &str = "com.apple.system.opendirectoryd.libinfo";
/// The GPU's user clients Metal opens, and its shader compiler.
const METAL_IOKIT: &[&str] = &["AGXDeviceUserClient", "IOSurfaceRootUserClient"];
const METAL_COMPILER: &str = "com.apple.MTLCompilerService";

/// What a workload's sandbox is made from: its places on this Mac and what it may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Places {
    /// Its files (a notebook's; an endpoint's private model copy): read and written.
    pub data: PathBuf,
    /// Its run directory: its server's socket and its kernels' IPC sockets, nothing else's.
    pub run: PathBuf,
    /// Its own temporary directory (`TMPDIR`).
    pub tmp: PathBuf,
    /// Read, mapped and run, never written: its environment (the uv environment), the
    /// interpreter's base prefix the environment links to, its launcher.
    pub programs: Vec<PathBuf>,
    /// Read, never written: its token file.
    pub read_only: Vec<PathBuf>,
    /// Read, never written, whole: an endpoint's model directory (its private copy).
    pub read_dirs: Vec<PathBuf>,
    /// The Unix socket its server listens on, in `run`.
    pub socket: PathBuf,
    /// The Apple GPU, reserved for it (Metal).
    pub gpu: bool,
    /// TCP connections out (the owner's egress), where the class allows it.
    pub outbound: bool,
}

/// A workload's sandbox, its places checked: only [`Profile::new`] makes one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile(Places);

/// Why a profile can't be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    #[error(
        "{0}: a sandbox's path must be absolute and spelled once (no `.`, `..`, `//` or trailing \
         `/`), and through /private rather than its /tmp, /var or /etc links"
    )]
    NotCanonical(PathBuf),
    #[error("{0:?}: a sandbox's path must be UTF-8 with no quote, backslash or control character")]
    Unquotable(PathBuf),
    #[error("{0}: a workload's own directory must be at least three levels deep")]
    TooWide(PathBuf),
    #[error("{0}: what it may only read or run can't be inside a directory it writes")]
    WritableProgram(PathBuf),
    #[error(
        "{path}: its sockets' paths reach {length} bytes, over macOS's limit of \
         {MACOS_SOCKET_PATH_MAX} (sun_path holds 104 with its NUL); set EINSORA_MACOS_RUN_DIR to \
         a shorter directory"
    )]
    SocketPathTooLong { path: PathBuf, length: usize },
    #[error("{0}: the server's socket must be in its run directory")]
    SocketOutsideRun(PathBuf),
}

/// The links macOS resolves paths through, which a profile can't name a path by.
pub const MACOS_LINKS: &[&str] = &["/tmp", "/var", "/etc"];

impl Profile {
    /// The sandbox for `places`, once every path is one a profile can name exactly, no
    /// directory it writes holds what it may only read or run, and its sockets can be bound.
    pub fn new(places: Places) -> Result<Profile, ProfileError> {
        Profile::resolved_through(places, MACOS_LINKS)
    }

    /// [`Profile::new`] on a system whose links are `links` instead of macOS's (the stand-in's
    /// Linux, whose `/tmp` is a directory).
    pub fn resolved_through(places: Places, links: &[&str]) -> Result<Profile, ProfileError> {
        let writable = [&places.data, &places.run, &places.tmp];
        let fixed = places
            .programs
            .iter()
            .chain(&places.read_only)
            .chain(&places.read_dirs);
        for path in writable.into_iter().chain(fixed.clone()) {
            exact(path, links)?;
        }
        exact(&places.socket, links)?;
        for dir in writable {
            if dir.components().count() < 4 {
                return Err(ProfileError::TooWide(dir.clone()));
            }
        }
        if let Some(inside) = fixed.clone().find(|p| {
            writable
                .iter()
                .any(|w| p.starts_with(w) || w.starts_with(p))
        }) {
            return Err(ProfileError::WritableProgram(inside.clone()));
        }
        if places.socket.parent() != Some(places.run.as_path()) {
            return Err(ProfileError::SocketOutsideRun(places.socket.clone()));
        }
        let longest = places.run.as_os_str().len()
            + 1
            + LONGEST_SOCKET_NAME.max(places.socket.file_name().map_or(0, |n| n.len()));
        if longest > MACOS_SOCKET_PATH_MAX {
            return Err(ProfileError::SocketPathTooLong {
                path: places.run.clone(),
                length: longest,
            });
        }
        Ok(Profile(places))
    }

    pub fn places(&self) -> &Places {
        &self.0
    }

    /// The profile's text, for `sandbox-exec -f`.
    pub fn render(&self) -> String {
        let p = &self.0;
        let mut out = String::from("(version 1)\n");
        let mut rule = |why: &str, text: String| {
            let _ = writeln!(out, "\n; {why}\n{text}");
        };
        rule(
            "Anything not allowed below is denied: files, network, processes, IPC, devices.",
            "(deny default)".into(),
        );
        rule(
            "Its own processes: the server, its kernels and their children, seeing and \
             signalling only each other.",
            "(allow process-fork)\n(allow signal (target same-sandbox))\n\
             (allow process-info* (target same-sandbox))"
                .into(),
        );
        let programs = || p.programs.iter().map(PathBuf::as_path);
        rule(
            "Programs from its environment and a shell only: a file it downloaded or wrote into \
             its directories can't be run, nor the system's other programs.",
            format!(
                "(allow process-exec{}{})",
                filters("subpath", programs()),
                filters("literal", SYSTEM_EXEC.iter().map(Path::new))
            ),
        );
        rule(
            "Reading the system's frameworks and libraries and its environment; not the owner's \
             home, other workloads' files, the agent's state, or terminals (a password typed \
             in one).",
            format!(
                "(allow file-read*{}{}{})\n(allow file-read* (subpath \"/dev/fd\"))\n\
                 (allow file-read-metadata)",
                filters("subpath", SYSTEM_READ.iter().map(Path::new)),
                filters("subpath", programs()),
                filters("literal", SYSTEM_FILES.iter().map(Path::new)),
            ),
        );
        rule(
            "Code mapped only from its environment and the system's libraries.",
            format!(
                "(allow file-map-executable{}{})",
                filters("subpath", SYSTEM_CODE.iter().map(Path::new)),
                filters("subpath", programs()),
            ),
        );
        if !p.read_dirs.is_empty() {
            rule(
                "Its model, read but never changed.",
                format!(
                    "(allow file-read*{})",
                    filters("subpath", p.read_dirs.iter().map(PathBuf::as_path))
                ),
            );
        }
        if !p.read_only.is_empty() {
            rule(
                "Its token, read but never replaced.",
                format!(
                    "(allow file-read*{})",
                    filters("literal", p.read_only.iter().map(PathBuf::as_path))
                ),
            );
        }
        rule(
            "Writing only its own directories: nothing outside them (the owner's files, other \
             workloads', the agent's) can be changed.",
            format!(
                "(allow file-read* file-write*{})\n(allow file-write* (literal \"/dev/null\"))",
                filters(
                    "subpath",
                    [&p.data, &p.run, &p.tmp].map(PathBuf::as_path).into_iter()
                )
            ),
        );
        rule(
            "The hardware and the OS's version; not other processes' arguments (kern.proc).",
            format!(
                "(allow sysctl-read (sysctl-name-prefix \"hw.\"){})",
                SYSCTL_NAMES
                    .iter()
                    .map(|n| format!(" (sysctl-name \"{n}\")"))
                    .collect::<String>()
            ),
        );
        rule(
            "Shared memory and semaphores for PyTorch's workers and Python's multiprocessing \
             (their names are per user, not per sandbox).",
            "(allow ipc-posix-shm ipc-posix-sem)".into(),
        );
        rule(
            "Its listeners: Unix sockets in its run directory, where its server's is the only \
             thing the access proxy dials; its kernels talk over Unix sockets there too.",
            format!(
                "(allow system-socket (socket-domain AF_UNIX))\n\
                 (allow network-bind network-inbound (local unix-socket (subpath {run})))\n\
                 (allow network-outbound (remote unix-socket (subpath {run})))",
                run = quoted(&p.run),
            ),
        );
        rule(
            "Names resolved by mDNSResponder's socket (so no UDP is needed for DNS), and user \
             names by Open Directory.",
            format!(
                "(allow network-outbound (remote unix-socket (path-literal {})))\n\
                 (allow mach-lookup (global-name \"{LIBINFO}\"))",
                quoted(Path::new(RESOLVER_SOCKET))
            ),
        );
        if p.outbound {
            rule(
                "The owner's egress: TCP connections out, but not to this Mac's loopback, where \
                 the control plane listens. Not UDP, whose first send binds a port that then \
                 receives: an implicit listener.",
                "(allow system-socket (socket-domain AF_INET) (socket-domain AF_INET6))\n\
                 (allow network-outbound (remote tcp \"*:*\"))\n\
                 (deny network-outbound (remote ip \"localhost:*\"))"
                    .into(),
            );
        }
        if p.gpu {
            rule(
                "Metal on the Apple GPU reserved for it: the GPU's user clients and Metal's \
                 shader compiler, nothing of the window server's.",
                format!(
                    "(allow iokit-open{})\n(allow iokit-get-properties)\n\
                     (allow mach-lookup (global-name \"{METAL_COMPILER}\"))",
                    METAL_IOKIT
                        .iter()
                        .map(|c| format!(" (iokit-user-client-class \"{c}\")"))
                        .collect::<String>()
                ),
            );
        }
        rule(
            "Said again, last, so no rule above can be widened into one: no IP listener or \
             inbound connection (TCP or UDP, explicit or by a first send), no UDP out, nothing \
             under /System/Volumes (the Data volume, every user's files).",
            "(deny network-bind network-inbound (local ip \"*:*\"))\n\
             (deny network-outbound (remote udp \"*:*\"))\n\
             (deny file-read* file-write* (subpath \"/System/Volumes\"))"
                .into(),
        );
        out
    }
}

/// ` (filter "path")` for each path: empty for none, so a caller never writes an unfiltered rule
/// by accident (it checks for none itself).
fn filters<'a>(filter: &str, paths: impl Iterator<Item = &'a Path>) -> String {
    paths
        .map(|p| format!(" ({filter} {})", quoted(p)))
        .collect()
}

/// `path` as an SBPL string.
fn quoted(path: &Path) -> String {
    format!("\"{}\"", path.display())
}

/// A path a profile can name exactly: absolute, spelled once, through none of the system's
/// `links` (the sandbox sees resolved paths: on a Mac `/tmp/x` never matches, `/private/tmp/x`
/// does), and a string that needs no escaping (a quote or backslash could end the string and
/// add rules of its own). Judged by its text alone: the places are the workload's to change, so
/// nothing in them is looked at (the agent's own roots are checked where it makes them).
fn exact(path: &Path, links: &[&str]) -> Result<(), ProfileError> {
    let text = path
        .to_str()
        .ok_or_else(|| ProfileError::Unquotable(path.to_owned()))?;
    if text
        .chars()
        .any(|c| c == '"' || c == '\\' || c.is_control())
    {
        return Err(ProfileError::Unquotable(path.to_owned()));
    }
    let components_plain = path.is_absolute()
        && path
            .components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    // Path::components reads `/a/./b` and `/a//b/` as `/a/b`; the sandbox matches the text.
    let spelled_once = !text.contains("//") && !text.contains("/./") && !text.ends_with("/.");
    let linked = links.iter().any(|l| path.starts_with(l));
    if !components_plain || !spelled_once || text.ends_with('/') || linked {
        return Err(ProfileError::NotCanonical(path.to_owned()));
    }
    Ok(())
}
