//! What a workload may write on its machine's disk, and how much (docs/decisions/0008): a
//! notebook's files go to an ext4 image of its class's size, loop-mounted on its data
//! directory; its run directory (its server's socket) is a tiny tmpfs; its container's log
//! keeps a bounded tail (spec.rs). No new work starts while the machine's free space is below
//! the floor. Where the agent can't mount (it isn't root), `EINSORA_AGENT_DISK_LIMITS` says
//! whether workloads run without these limits (`auto`, said in the log) or are refused.

mod image;
mod mounts;
mod settings;
mod space;

use std::path::{Path, PathBuf};

use einsora_core::agent::StatusCode;

use super::dirs;
pub use settings::{DiskConfig, FLOOR, LIMITS, LOG_LIMIT, Limits};

/// A run directory holds one socket: this is room to spare (its pages count against the
/// workload's memory, not the machine's disk).
const RUN_DIR_BYTES: u64 = 16 << 20;
const RUN_DIR_INODES: u32 = 256;

#[derive(Debug)]
pub struct Disks {
    config: DiskConfig,
    state_dir: PathBuf,
    /// Whether this agent can mount filesystems (root, with loop devices).
    mountable: bool,
}

impl Disks {
    pub fn new(config: DiskConfig, state_dir: &Path) -> Disks {
        let mountable = can_mount();
        if !mountable {
            match config.limits {
                Limits::Auto => tracing::warn!(
                    "this machine can't limit workloads' disks: the agent can't mount \
                     filesystems (it isn't root, or there are no loop devices). Notebooks' files \
                     have no size limit; only the free-space floor ({FLOOR}) guards this \
                     machine's disk. {LIMITS}=required refuses such workloads instead"
                ),
                Limits::Required => tracing::warn!(
                    "this machine can't limit workloads' disks: the agent can't mount \
                     filesystems (it isn't root, or there are no loop devices), and {LIMITS} is \
                     required, so it refuses every workload"
                ),
            }
        }
        Disks {
            config,
            state_dir: state_dir.to_path_buf(),
            mountable,
        }
    }

    /// What a container's log keeps, in all.
    pub fn log_bytes(&self) -> u64 {
        self.config.log_bytes
    }

    /// New work starts only while the machine's free space is above the floor, and where its
    /// disks can be limited as the settings require; running workloads are left alone.
    pub fn admit(&self, workload: &str) -> Result<(), StatusCode> {
        if !self.mountable && self.config.limits == Limits::Required {
            tracing::warn!(
                workload,
                "refused: the agent can't limit its disk here, and {LIMITS} is required"
            );
            return Err(StatusCode::DiskLimitUnavailable);
        }
        self.room(workload, 0)
    }

    /// Whether `needed` bytes can be set aside and still leave the floor free.
    fn room(&self, workload: &str, needed: u64) -> Result<(), StatusCode> {
        let floor = self.config.floor;
        match space::Space::of(&self.state_dir) {
            Ok(space) if space.leaves(needed, floor) => Ok(()),
            Ok(space) => {
                tracing::warn!(
                    workload,
                    available = space.available,
                    needed,
                    floor = floor.bytes_of(space.total),
                    "refused new work: the machine's free disk space is below the floor ({FLOOR})"
                );
                Err(StatusCode::DiskLow)
            }
            Err(e) => {
                tracing::warn!(workload, error = %e, "can't read the machine's free disk space; not starting it");
                Err(StatusCode::StartFailed)
            }
        }
    }

