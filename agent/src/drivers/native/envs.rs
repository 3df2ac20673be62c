//! Each runtime's Python environment: a venv the agent builds once from the runtime's lock
//! (every file checked against its hash; from a wheel directory, offline, when one is set),
//! in the background, and mounts read-only at `/opt/venv` in each sandbox; or the operator's
//! own interpreter (`EINSORA_NATIVE_PYTHON`), for machines where none can be built, mounted
//! read-only where it is.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::process::Command;
use tokio::sync::watch;

use super::runtimes::Runtime;

/// Where a built environment is, inside the sandbox (where the images have theirs).
const VENV: &str = "/opt/venv";
/// What environments are built with: the system's Python (Debian's python3 and python3-venv).
const BASE_PYTHON: &str = "/usr/bin/python3";
const VENV_LIMIT: Duration = Duration::from_secs(5 * 60);
const INSTALL_LIMIT: Duration = Duration::from_secs(30 * 60);

/// The interpreter a workload's server runs with, and the host directories it needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interpreter {
    /// Its path inside the sandbox.
    pub python: PathBuf,
    /// Host directories mounted read-only, and where.
    pub binds: Vec<(PathBuf, PathBuf)>,
}

/// Where a runtime's environment stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvState {
    Ready(Interpreter),
    Building,
    /// Its build failed (the agent's log says why): not tried again until the agent restarts.
    Failed,
}

/// What builds the environments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Builder {
    /// Debian's `python3 -m venv` and pip; each environment is mounted at `/opt/venv` in its
    /// sandbox (linux-native).
    Pip,
    /// uv, with `python` (a version uv finds or installs, or a path); each environment is used
    /// where it is, with its base interpreter's prefix (macos-native).
    Uv { uv: PathBuf, python: String },
}

#[derive(Debug)]
pub struct Envs {
    root: PathBuf,
    builder: Builder,
    wheels: Option<PathBuf>,
    /// The operator's interpreter, when one is set: every runtime runs with it.
    operator: Option<Interpreter>,
    builds: HashMap<&'static str, watch::Receiver<Option<bool>>>,
}

impl Envs {
    pub fn new(
        root: PathBuf,
        builder: Builder,
        wheels: Option<PathBuf>,
        operator: Option<Interpreter>,
    ) -> Envs {
        Envs {
            root,
            builder,
            wheels,
            operator,
            builds: HashMap::new(),
        }
    }

    /// The runtime's interpreter, or where its build stands (one starts in the background).
    pub fn ensure(&mut self, runtime: &'static Runtime) -> EnvState {
        if let Some(operator) = &self.operator {
            return EnvState::Ready(operator.clone());
        }
        let dir = self.root.join(env_name(runtime));
        let ready = || match &self.builder {
            Builder::Pip => EnvState::Ready(Interpreter {
                python: Path::new(VENV).join("bin/python3"),
                binds: vec![(dir.clone(), PathBuf::from(VENV))],
            }),
            Builder::Uv { .. } => match base_interpreter(&dir) {
                Ok(base) => EnvState::Ready(Interpreter {
                    python: dir.join("bin/python3"),
                    binds: std::iter::once(dir.clone())
                        .chain(base)
                        .map(|p| (p.clone(), p))
                        .collect(),
                }),
                Err(why) => {
                    tracing::warn!(env = %dir.display(), %why, "its environment can't be used");
                    EnvState::Failed
                }
            },
        };
        if let Some(build) = self.builds.get(runtime.name) {
            return match *build.borrow() {
                None => EnvState::Building,
                Some(true) => ready(),
                Some(false) => EnvState::Failed,
            };
        }
        if dir.is_dir() {
            return ready();
        }
        let (done, receiver) = watch::channel(None);
        let (wheels, target, builder) = (self.wheels.clone(), dir.clone(), self.builder.clone());
        tokio::spawn(async move {
            let built = build(runtime, &builder, &target, wheels.as_deref()).await;
            if let Err(why) = &built {
                tracing::warn!(runtime = runtime.name, %why, "its environment couldn't be built");
            } else {
                tracing::info!(runtime = runtime.name, env = %target.display(), "environment built");
            }
            let _ = done.send(Some(built.is_ok()));
        });
        self.builds.insert(runtime.name, receiver);
        EnvState::Building
    }
}

