//! A workload's places on this machine, all under the agent's state directory, mode 0700: its
//! run directory (where its server's socket is), its data (a notebook's files, kept while it is
//! stopped) and its model (an endpoint's), owned by the user its server runs as; and its
//! secret (the token its server is started with), in a directory of the agent's own that the
//! workload never sees: the file alone is mounted into its container, read-only.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rustix::fs::{Gid, Uid, chown};

#[derive(Debug, Clone)]
pub struct Places {
    pub run: PathBuf,
    pub data: PathBuf,
    pub model: PathBuf,
    pub secret: PathBuf,
    /// Its server's home and temporary files where no sandbox gives it a tmpfs (a Mac).
    pub home: PathBuf,
}

impl Places {
    pub fn of(state_dir: &Path, workload: &str) -> Places {
        Places {
            run: einsora_core::run_dirs::run_dir(state_dir, workload),
            data: state_dir.join("data").join(workload),
            model: state_dir.join("models").join(workload),
            secret: state_dir.join("secrets").join(workload),
            home: state_dir.join("homes").join(workload),
        }
    }

    /// Deletes everything the workload stored here.
    pub fn remove_all(&self) -> std::io::Result<()> {
        for dir in [&self.run, &self.data, &self.model, &self.secret, &self.home] {
            match std::fs::remove_dir_all(dir) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }
}

/// `dir` (and its parents), owner-only, owned by `user`.
pub fn private_dir(dir: &Path, user: (u32, u32)) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    give(dir, user)
}

/// `dir` (and its parents), the agent's own, mode 0700.
pub fn agent_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

/// Writes `secret` to `path`, readable by `user` only (replacing any earlier one). The file is
/// given to `user` through its descriptor, never by name.
pub fn secret_file(path: &Path, secret: &str, user: (u32, u32)) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o400)
        .open(&tmp)?;
    file.write_all(secret.as_bytes())?;
    file.sync_all()?;
    let (uid, gid) = user;
    if rustix::process::geteuid().as_raw() != uid {
        rustix::fs::fchown(&file, Some(Uid::from_raw(uid)), Some(Gid::from_raw(gid)))?;
    }
    std::fs::rename(&tmp, path)
}

/// Writes `bytes` to `path`, the agent's own and readable by it only, replacing what was there
/// at once (written beside it, synced, then renamed over it).
pub fn replace_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// `dir` and the files in it, to `user`.
pub fn give_tree(dir: &Path, user: (u32, u32)) -> std::io::Result<()> {
    give(dir, user)?;
    for entry in std::fs::read_dir(dir)? {
        give(&entry?.path(), user)?;
    }
    Ok(())
}

/// Chowns to `user`, unless the agent already is that user (then it can't, and needn't).
fn give(path: &Path, (uid, gid): (u32, u32)) -> std::io::Result<()> {
    if rustix::process::geteuid().as_raw() == uid {
        return Ok(());
    }
    chown(path, Some(Uid::from_raw(uid)), Some(Gid::from_raw(gid)))?;
    Ok(())
}

/// A fresh random token (256 bits, hex).
pub fn new_token() -> std::io::Result<String> {
    let mut bytes = [0_u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(crate::models::hex(&bytes))
}
