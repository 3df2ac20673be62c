//! The packages, built once per test run by scripts/package from the binary cargo built: the
//! version under test and a lower one (the same tree) to upgrade from.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

pub const VERSION: &str = "0.2.0";
pub const OLDER: &str = "0.1.0";

pub struct Built {
    /// Holds both versions' directories, named for their versions.
    pub dir: tempfile::TempDir,
    /// scripts/package's output for VERSION: what a release holds.
    pub release: PathBuf,
}

impl Built {
    pub fn deb(&self) -> PathBuf {
        self.release.join(format!("einsora_{VERSION}_amd64.deb"))
    }

    pub fn rpm(&self) -> PathBuf {
        self.release.join(format!("einsora-{VERSION}-1.x86_64.rpm"))
    }

    pub fn tarball(&self) -> PathBuf {
        self.release
            .join(format!("einsora-{VERSION}-x86_64-unknown-linux-gnu.tar.gz"))
    }
}

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub fn built() -> &'static Built {
    static BUILT: OnceLock<Built> = OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("einsora-packages-")
            .tempdir()
            .unwrap();
        let release = dir.path().join(VERSION);
        let older = dir.path().join(OLDER);
        package(VERSION, &release);
        package(OLDER, &older);
        Built { release, dir }
    })
}

fn package(version: &str, out: &Path) {
    let ran = Command::new(repo().join("scripts/package"))
        .args(["--binary", env!("CARGO_BIN_EXE_einsora")])
        .args(["--version", version, "--commit", "test"])
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    assert!(
        ran.status.success(),
        "scripts/package {version}: {}",
        String::from_utf8_lossy(&ran.stderr)
    );
}

/// Runs `program` with `args`, in an environment of PATH and HOME only, as a root shell would
/// have it (not the test command's `EINSORA_*`, which `einsora` run as root refuses); its exit
/// status, standard output and error.
pub fn run(program: &str, args: &[&str]) -> (bool, String, String) {
    let out = clean(Command::new(program).args(args))
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `command` with PATH and HOME its only environment.
pub fn clean(command: &mut Command) -> &mut Command {
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", std::env::var_os("HOME").unwrap_or_default())
}

/// [`run`], which must succeed; its standard output.
pub fn ok(program: &str, args: &[&str]) -> String {
    let (success, out, err) = run(program, args);
    assert!(success, "{program} {args:?} failed:\n{out}\n{err}");
    out
}
