//! The disk policy on this machine's real filesystems. Mounting needs root: as anyone else,
//! the tests check what an agent that can't mount does instead.

use std::os::unix::fs::MetadataExt;

use super::settings::Floor;
use super::*;

const MIB: u64 = 1 << 20;
const USER: (u32, u32) = (61_000, 61_000);

fn disks(state: &Path, config: DiskConfig) -> Disks {
    Disks::new(config, state)
}

/// Unmounts what a test mounted, even when it fails.
struct Unmount(Vec<PathBuf>);

impl Drop for Unmount {
    fn drop(&mut self) {
        for dir in &self.0 {
            let _ = mounts::unmount_all(dir);
        }
    }
}

#[test]
fn no_new_work_below_the_floor() {
    let state = tempfile::tempdir().unwrap();
    let roomy = DiskConfig {
        floor: Floor::Bytes(0),
        ..DiskConfig::default()
    };
    assert_eq!(disks(state.path(), roomy).room("w1", 0), Ok(()));
    let cramped = DiskConfig {
        floor: Floor::Bytes(u64::MAX / 2),
        limits: Limits::Auto,
        ..DiskConfig::default()
    };
    let d = disks(state.path(), cramped);
    assert_eq!(d.room("w1", 0), Err(StatusCode::DiskLow));
    if d.mountable {
        assert_eq!(d.admit("w1"), Err(StatusCode::DiskLow));
    }
}

#[test]
fn an_agent_that_cant_mount_refuses_or_runs_unlimited_as_set() {
    let state = tempfile::tempdir().unwrap();
    let mut d = disks(state.path(), DiskConfig::default());
    d.mountable = false;
    assert_eq!(d.admit("w1"), Ok(()));
    d.config.floor = Floor::Bytes(0);
    let data = state.path().join("data").join("w1");
    let provided = d.provide_data("w1", &data, MIB, USER, false);
    tokio_test(provided).unwrap();
    assert!(data.is_dir() && !mounts::is_mount_point(&data).unwrap());
    std::fs::remove_dir(&data).unwrap();
    let again = d.provide_data("w1", &data, MIB, USER, true);
    assert_eq!(tokio_test(again), Err(StatusCode::DiskMissing));
    d.config.limits = Limits::Required;
    assert_eq!(d.admit("w1"), Err(StatusCode::DiskLimitUnavailable));
}

/// As root: the disk is made once, at its size, mounted on the data directory and full at
/// its limit; provided again (an agent or a host restart) it is the same disk; released, it is
/// gone, and a workload that had it is refused rather than given a fresh one.
#[test]
fn a_notebooks_disk_is_full_at_its_limit_and_goes_with_it() {
    let state = tempfile::tempdir().unwrap();
    let config = DiskConfig {
        floor: Floor::Bytes(0),
        ..DiskConfig::default()
    };
    let d = disks(state.path(), config);
    if !d.mountable {
        eprintln!("not root: nothing to mount");
        return;
    }
    let data = state.path().join("data").join("w1");
    let run = state.path().join("run").join("w1");
    let _cleanup = Unmount(vec![data.clone(), run.clone()]);
    tokio_test(d.provide_data("w1", &data, 16 * MIB, USER, false)).unwrap();
    d.provide_run_dir("w1", &run, USER).unwrap();
    assert!(mounts::is_tmpfs_mount(&run).unwrap());
    let image = state.path().join("disks").join("w1.img");
    assert_eq!(
        image::backing_file(&data).unwrap(),
        Some(image.canonicalize().unwrap())
    );
    let root = std::fs::metadata(&data).unwrap();
    assert_eq!(
        (root.uid(), root.gid(), root.mode() & 0o777),
        (USER.0, USER.1, 0o700)
    );
    assert_eq!(
        std::fs::read_dir(&data).unwrap().count(),
        0,
        "empty: no lost+found"
    );

    let full = std::fs::write(data.join("big"), vec![1_u8; 32 * MIB as usize]).unwrap_err();
    assert_eq!(full.raw_os_error(), Some(28), "ENOSPC: {full}");
    tokio_test(d.provide_data("w1", &data, 16 * MIB, USER, true)).unwrap();
    assert!(data.join("big").exists(), "the same disk, files and all");
    // After a host restart nothing is mounted: the same disk is mounted again.
    mounts::unmount_all(&data).unwrap();
    assert!(!data.join("big").exists());
    tokio_test(d.provide_data("w1", &data, 16 * MIB, USER, true)).unwrap();
    assert!(data.join("big").exists(), "mounted again, files and all");

    d.release("w1", &run, &data).unwrap();
    assert!(!mounts::is_mount_point(&data).unwrap() && !mounts::is_mount_point(&run).unwrap());
    assert!(!image.exists());
    let refused = d.provide_data("w1", &data, 16 * MIB, USER, true);
    assert_eq!(tokio_test(refused), Err(StatusCode::DiskMissing));
    assert!(!image.exists(), "no fresh disk");
}

/// As root: a data directory that is a link, or that already holds files, is never mounted on.
#[test]
fn nothing_is_mounted_on_a_link_or_over_files() {
    let state = tempfile::tempdir().unwrap();
    let config = DiskConfig {
        floor: Floor::Bytes(0),
        ..DiskConfig::default()
    };
    let d = disks(state.path(), config);
    if !d.mountable {
        eprintln!("not root: nothing to mount");
        return;
    }
    let elsewhere = tempfile::tempdir().unwrap();
    let open = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(elsewhere.path(), open).unwrap();
    let data = state.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let link = data.join("w1");
    std::os::unix::fs::symlink(elsewhere.path(), &link).unwrap();
    let _cleanup = Unmount(vec![link.clone(), elsewhere.path().to_path_buf()]);
    let refused = d.provide_data("w1", &link, 16 * MIB, USER, false);
    assert_eq!(tokio_test(refused), Err(StatusCode::DiskLimitUnavailable));
    assert!(!mounts::is_mount_point(elsewhere.path()).unwrap());
    let target = std::fs::metadata(elsewhere.path()).unwrap();
    assert_eq!(
        target.mode() & 0o777,
        0o755,
        "what the link points at is untouched"
    );

    let old = data.join("w2");
    std::fs::create_dir(&old).unwrap();
    std::fs::write(old.join("notes.txt"), b"from before limits").unwrap();
    let refused = d.provide_data("w2", &old, 16 * MIB, USER, true);
    assert_eq!(tokio_test(refused), Err(StatusCode::DiskLimitUnavailable));
    assert!(old.join("notes.txt").exists(), "left where it was");
    assert!(!mounts::is_mount_point(&old).unwrap());
}

#[test]
fn only_plain_ids_name_a_disk() {
    let d = disks(Path::new("/state"), DiskConfig::default());
    assert_eq!(
        d.image_of("w_1-a"),
        Some(PathBuf::from("/state/disks/w_1-a.img"))
    );
    for bad in ["", "..", "a/b", "a.img"] {
        assert_eq!(d.image_of(bad), None, "{bad:?}");
    }
}

fn tokio_test<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}
