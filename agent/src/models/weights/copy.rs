//! Copies a model directory from the machine's models directory into the endpoint's private
//! directory, then checks the copy ([`super::validate_dir`]) and only then names it
//! `model/`. The source is read through one directory handle opened beneath the models
//! directory with no symlink on the way; each entry is looked at without following it (only
//! regular files: nothing is opened that isn't one) and opened from that handle without
//! following a symlink, and must still be the file first looked at. Sizes are checked before
//! anything is copied. A copy made from the same files before (names, inodes, sizes, times) is
//! reused once it checks again.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use sha2::{Digest, Sha256};

use super::{DirLimits, MODEL_DIR, WeightsProblem, WeightsSummary, check_name, quoted};
use crate::models::fetch::{
    Manifest, PART_PREFIX, blocking, copy_hashing, make_private_dir, now_rfc3339, read_manifest,
    storage, write_manifest,
};
use crate::models::source::{Location, identity_of, open_source, resolve_file};
use crate::models::{MANIFEST_FILE, ModelProblem, ModelSource, hex};

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
    let (src, path, dir) = (source.clone(), path.clone(), private_dir.to_owned());
    let (models_dir, lim) = (models_dir.map(Path::to_owned), limits.clone());
    blocking(move || {
        make_private_dir(&dir)?;
        copy_checked(&src, &path, models_dir.as_deref(), &dir, &lim)
    })
    .await
}

/// One file of the source directory as first looked at.
struct Entry {
    name: String,
    meta: std::fs::Metadata,
    /// The most it may hold: JSON files less than weights.
    limit: u64,
}

fn copy_checked(
    source: &ModelSource,
    path: &Path,
    models_dir: Option<&Path>,
    private_dir: &Path,
    limits: &DirLimits,
) -> Result<PreparedWeights, ModelProblem> {
    let (root, resolved) = resolve_file(path, models_dir)?;
    let handle = open_source(&root, &resolved, "the model directory")?;
    let meta = handle
        .metadata()
        .map_err(|e| storage("reading the model directory", e))?;
    if !meta.is_dir() {
        return Err(WeightsProblem::NotADirectory.into());
    }
    let entries = entries(&handle, limits)?;
    let identity: String = entries
        .iter()
        .map(|e| format!("{}\n{}\n", e.name, identity_of(&e.meta)))
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
    for entry in &entries {
        let mut from = open_entry(&handle, &entry.name)?;
        let now = from
            .metadata()
            .map_err(|e| storage("reading a model file", e))?;
        if (now.dev(), now.ino()) != (entry.meta.dev(), entry.meta.ino()) {
            return Err(WeightsProblem::Storage(format!(
                "{} was replaced while the directory was read",
                quoted(&entry.name)
            ))
            .into());
        }
        let mut to = std::fs::File::create_new(tmp.path().join(&entry.name))
            .map_err(|e| storage("copying the model", e))?;
        let (bytes, sha) = copy_hashing(&mut from, &mut to, entry.limit).map_err(|p| match p {
            ModelProblem::TooLarge { limit } => ModelProblem::Weights(WeightsProblem::TooLarge {
                what: "a file (it grew while it was copied)",
                limit,
            }),
            other => other,
        })?;
        to.sync_all().map_err(|e| storage("writing the model", e))?;
        size += bytes;
        digests.update(format!("{}\0{}\n", entry.name, hex(&sha)));
    }
    let summary = super::validate_dir(tmp.path(), limits)?;
    match std::fs::remove_dir_all(&target) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(storage("replacing the model", e));
        }
        _ => {}
    }
    let _ = std::fs::remove_file(private_dir.join(MANIFEST_FILE));
    let sha256 = hex(&digests.finalize());
    std::fs::rename(tmp.keep(), &target).map_err(|e| storage("storing the model", e))?;
    let manifest = Manifest {
        source: source.to_string(),
        source_key: key,
        size,
        sha256: sha256.clone(),
        fetched_at: now_rfc3339()?,
    };
    write_manifest(private_dir, &manifest)?;
    Ok(PreparedWeights {
        path: target,
        sha256,
        summary,
        reused: false,
    })
}

/// The source directory's entries, sorted by name: each of a name a model directory may hold,
/// a regular file (looked at without following it, and only then opened), within its size
/// limit, all of them within the total, before anything is copied.
fn entries(handle: &std::fs::File, limits: &DirLimits) -> Result<Vec<Entry>, ModelProblem> {
    let read =
        |e: rustix::io::Errno| storage("reading the model directory", std::io::Error::from(e));
    let mut found: Vec<Entry> = Vec::new();
    let mut total = 0u64;
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
        let stat =
            rustix::fs::statat(handle, name.as_str(), AtFlags::SYMLINK_NOFOLLOW).map_err(read)?;
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
            return Err(WeightsProblem::Unexpected(quoted(&name)).into());
        }
        let meta = open_entry(handle, &name)?
            .metadata()
            .map_err(|e| storage("reading the model directory", e))?;
        let (limit, what) = if name.ends_with(".json") {
            (limits.max_json_size, "a JSON file")
        } else {
            (limits.max_file_size, "a file")
        };
        if meta.len() > limit {
            return Err(WeightsProblem::TooLarge { what, limit }.into());
        }
        total = total.saturating_add(meta.len());
        if total > limits.max_total_size {
            let limit = limits.max_total_size;
            return Err(WeightsProblem::TooLarge {
                what: "all its files",
                limit,
            }
            .into());
        }
        found.push(Entry { name, meta, limit });
    }
    found.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(found)
}

/// An entry of the source directory, opened from its handle: a symlink or anything but a
/// regular file is refused.
fn open_entry(handle: &std::fs::File, name: &str) -> Result<std::fs::File, ModelProblem> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let file = match rustix::fs::openat(handle, name, flags, Mode::empty()) {
        Ok(fd) => std::fs::File::from(fd),
        Err(rustix::io::Errno::LOOP) => {
            return Err(WeightsProblem::Unexpected(quoted(name)).into());
        }
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