/// The environment's directory name: the runtime and its lock's hash, so a new lock is a new
/// environment (the old one stays until removed by hand).
fn env_name(runtime: &Runtime) -> String {
    let hash = crate::models::hex(&Sha256::digest(runtime.lock.as_bytes()));
    format!("{}-{}", runtime.name, &hash[..16])
}

/// Builds it beside its place and renames it there once whole: a half-built environment is
/// never used.
async fn build(
    runtime: &Runtime,
    builder: &Builder,
    dir: &Path,
    wheels: Option<&Path>,
) -> Result<(), String> {
    let partial = dir.with_extension("partial");
    match std::fs::remove_dir_all(&partial) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(format!("{}: {e}", partial.display()));
        }
        _ => {}
    }
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    let lock = partial.with_extension("lock");
    std::fs::write(&lock, runtime.lock).map_err(|e| format!("{}: {e}", lock.display()))?;
    let python = partial.join("bin/python3");
    let path = match builder {
        Builder::Pip => "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
        // Homebrew's too, where uv and Python are on a Mac.
        Builder::Uv { .. } => "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin:/opt/homebrew/bin",
    };
    let install = match builder {
        Builder::Pip => {
            let mut venv = Command::new(BASE_PYTHON);
            venv.arg("-m").arg("venv").arg(&partial);
            run(venv, path, VENV_LIMIT).await?;
            let mut install = Command::new(&python);
            install.args([
                "-m",
                "pip",
                "install",
                "--no-cache-dir",
                "--disable-pip-version-check",
                "--require-hashes",
                "--no-deps",
                "--only-binary=:all:",
                "-r",
            ]);
            install.arg(&lock);
            if let Some(wheels) = wheels {
                install.arg("--no-index").arg("--find-links").arg(wheels);
            }
            install
        }
        Builder::Uv { uv, python: base } => {
            // Relocatable: it is built beside its place and renamed there.
            let mut venv = Command::new(uv);
            venv.args(["venv", "--no-config", "--relocatable", "--python"])
                .arg(base)
                .arg(&partial);
            run(venv, path, VENV_LIMIT).await?;
            let mut install = Command::new(uv);
            install
                .args(["pip", "install", "--no-config", "--no-cache", "--python"])
                .arg(&python)
                .args([
                    "--require-hashes",
                    "--no-deps",
                    "--only-binary",
                    ":all:",
                    "-r",
                ])
                .arg(&lock);
            if let Some(wheels) = wheels {
                install
                    .args(["--offline", "--no-index", "--find-links"])
                    .arg(wheels);
            }
            install
        }
    };
    let installed = run(install, path, INSTALL_LIMIT).await;
    let _ = std::fs::remove_file(&lock);
    installed?;
    if !runtime.after_install.is_empty() {
        let mut after = Command::new(&python);
        after.args(runtime.after_install);
        run(after, path, VENV_LIMIT).await?;
    }
    std::fs::rename(&partial, dir).map_err(|e| format!("{}: {e}", dir.display()))
}

/// What of the interpreter a uv environment was made from its server may read and run: the
/// interpreter itself, its standard library, and its shared library where it has one (a
/// framework build's `Python`), all by their resolved paths. Not its whole prefix: that is
/// `/usr` or Homebrew's, with every program there. Read from the environment's `pyvenv.cfg`
/// (`home`, `version_info`), the agent's own file: no workload writes it.
fn base_interpreter(env: &Path) -> Result<Vec<PathBuf>, String> {
    let cfg = env.join("pyvenv.cfg");
    let text = std::fs::read_to_string(&cfg).map_err(|e| format!("{}: {e}", cfg.display()))?;
    let value = |key: &str| {
        text.lines()
            .filter_map(|l| l.split_once('='))
            .find(|(k, _)| k.trim() == key)
            .map(|(_, v)| v.trim().to_owned())
            .ok_or_else(|| format!("{}: no `{key}`", cfg.display()))
    };
    let version = value("version_info")?;
    let mut parts = version.split('.');
    let short = match (parts.next(), parts.next()) {
        (Some(major), Some(minor)) => format!("{major}.{minor}"),
        _ => return Err(format!("{}: version_info {version}", cfg.display())),
    };
    let resolve =
        |p: PathBuf| std::fs::canonicalize(&p).map_err(|e| format!("{}: {e}", p.display()));
    let exe = resolve(PathBuf::from(value("home")?).join(format!("python{short}")))?;
    let prefix = exe
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| format!("{}: no prefix", exe.display()))?;
    let stdlib = resolve(prefix.join("lib").join(format!("python{short}")))?;
    let mut base = vec![exe.clone(), stdlib];
    let shared = [
        prefix.join("Python"),
        prefix.join("lib").join(format!("libpython{short}.dylib")),
    ];
    base.extend(
        shared
            .into_iter()
            .filter_map(|p| std::fs::canonicalize(p).ok()),
    );
    Ok(base)
}

