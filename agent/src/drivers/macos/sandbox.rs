//! What the supervisor starts for a macos-native workload: `sandbox-exec -f <its profile>`
//! running its environment's Python on the images' entrypoint, with its places at their own
//! paths on this Mac (there are no mount namespaces), and nothing of the agent's environment.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::profile::{Places as ProfilePlaces, Profile, ProfileError};
use crate::drivers::local::contract::{ServerPaths, Serves};
use crate::drivers::local::dirs::Places;
use crate::drivers::native::{Command, Interpreter};

/// Everything a workload's sandbox on a Mac is made from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MacSandbox {
    pub sandbox_exec: PathBuf,
    pub profile: Profile,
    /// Where the agent writes its profile: a directory of the agent's own.
    pub profile_file: PathBuf,
    pub serves: Serves,
    pub cpus: u32,
    pub python: PathBuf,
    /// Its entrypoint, in the agent's launchers directory.
    pub launcher: PathBuf,
    pub paths: ServerPaths,
}

/// What one workload's sandbox is asked for.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub sandbox_exec: &'a Path,
    pub places: &'a Places,
    pub serves: &'a Serves,
    pub cpus: u32,
    pub interpreter: &'a Interpreter,
    pub launchers: &'a Path,
    pub launcher: &'static str,
    pub profiles: &'a Path,
    pub workload: &'a str,
    /// The Apple GPU is reserved for it.
    pub gpu: bool,
    /// The owner's egress.
    pub outbound: bool,
    /// The links the system resolves paths through (`profile::MACOS_LINKS` on a Mac).
    pub links: &'a [&'a str],
}

impl MacSandbox {
    /// Its sandbox, or why its places can't be one (a path the profile can't name exactly, a
    /// socket path past macOS's limit).
    pub fn new(r: &Request<'_>) -> Result<MacSandbox, ProfileError> {
        let token_file = r.places.secret.join(r.serves.token_name());
        // An endpoint writes nothing of its own but its home; its model is read-only.
        let (data, model, read_dirs) = match r.serves {
            Serves::Notebook { data } => (data.clone(), String::new(), Vec::new()),
            Serves::Endpoint { server, .. } => {
                let model = r.places.model.join(server.model_name());
                let model = model.display().to_string();
                (r.places.home.clone(), model, vec![r.places.model.clone()])
            }
        };
        let mut programs: Vec<PathBuf> = r
            .interpreter
            .binds
            .iter()
            .map(|(host, _)| host.clone())
            .collect();
        programs.push(r.launchers.to_owned());
        let profile = Profile::resolved_through(
            ProfilePlaces {
                data: data.clone(),
                run: r.places.run.clone(),
                tmp: r.places.home.clone(),
                programs,
                read_only: vec![token_file.clone()],
                read_dirs,
                socket: r.places.run.join(r.serves.socket_name()),
                gpu: r.gpu,
                outbound: r.outbound,
            },
            r.links,
        )?;
        let text = |p: &Path| p.display().to_string();
        Ok(MacSandbox {
            sandbox_exec: r.sandbox_exec.to_owned(),
            profile,
            profile_file: r.profiles.join(format!("{}.sb", r.workload)),
            serves: r.serves.clone(),
            cpus: r.cpus,
            python: r.interpreter.python.clone(),
            launcher: r.launchers.join(r.launcher),
            paths: ServerPaths {
                run_dir: text(&r.places.run),
                token_file: text(&token_file),
                data_dir: text(&data),
                home: text(&r.places.home),
                model,
            },
        })
    }

    /// The server's environment: the contract's at this Mac's paths, its kernels' sockets in
    /// its run directory (the only place it may listen), its temporary files in its home.
    fn env(&self) -> Vec<(String, String)> {
        let (contract, _) = self.serves.launch_at(self.cpus, &self.paths);
        let mut env: Vec<(String, String)> = contract
            .iter()
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        let bin = self.python.parent().map(|b| b.display().to_string());
        let path = format!("{}:/usr/bin:/bin", bin.unwrap_or_default());
        env.extend(
            [
                ("PATH", path.as_str()),
                ("LANG", "C.UTF-8"),
                ("TMPDIR", self.paths.home.as_str()),
                ("JUPYTER_RUNTIME_DIR", self.paths.run_dir.as_str()),
                ("PYTHONNOUSERSITE", "1"),
                ("PYTHONDONTWRITEBYTECODE", "1"),
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned())),
        );
        env
    }

    /// `sandbox-exec -f <profile> <python> <entrypoint> <arguments>`, in its files' directory.
    pub fn command(&self) -> Command {
        let mut args = vec![
            "-f".to_owned(),
            self.profile_file.display().to_string(),
            self.python.display().to_string(),
            self.launcher.display().to_string(),
        ];
        args.extend(self.serves.launch_at(self.cpus, &self.paths).1);
        Command {
            program: self.sandbox_exec.clone(),
            args,
            env: self.env(),
            cwd: PathBuf::from(&self.paths.data_dir),
        }
    }

    /// SHA-256 of its command, environment and profile: a running workload whose fingerprint
    /// isn't this one's runs under another sandbox, and is stopped as changed.
    pub fn fingerprint(&self) -> String {
        let command = self.command();
        let mut hash = Sha256::new();
        let env = command.env.iter().flat_map(|(k, v)| [k, v]);
        for part in command.args.iter().chain(env) {
            hash.update(part.as_bytes());
            hash.update([0]);
        }
        hash.update(self.profile.render().as_bytes());
        crate::models::hex(&hash.finalize())
    }

    /// Writes its profile where `sandbox-exec` reads it (replacing the one before).
    pub fn write_profile(&self) -> std::io::Result<()> {
        use crate::drivers::local::dirs;
        if let Some(dir) = self.profile_file.parent() {
            dirs::agent_dir(dir)?;
        }
        dirs::replace_file(&self.profile_file, self.profile.render().as_bytes())
    }
}

/// The root of its run directories, made if missing: a directory of the agent's own that no
/// one else can write. Under `/private/tmp` (every user's) someone may have made it first, or
/// put a link there: refused, naming it.
pub fn run_root(root: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    match std::fs::DirBuilder::new().mode(0o700).create(root) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
        _ => {}
    }
    let meta = std::fs::symlink_metadata(root)?;
    let ours = meta.uid() == rustix::process::geteuid().as_raw();
    if !meta.is_dir() || !ours || meta.mode() & 0o022 != 0 {
        return Err(std::io::Error::other(format!(
            "{}: not a directory of the agent's own that only it can write (set \
             EINSORA_MACOS_RUN_DIR elsewhere, or remove it)",
            root.display()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
