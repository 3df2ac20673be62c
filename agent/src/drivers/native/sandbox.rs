//! The sandbox a workload's server runs in, as bubblewrap's arguments: every namespace of its
//! own (mount, network with only loopback, PID, IPC, UTS, user, cgroup), no capabilities, a
//! root that is only the system's programs and libraries read-only, a size-limited `/tmp` and
//! home, and its places at the contract's paths (`local::contract`): its run directory (the
//! only place its socket may be), its token read-only, its notebook's files or its model
//! read-only, its interpreter read-only. GPUs: only its reserved ones' device nodes, and
//! `CUDA_VISIBLE_DEVICES` naming them by UUID.
//!
//! When the agent is root the server runs as a user of no account ([`WORKLOAD_USER`]), which
//! can't reach the agent's directories by their paths: a private mount namespace mounts each
//! of its places on a staging directory first ([`STAGE_DIR`]`/<n>`, on a tmpfs of that
//! namespace only), then `setpriv` drops to the workload's user and bubblewrap mounts them from
//! there.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::envs::Interpreter;
use crate::drivers::local::contract::{DATA_DIR, HOME, RUN_DIR, Serves};

/// Where the entrypoints (`start.py`, `serve.py`) are, inside the sandbox.
pub const LAUNCHERS: &str = "/opt/einsora";
/// What its `/tmp` and its home may hold (their pages are the machine's memory).
const TMP_BYTES: u64 = 256 << 20;
const HOME_BYTES: u64 = 64 << 20;
/// The system's parts a Python server needs, read-only: its programs and libraries, and the
/// few files of /etc that the loader, Python and JupyterLab read.
const SYSTEM_DIRS: &[&str] = &["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"];
const SYSTEM_ETC: &[&str] = &[
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/mime.types",
    "/etc/nsswitch.conf",
    "/etc/ssl/certs",
];
/// Where a root agent stages a workload's places: an empty directory of the agent's, over which
/// each sandbox's private mount namespace mounts a tmpfs of its own. Not under `/tmp`, where a
/// place may be (the tmpfs would hide it).
pub const STAGE_DIR: &str = "/run/einsora-stage";
/// Staging, in the private mount namespace of a root agent.
const STAGE: &str =
    "/bin/mount -t tmpfs -o mode=0711,size=64k,nosuid,nodev einsora-stage /run/einsora-stage
uid=$1 gid=$2; shift 2; i=0
while [ \"$1\" != -- ]; do
  if [ -d \"$1\" ]; then /bin/mkdir /run/einsora-stage/$i; else : >/run/einsora-stage/$i; fi
  /bin/mount --bind \"$1\" /run/einsora-stage/$i
  i=$((i + 1)); shift
done
shift
exec /usr/bin/setpriv --reuid=\"$uid\" --regid=\"$gid\" --clear-groups --no-new-privs -- \"$@\"";

/// Joining the workload's cgroup: its first process, the agent's own shell, writes its PID into
/// each `cgroup.procs` named before `--`, then becomes the rest; everything the workload runs
/// is its descendant, so in the cgroup.
const JOIN: &str = "while [ \"$1\" != -- ]; do echo $$ >\"$1\"; shift; done
shift
exec \"$@\"";

/// One of the workload's places, mounted into its sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Place {
    host: PathBuf,
    inside: PathBuf,
    writable: bool,
}

/// Everything a workload's sandbox is made from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    pub bwrap: PathBuf,
    pub serves: Serves,
    pub cpus: u32,
    pub interpreter: Interpreter,
    /// The entrypoint's file name in `launchers`.
    pub launcher: &'static str,
    pub launchers: PathBuf,
    pub run_dir: PathBuf,
    /// The agent's own copy of its token file.
    pub token_file: PathBuf,
    /// Its GPUs by UUID, and their device nodes (with the shared ones that exist).
    pub gpus: Vec<String>,
    pub gpu_nodes: Vec<PathBuf>,
    /// The user it runs as when the agent is root; `None`: the agent's own.
    pub user: Option<(u32, u32)>,
    /// The network namespace it runs in, for egress (egress.rs); `None`: loopback only.
    pub netns: Option<PathBuf>,
    /// The `cgroup.procs` files of its cgroup (cgroup.rs), which it joins first; none: it runs
    /// in the agent's.
    pub cgroup: Vec<PathBuf>,
}

/// What the supervisor starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
}

/// bubblewrap's arguments for the part of every sandbox that is the system's: every namespace
/// of its own, no capabilities, the system's programs and libraries and a few files of /etc,
/// read-only. (Also what the stand-in `sandbox-exec` of Linux CI runs a Mac's profile in.)
pub fn system_args() -> Vec<String> {
    let mut args: Vec<String> = [
        "--unshare-all",
        "--cap-drop",
        "ALL",
        "--hostname",
        "einsora",
        "--ro-bind",
        "/usr",
        "/usr",
    ]
    .map(str::to_owned)
    .to_vec();
    let mut push = |more: &[&str]| args.extend(more.iter().map(|a| (*a).to_owned()));
    for dir in SYSTEM_DIRS {
        match std::fs::read_link(dir) {
            Ok(target) => push(&["--symlink", &target.display().to_string(), dir]),
            Err(_) => push(&["--ro-bind-try", dir, dir]),
        }
    }
    for file in SYSTEM_ETC {
        push(&["--ro-bind-try", file, file]);
    }
    args
}