    /// A notebook's data directory, ready for its container: its own filesystem of `bytes`
    /// mounted on it (made the first time), or, where the agent can't mount, a plain private
    /// directory. One that had a disk never silently gets a fresh one.
    pub async fn provide_data(
        &self,
        workload: &str,
        data: &Path,
        bytes: u64,
        user: (u32, u32),
        had_disk: bool,
    ) -> Result<(), StatusCode> {
        let failed = |e: &dyn std::fmt::Display| {
            tracing::warn!(workload, error = %e, "can't give it a size-limited disk");
            StatusCode::DiskLimitUnavailable
        };
        if !self.mountable {
            if had_disk && !data.exists() {
                return Err(StatusCode::DiskMissing);
            }
            return dirs::private_dir(data, user).map_err(|e| failed(&e));
        }
        let image = self
            .image_of(workload)
            .ok_or_else(|| failed(&"not a plain workload ID"))?;
        let image_there = image.try_exists().map_err(|e| failed(&e))?;
        if had_disk && (!image_there || !data.exists()) {
            if image_there || !has_files(data) {
                return Err(StatusCode::DiskMissing);
            }
            tracing::warn!(workload, dir = %data.display(), "its files are in a directory without a size limit (made by an older or unprivileged agent); they are left there, and it isn't started");
            return Err(StatusCode::DiskLimitUnavailable);
        }
        match image::backing_file(data) {
            Ok(Some(mounted)) if same_file(&mounted, &image) => return Ok(()),
            Ok(Some(other)) => {
                return Err(failed(&format!(
                    "another image is mounted on its data directory: {}",
                    other.display()
                )));
            }
            Ok(None) if mounts::is_mount_point(data).unwrap_or(false) => {
                return Err(failed(
                    &"something other than its disk is mounted on its data directory",
                ));
            }
            Ok(None) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(failed(&e)),
        }
        dirs::agent_dir(&self.disks_dir()).map_err(|e| failed(&e))?;
        let fresh = !image_there;
        if fresh {
            self.room(workload, bytes)?;
            image::make(&image, bytes, user)
                .await
                .map_err(|e| failed(&e))?;
            tracing::info!(workload, bytes, "made its disk");
        }
        // Made if missing; an existing one is checked as it is, never followed.
        match std::fs::symlink_metadata(data) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                dirs::agent_dir(data).map_err(|e| failed(&e))?;
            }
            Err(e) => return Err(failed(&e)),
            Ok(_) => {}
        }
        mounts::check_bare(data).map_err(|e| failed(&e))?;
        image::mount(&image, data).await.map_err(|e| failed(&e))?;
        if fresh {
            // The workload's own, owner-only; ext4's lost+found is root's, of no use to it.
            let _ = std::fs::remove_dir(data.join("lost+found"));
            dirs::private_dir(data, user).map_err(|e| failed(&e))?;
        }
        Ok(())
    }

    /// A run directory for its server's socket, `user`'s, owner-only: a tmpfs of its own where
    /// the agent can mount (what an earlier run left in it is gone), else a plain directory.
    pub fn provide_run_dir(
        &self,
        workload: &str,
        run: &Path,
        user: (u32, u32),
    ) -> Result<(), StatusCode> {
        let failed = |e: std::io::Error| {
            tracing::warn!(workload, error = %e, "can't prepare its run directory");
            StatusCode::StartFailed
        };
        if self.mountable && !mounts::is_tmpfs_mount(run).unwrap_or(false) {
            mounts::unmount_all(run).map_err(failed)?;
            match std::fs::remove_dir_all(run) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(failed(e)),
                _ => {}
            }
            dirs::agent_dir(run).map_err(failed)?;
            mounts::check_bare(run).map_err(failed)?;
            mounts::mount_tmpfs(run, RUN_DIR_BYTES, RUN_DIR_INODES, user).map_err(failed)?;
        }
        dirs::private_dir(run, user).map_err(failed)
    }

    /// A directory for a workload's output, the agent's own and emptied: a tmpfs of `bytes`
    /// where the agent can mount, so a workload growing its log (by writing, truncating or
    /// allocating) fills only that; else a plain directory (the log is then bounded only by
    /// the driver's rotation).
    pub fn provide_log_dir(
        &self,
        workload: &str,
        dir: &Path,
        bytes: u64,
    ) -> Result<(), StatusCode> {
        let failed = |e: std::io::Error| {
            tracing::warn!(workload, error = %e, "can't prepare its log directory");
            StatusCode::StartFailed
        };
        mounts::unmount_all(dir).map_err(failed)?;
        match std::fs::remove_dir_all(dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(failed(e)),
            _ => {}
        }
        dirs::agent_dir(dir).map_err(failed)?;
        if self.mountable {
            let agent = (
                rustix::process::geteuid().as_raw(),
                rustix::process::getegid().as_raw(),
            );
            mounts::check_bare(dir).map_err(failed)?;
            mounts::mount_tmpfs(dir, bytes, 16, agent).map_err(failed)?;
            dirs::agent_dir(dir).map_err(failed)?;
        }
        Ok(())
    }

    /// Unmounts what [`Disks::provide_log_dir`] mounted.
    pub fn release_log_dir(&self, dir: &Path) -> std::io::Result<()> {
        mounts::unmount_all(dir)
    }

    /// Unmounts the workload's filesystems and deletes its disk: before its directories go.
    pub fn release(&self, workload: &str, run: &Path, data: &Path) -> std::io::Result<()> {
        mounts::unmount_all(run)?;
        mounts::unmount_all(data)?;
        if let Some(image) = self.image_of(workload) {
            match std::fs::remove_file(image) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }

    fn disks_dir(&self) -> PathBuf {
        self.state_dir.join("disks")
    }

    /// Where the workload's disk image is kept; `None` for an ID that isn't one plain name.
    fn image_of(&self, workload: &str) -> Option<PathBuf> {
        let plain = !workload.is_empty()
            && workload
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        plain.then(|| self.disks_dir().join(format!("{workload}.img")))
    }
}

/// Whether `dir` is a directory with anything in it (not followed if it is a link).
fn has_files(dir: &Path) -> bool {
    let is_dir = std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_dir());
    is_dir && std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some())
}

/// Whether the loop device's backing file `mounted` is `image`.
fn same_file(mounted: &Path, image: &Path) -> bool {
    image.canonicalize().is_ok_and(|image| image == mounted)
}

/// Whether this process may mount filesystems (CAP_SYS_ADMIN) and has loop devices.
fn can_mount() -> bool {
    const CAP_SYS_ADMIN: u32 = 21;
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let effective = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or(0);
    effective & (1 << CAP_SYS_ADMIN) != 0 && Path::new("/dev/loop-control").exists()
}

#[cfg(test)]
mod tests;