/// Runs a build step: its output's tail is the error when it fails.
/// Nothing of the agent's environment (its settings, any credential) reaches a build step: pip
/// reads its own configuration files (`/etc/pip.conf`, the agent user's) for its index, proxy
/// and certificates.
async fn run(mut command: Command, path: &str, limit: Duration) -> Result<(), String> {
    command
        .env_clear()
        .env("PATH", path)
        .env("LANG", "C.UTF-8")
        .kill_on_drop(true)
        .stdin(std::process::Stdio::null());
    let what = format!("{:?}", command.as_std().get_program());
    let output = tokio::time::timeout(limit, command.output())
        .await
        .map_err(|_| format!("{what} took longer than {} s", limit.as_secs()))?
        .map_err(|e| format!("{what}: {e}"))?;
    if output.status.success() {
        return Ok(());
    }
    let mut said = String::from_utf8_lossy(&output.stderr).into_owned();
    said.push_str(&String::from_utf8_lossy(&output.stdout));
    let tail: String = said
        .chars()
        .rev()
        .take(2000)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    Err(format!("{what} failed ({}): {tail}", output.status))
}

/// The operator's interpreter: its prefixes (asked of it once, at start) are mounted
/// read-only at their own paths, so it finds its libraries.
pub async fn operator_interpreter(python: &Path) -> Result<Interpreter, String> {
    let mut ask = Command::new(python);
    ask.args([
        "-I",
        "-c",
        "import sys; print(sys.prefix); print(sys.base_prefix); print(sys.exec_prefix)",
    ]);
    ask.kill_on_drop(true).stdin(std::process::Stdio::null());
    let output = tokio::time::timeout(Duration::from_secs(30), ask.output())
        .await
        .map_err(|_| format!("{} didn't answer in 30 s", python.display()))?
        .map_err(|e| format!("{}: {e}", python.display()))?;
    if !output.status.success() {
        return Err(format!("{} failed ({})", python.display(), output.status));
    }
    let mut binds: Vec<(PathBuf, PathBuf)> = Vec::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let prefix = PathBuf::from(line.trim());
        // The system's own prefix is mounted whole already.
        let system = prefix.starts_with("/usr");
        if prefix.is_absolute() && !system && !binds.iter().any(|(p, _)| *p == prefix) {
            binds.push((prefix.clone(), prefix));
        }
    }
    Ok(Interpreter {
        python: python.to_owned(),
        binds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This machine's Python (Debian's, as the stand-in's uv environments use): its interpreter
    /// and standard library only, never `/usr` whole.
    #[test]
    fn a_uv_environment_may_run_its_interpreter_and_read_its_library_only() {
        let env = tempfile::tempdir().unwrap();
        let version = std::process::Command::new(BASE_PYTHON)
            .args(["-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"])
            .output()
            .unwrap();
        let version = String::from_utf8(version.stdout).unwrap();
        let cfg = format!("home = /usr/bin\nimplementation = CPython\nversion_info = {version}");
        std::fs::write(env.path().join("pyvenv.cfg"), cfg).unwrap();
        let base = base_interpreter(env.path()).unwrap();
        let short: Vec<&str> = version.trim().split('.').take(2).collect();
        let short = short.join(".");
        assert_eq!(
            base,
            [
                std::fs::canonicalize(format!("/usr/bin/python{short}")).unwrap(),
                PathBuf::from(format!("/usr/lib/python{short}")),
            ]
        );
        std::fs::write(env.path().join("pyvenv.cfg"), "home = /usr/bin\n").unwrap();
        let err = base_interpreter(env.path()).unwrap_err();
        assert!(err.ends_with("no `version_info`"), "{err}");
    }
}