impl Sandbox {
    fn places(&self) -> Vec<Place> {
        let place = |host: &Path, inside: &str, writable| Place {
            host: host.to_owned(),
            inside: PathBuf::from(inside),
            writable,
        };
        let mut places = vec![
            place(&self.run_dir, RUN_DIR, true),
            place(&self.token_file, &self.serves.token_path(), false),
        ];
        match &self.serves {
            Serves::Notebook { data } => places.push(place(data, DATA_DIR, true)),
            Serves::Endpoint { model, server, .. } => {
                places.push(place(model, &server.model_path(), false));
            }
        }
        for (host, inside) in &self.interpreter.binds {
            places.push(Place {
                host: host.clone(),
                inside: inside.clone(),
                writable: false,
            });
        }
        places.push(place(&self.launchers, LAUNCHERS, false));
        places
    }

    /// The server's environment: the contract's, and nothing of the agent's.
    fn env(&self) -> Vec<(String, String)> {
        let (contract, _) = self.serves.launch(self.cpus);
        let mut env: Vec<(String, String)> = contract
            .iter()
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        env.extend(
            [
                ("PATH", "/usr/local/bin:/usr/bin:/bin"),
                ("LANG", "C.UTF-8"),
                ("PYTHONNOUSERSITE", "1"),
                ("PYTHONDONTWRITEBYTECODE", "1"),
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned())),
        );
        if !self.gpus.is_empty() {
            env.push(("CUDA_VISIBLE_DEVICES".to_owned(), self.gpus.join(",")));
        }
        env
    }

    /// What the supervisor starts: joining its cgroup (when it has one), `setsid` (a session of
    /// its own, no terminal), then, when the agent is root, the staging namespace and
    /// `setpriv`, then bubblewrap.
    pub fn command(&self) -> Command {
        let places = self.places();
        let staged = self.user.is_some();
        let source = |i: usize, p: &Place| {
            if staged {
                format!("{STAGE_DIR}/{i}")
            } else {
                p.host.display().to_string()
            }
        };
        let mut bwrap = system_args();
        if self.netns.is_some() {
            // Joined before bubblewrap starts, by root: nothing inside can change it.
            bwrap.insert(1, "--share-net".to_owned());
        }
        let mut push = |args: &[&str]| bwrap.extend(args.iter().map(|a| (*a).to_owned()));
        if self.netns.is_some() {
            for file in ["/etc/resolv.conf", "/etc/hosts"] {
                push(&["--ro-bind-try", file, file]);
            }
        }
        push(&["--proc", "/proc", "--dev", "/dev"]);
        push(&["--size", &TMP_BYTES.to_string(), "--tmpfs", "/tmp"]);
        let home = [
            "--size",
            &HOME_BYTES.to_string(),
            "--perms",
            "0700",
            "--tmpfs",
            HOME,
        ];
        push(&home);
        for (i, p) in places.iter().enumerate() {
            let how = if p.writable { "--bind" } else { "--ro-bind" };
            push(&[how, &source(i, p), &p.inside.display().to_string()]);
        }
        for node in &self.gpu_nodes {
            let node = node.display().to_string();
            push(&["--dev-bind-try", &node, &node]);
        }
        let cwd = match self.serves {
            Serves::Notebook { .. } => DATA_DIR,
            Serves::Endpoint { .. } => "/",
        };
        // Bubblewrap's own root (where the mount points above were made) is a tmpfs: read-only,
        // so only its places, `/tmp` and its home can be written.
        push(&["--remount-ro", "/", "--chdir", cwd, "--"]);
        bwrap.push(self.interpreter.python.display().to_string());
        bwrap.push(format!("{LAUNCHERS}/{}", self.launcher));
        bwrap.extend(self.serves.launch(self.cpus).1);

        let bwrap_path = self.bwrap.display().to_string();
        let mut args: Vec<String> = match &self.netns {
            Some(netns) => vec![
                "/usr/bin/nsenter".to_owned(),
                format!("--net={}", netns.display()),
                "--".to_owned(),
            ],
            None => Vec::new(),
        };
        args.extend(match self.user {
            None => std::iter::once(bwrap_path).chain(bwrap).collect(),
            Some((uid, gid)) => {
                // `slave`: the host's unmounts reach this namespace (a removed notebook's disk
                // is freed), and nothing mounted here reaches the host.
                let mut args: Vec<String> = [
                    "/usr/bin/unshare",
                    "--mount",
                    "--propagation",
                    "slave",
                    "--",
                ]
                .map(str::to_owned)
                .to_vec();
                args.extend(["/bin/sh", "-ec", STAGE, "stage"].map(str::to_owned));
                args.extend([uid.to_string(), gid.to_string()]);
                args.extend(places.iter().map(|p| p.host.display().to_string()));
                args.push("--".to_owned());
                args.push(bwrap_path);
                args.extend(bwrap);
                args
            }
        });
        let setsid = PathBuf::from("/usr/bin/setsid");
        let (program, args) = if self.cgroup.is_empty() {
            (setsid, args)
        } else {
            let mut joining: Vec<String> = ["-ec", JOIN, "join"].map(str::to_owned).to_vec();
            joining.extend(self.cgroup.iter().map(|f| f.display().to_string()));
            joining.push("--".to_owned());
            joining.push(setsid.display().to_string());
            joining.extend(args);
            (PathBuf::from("/bin/sh"), joining)
        };
        Command {
            program,
            args,
            env: self.env(),
            cwd: PathBuf::from("/"),
        }
    }

    /// SHA-256 of everything it is made of: a running workload whose fingerprint isn't this
    /// one's runs under another sandbox, and is stopped as changed.
    pub fn fingerprint(&self) -> String {
        let command = self.command();
        let mut hash = Sha256::new();
        for part in command.args.iter().chain(
            command
                .env
                .iter()
                .flat_map(|(k, v)| [k, v])
                .collect::<Vec<_>>(),
        ) {
            hash.update(part.as_bytes());
            hash.update([0]);
        }
        crate::models::hex(&hash.finalize())
    }
}

#[cfg(test)]
mod tests;
