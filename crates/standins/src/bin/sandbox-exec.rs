//! `sandbox-exec -f <profile> <command> [<argument>…]` on Linux: Linux CI's stand-in for a
//! Mac's (`EINSORA_MACOS_SANDBOX_EXEC`). It parses the profile with the evaluator of the rules
//! the driver writes (refusing anything outside them, as `sandbox-exec` refuses a profile it
//! can't compile), refuses to run one that would let the workload listen on IP, send UDP, or
//! write outside what it names, then runs the command under the linux-native driver's bubblewrap
//! sandbox with exactly the places the profile allows: read-only what it may only read or run,
//! writable what it may write, no network but its Unix sockets. It is not macOS's sandbox.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use einsora_agent::drivers::macos::profile::check::{Addr, Host, Rules, Target};
use einsora_agent::drivers::native::system_args;

/// sandbox-exec's status for a profile it can't use.
const BAD_PROFILE: u8 = 65;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (profile, command) = match args.as_slice() {
        [flag, profile, command @ ..] if flag == "-f" && !command.is_empty() => {
            (PathBuf::from(profile), command)
        }
        _ => {
            eprintln!("usage: sandbox-exec -f profile-file command [arguments ...]");
            return ExitCode::from(64);
        }
    };
    let rules = match std::fs::read_to_string(&profile)
        .map_err(|e| e.to_string())
        .and_then(|text| Rules::parse(&text).map_err(|e| e.to_string()))
    {
        Ok(rules) => rules,
        Err(e) => {
            eprintln!("sandbox-exec: {}: {e}", profile.display());
            return ExitCode::from(BAD_PROFILE);
        }
    };
    if let Some(why) = too_open(&rules, &profile) {
        eprintln!(
            "sandbox-exec (stand-in): {}: {why}; not run",
            profile.display()
        );
        return ExitCode::from(BAD_PROFILE);
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    // What this stand-in runs in: bubblewrap, where the agent's own Linux sandbox has it.
    #[allow(clippy::disallowed_methods)]
    let bwrap = std::env::var("STANDIN_BWRAP").unwrap_or_else(|_| "/usr/bin/bwrap".to_owned());
    let error = std::process::Command::new(bwrap)
        .args(bubblewrap(&rules, &cwd))
        .arg("--")
        .args(command)
        .exec();
    eprintln!("sandbox-exec (stand-in): {error}");
    ExitCode::from(71)
}

/// What the profile must deny for this stand-in to run anything: the attacks a Mac's sandbox
/// is there to stop, as its rules say.
fn too_open(rules: &Rules, profile: &Path) -> Option<String> {
    let checks = [
        (
            "network-bind",
            Target::Local(Addr::Tcp(Host::Localhost, 8888)),
            "a TCP listener on loopback",
        ),
        (
            "network-bind",
            Target::Local(Addr::Tcp(Host::Elsewhere, 8888)),
            "a TCP listener",
        ),
        (
            "network-bind",
            Target::Local(Addr::Udp(Host::Elsewhere, 5353)),
            "a UDP bind",
        ),
        (
            "network-inbound",
            Target::Local(Addr::Tcp(Host::Elsewhere, 8888)),
            "an inbound connection",
        ),
        (
            "network-outbound",
            Target::Remote(Addr::Udp(Host::Elsewhere, 53)),
            "UDP out (an implicit bind)",
        ),
        (
            "file-write-data",
            Target::Path(profile),
            "writing its own profile",
        ),
        (
            "file-write-data",
            Target::Path(Path::new("/usr/bin/env")),
            "writing the system",
        ),
    ];
    checks
        .iter()
        .find(|(operation, target, _)| rules.allows(operation, *target))
        .map(|(_, _, what)| format!("it allows {what}"))
}

/// bubblewrap's arguments: the system as the linux-native driver gives it, then each place the
/// profile names that is here, read-only or writable as the profile decides.
fn bubblewrap(rules: &Rules, cwd: &Path) -> Vec<String> {
    let mut args = system_args();
    // A Mac's agent and its workloads run as the Mac's owner, never root: where this stand-in
    // runs as root (CI), the command is a user of its own namespace (mapped to root outside,
    // so the places root made are still its own).
    if rustix::process::geteuid().is_root() {
        args.extend(["--unshare-user", "--uid", "501", "--gid", "20"].map(str::to_owned));
    }
    // No /tmp of its own: a Mac's sandbox lets it write only its places (its TMPDIR is its
    // home), and every directory made here to mount a place on is read-only.
    args.extend(["--proc", "/proc", "--dev", "/dev"].map(str::to_owned));
    let mut places: Vec<(PathBuf, bool)> = Vec::new();
    for operation in [
        "file-read-data",
        "process-exec",
        "file-map-executable",
        "file-write-data",
    ] {
        for (path, _) in rules.paths(operation) {
            let special = path.starts_with("/dev") || path.starts_with("/proc");
            if special || !path.exists() || places.iter().any(|(p, _)| p == path) {
                continue;
            }
            let writable = rules.allows("file-write-data", Target::Path(path));
            if writable || rules.allows("file-read-data", Target::Path(path)) {
                places.push((path.to_owned(), writable));
            }
        }
    }
    // Parents before what is inside them.
    places.sort_by_key(|(p, _)| p.components().count());
    for (path, writable) in places {
        let path = path.display().to_string();
        let how = if writable { "--bind" } else { "--ro-bind" };
        args.extend([how.to_owned(), path.clone(), path]);
    }
    args.extend(["--remount-ro".to_owned(), "/".to_owned()]);
    args.extend(["--chdir".to_owned(), cwd.display().to_string()]);
    args
}
