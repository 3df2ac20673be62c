//! Copies a model directory from the machine's models directory into the endpoint's private
//! directory, then checks the copy ([`super::validate_dir`]) and only then names it
//! `model/`. The source is read through one directory handle opened beneath the models
//! directory with no symlink on the way, each entry opened from that handle without
//! following a symlink: nothing swapped in while it is read leads elsewhere. A copy made from
//! the same files before (names, inodes, sizes, times) is reused once it checks again.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags};
use sha2::{Digest, Sha256};

use super::{DirLimits, MODEL_DIR, WeightsProblem, WeightsSummary, check_name, quoted};
use crate::models::fetch::{
    Manifest, PART_PREFIX, blocking, copy_hashing, make_private_dir, read_manifest, storage,
    write_manifest,
};
use crate::models::source::{Location, open_resolved, resolve_file};
use crate::models::{ModelProblem, ModelSource, hex};

/// A model directory ready to be served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedWeights {
    /// `<private dir>/model`.
    pub path: PathBuf,
    /// SHA-256 of its files' names and SHA-256s, in name order.
    pub sha256: String,
    pub summary: WeightsSummary,
    pub reused: bool,
}

/// Prepares the model directory `source` names as `<private_dir>/model`. Only directories in
/// the models directory: a URL names one file, and vLLM's model is many.
pub async fn prepare_dir(
    source: &ModelSource,
    models_dir: Option<&Path>,
    private_dir: &Path,
    limits: &DirLimits,
) -> Result<PreparedWeights, ModelProblem> {
    let Location::File(path) = &source.location else {
        return Err(ModelProblem::BadSource(
            "a vLLM model is a directory in the machine's models directory, not a URL",
        ));
    };
    let (src, path, dir, lim) = (
        source.clone(),
        path.clone(),
        private_dir.to_owned(),
        limits.clone(),
    );
    let models_dir = models_dir.map(Path::to_owned);
    blocking(move || {
        make_private_dir(&dir)?;
        copy_checked(&src, &path, models_dir.as_deref(), &dir, &lim)
    })
    .await
}

fn copy_checked(
    source: &ModelSource,
    path: &Path,
    models_dir: Option<&Path>,
    private_dir: &Path,
    limits: &DirLimits,
) -> Result<PreparedWeights, ModelProblem> {
    let (root, resolved) = resolve_file(path, models_dir)?;
    let handle = open_resolved(&root, &resolved).map_err(|e| {
        use rustix::io::Errno;
        match e.raw_os_error().map(Errno::from_raw_os_error) {
            Some(Errno::NOENT) => ModelProblem::NotFound,
            Some(Errno::LOOP | Errno::XDEV) => ModelProblem::OutsideModelsDir,
            _ => storage("opening the model directory", e),
        }
    })?;
    let meta = handle
        .metadata()
        .map_err(|e| storage("reading the model directory", e))?;
    if !meta.is_dir() {
        return Err(WeightsProblem::NotADirectory.into());
    }
    let entries = entries(&handle, limits)?;
    let identity: String = entries
        .iter()
        .map(|(name, m)| {
            format!(
                "{name}\n{}:{}\n{}\n{}.{}\n",
                m.dev(),
                m.ino(),
                m.len(),
                m.mtime(),
                m.mtime_nsec()
            )
        })
        .collect();
    let key = hex(&Sha256::digest(format!(
        "dir:{}\n{identity}",
        resolved.display()
    )));
    let target = private_dir.join(MODEL_DIR);
    if let Some(manifest) = read_manifest(private_dir)
        && manifest.source_key == key
        && let Ok(summary) = super::validate_dir(&target, limits)
    {
        return Ok(PreparedWeights {
            path: target,
            sha256: manifest.sha256,
            summary,
            reused: true,
        });
    }
    let tmp = tempfile::Builder::new()
        .prefix(PART_PREFIX)
        .tempdir_in(private_dir)
        .map_err(|e| storage("creating a temp directory", e))?;
    let mut digests = Sha256::new();
    let mut size = 0u64;
    for (name, _) in &entries {
        let mut from = open_entry(&handle, name)?;
        let mut to = std::fs::File::create_new(tmp.path().join(name))
            .map_err(|e| storage("copying the model", e))?;
        let (bytes, sha) =
            copy_hashing(&mut from, &mut to, limits.max_file_size).map_err(|_| {
                WeightsProblem::TooLarge {
                    what: "a file",
                    limit: limits.max_file_size,
                }
            })?;
        to.sync_all().map_err(|e| storage("writing the model", e))?;
        size += bytes;
        digests.update(format!("{name}\0{}\n", hex(&sha)));
    }
    let summary = super::validate_dir(tmp.path(), limits)?;
    match std::fs::remove_dir_all(&target) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(storage("replacing the model", e));
        }
        _ => {}
    }
    let _ = std::fs::remove_file(private_dir.join(crate::models::MANIFEST_FILE));
    let sha256 = hex(&digests.finalize());
    std::fs::rename(tmp.keep(), &target).map_err(|e| storage("storing the model", e))?;
    let manifest = Manifest {
        source: source.to_string(),
        source_key: key,
        size,
        sha256: sha256.clone(),
        fetched_at: crate::models::fetch::now_rfc3339()?,
    };
    write_manifest(private_dir, &manifest)?;
    Ok(PreparedWeights {
        path: target,
        sha256,
        summary,
        reused: false,
    })
}

/// The source directory's entries with what each is, sorted by name; each name one a model
/// directory may hold and each a regular file (opened, not followed).
fn entries(
    handle: &std::fs::File,
    limits: &DirLimits,
) -> Result<Vec<(String, std::fs::Metadata)>, ModelProblem> {
    let read =
        |e: rustix::io::Errno| storage("reading the model directory", std::io::Error::from(e));
    let mut found = Vec::new();
    for entry in rustix::fs::Dir::read_from(handle).map_err(read)? {
        let entry = entry.map_err(read)?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let name = std::str::from_utf8(name)
            .map_err(|_| WeightsProblem::Unexpected(quoted(&String::from_utf8_lossy(name))))?
            .to_owned();
        check_name(&name)?;
        if found.len() as u64 >= limits.max_files {
            return Err(WeightsProblem::TooManyFiles(limits.max_files).into());
        }
        let meta = open_entry(handle, &name)?
            .metadata()
            .map_err(|e| storage("reading the model directory", e))?;
        found.push((name, meta));
    }
    found.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(found)
}

/// An entry of the source directory, opened from its handle: a symlink or anything but a
/// regular file is refused.
fn open_entry(handle: &std::fs::File, name: &str) -> Result<std::fs::File, ModelProblem> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let file = match rustix::fs::openat(handle, name, flags, Mode::empty()) {
        Ok(fd) => std::fs::File::from(fd),
        Err(rustix::io::Errno::LOOP) => return Err(WeightsProblem::Unexpected(quoted(name)).into()),
        Err(e) => return Err(storage("opening a model file", std::io::Error::from(e))),
    };
    let is_file = file
        .metadata()
        .map_err(|e| storage("reading a model file", e))?
        .is_file();
    if is_file {
        Ok(file)
    } else {
        Err(WeightsProblem::Unexpected(quoted(name)).into())
    }
}
