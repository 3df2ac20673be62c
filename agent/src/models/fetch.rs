//! Puts an endpoint's model into its private directory: copied from the models directory or
//! downloaded into a temp file there, checked (size, SHA-256, GGUF) and only then renamed to
//! `model.gguf`, with `manifest.json` beside it. A stale or interrupted attempt leaves no
//! `model.gguf` that wasn't validated.
//!
//! Files are copied, never hard-linked: workloads run as the agent's user, so a link would let
//! an endpoint write through to the shared original (and `chmod` doesn't stop the owner).
//! The copy is read and written (hashed on the way), so it takes the model's size again on
//! disk.

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::{Arc, LazyLock};

use rustls::ClientConfig;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tempfile::NamedTempFile;
use tokio::io::AsyncWriteExt;

use super::source::{Location, identity_of, open_source, resolve_file};
use super::{
    Limits, MANIFEST_FILE, MODEL_FILE, ModelProblem, ModelSource, PreparedModel, gguf, hex, http,
    open_no_follow,
};

/// Temp files of unfinished fetches: removed before the next attempt.
pub(super) const PART_PREFIX: &str = ".model-";
/// A manifest is a few hundred bytes.
const MAX_MANIFEST: u64 = 64 << 10;

/// `manifest.json`: what the private directory's model is and where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// The source as shown: a URL without its query.
    pub source: String,
    /// SHA-256 of the whole URL (query included), or of the original file's identity (path
    /// resolved, inode, size, mtime): the same key means the same model.
    pub source_key: String,
    pub size: u64,
    pub sha256: String,
    /// RFC 3339.
    pub fetched_at: String,
}

static PUBLIC_TLS: LazyLock<Arc<ClientConfig>> =
    LazyLock::new(|| http::tls_config(http::public_roots()));

/// Prepares `source` as `<private_dir>/model.gguf` (creating `private_dir`, owner-only) and
/// validates it; reuses what an earlier call left when the source is the same.
/// `models_dir` is `EINSORA_MODELS_DIR`, if set.
pub async fn prepare(
    source: &ModelSource,
    models_dir: Option<&Path>,
    private_dir: &Path,
    limits: &Limits,
) -> Result<PreparedModel, ModelProblem> {
    prepare_with_tls(source, models_dir, private_dir, limits, &PUBLIC_TLS).await
}

pub(super) async fn prepare_with_tls(
    source: &ModelSource,
    models_dir: Option<&Path>,
    private_dir: &Path,
    limits: &Limits,
    tls: &Arc<ClientConfig>,
) -> Result<PreparedModel, ModelProblem> {
    let (src, dir, lim) = (source.clone(), private_dir.to_owned(), limits.clone());
    match &source.location {
        Location::File(path) => {
            let (path, models_dir) = (path.clone(), models_dir.map(Path::to_owned));
            blocking(move || {
                make_private_dir(&dir)?;
                prepare_file(&src, &path, models_dir.as_deref(), &dir, &lim)
            })
            .await
        }
        Location::Url(url) => {
            http::check_scheme(url, limits.allow_loopback_http)?;
            let key = hex(&Sha256::digest(source.identity()));
            let (k, d) = (key.clone(), dir.clone());
            let reused = blocking(move || {
                make_private_dir(&d)?;
                Ok(try_reuse(&src, &d, &k, &lim))
            })
            .await?;
            if let Some(model) = reused {
                return Ok(model);
            }
            let tmp = temp_file(private_dir)?;
            let mut out = tokio::fs::File::from_std(
                tmp.as_file()
                    .try_clone()
                    .map_err(|e| storage("opening the temp file", e))?,
            );
            let got = http::download(
                url,
                &mut out,
                limits.max_file_size,
                tls,
                limits.allow_loopback_http,
            )
            .await?;
            out.flush()
                .await
                .map_err(|e| storage("writing the model", e))?;
            out.sync_all()
                .await
                .map_err(|e| storage("writing the model", e))?;
            drop(out);
            let (src, lim) = (source.clone(), limits.clone());
            blocking(move || finish(tmp, &dir, got.size, got.sha256, &src, key, &lim)).await
        }
    }
}

fn prepare_file(
    source: &ModelSource,
    path: &Path,
    models_dir: Option<&Path>,
    private_dir: &Path,
    limits: &Limits,
) -> Result<PreparedModel, ModelProblem> {
    let (root, resolved) = resolve_file(path, models_dir)?;
    // Resolved already: a symlink on the way now was swapped in since, and is refused.
    let mut original = open_source(&root, &resolved, "the model file")?;
    let meta = original
        .metadata()
        .map_err(|e| storage("reading the model file", e))?;
    if !meta.is_file() {
        return Err(ModelProblem::NotAFile);
    }
    if meta.len() > limits.max_file_size {
        return Err(ModelProblem::TooLarge {
            limit: limits.max_file_size,
        });
    }
    // However the source spells it: the file it resolves to, as it is now.
    let identity = format!("file:{}\n{}", resolved.display(), identity_of(&meta));
    let key = hex(&Sha256::digest(identity));
    if let Some(model) = try_reuse(source, private_dir, &key, limits) {
        return Ok(model);
    }
    let mut tmp = temp_file(private_dir)?;
    let (size, sha256) = copy_hashing(&mut original, tmp.as_file_mut(), limits.max_file_size)?;
    tmp.as_file()
        .sync_all()
        .map_err(|e| storage("writing the model", e))?;
    finish(tmp, private_dir, size, sha256, source, key, limits)
}

/// Checks the fetched temp file (checksum, then GGUF) and only then makes it the model.
fn finish(
    tmp: NamedTempFile,
    private_dir: &Path,
    size: u64,
    sha256: [u8; 32],
    source: &ModelSource,
    source_key: String,
    limits: &Limits,
) -> Result<PreparedModel, ModelProblem> {
    let sha256 = hex(&sha256);
    if let Some(expected) = source.sha256()
        && expected != sha256
    {
        return Err(ModelProblem::ChecksumMismatch {
            expected: expected.to_owned(),
            actual: sha256,
        });
    }
    let summary = gguf::validate(
        tmp.reopen().map_err(|e| storage("reading the model", e))?,
        limits,
    )?;
    // No manifest may describe a model it doesn't match, even for a moment.
    match std::fs::remove_file(private_dir.join(MANIFEST_FILE)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(storage("replacing the manifest", e));
        }
        _ => {}
    }
    let path = private_dir.join(MODEL_FILE);
    tmp.persist(&path)
        .map_err(|e| storage("storing the model", e.error))?;
    let manifest = Manifest {
        source: source.to_string(),
        source_key,
        size,
        sha256: sha256.clone(),
        fetched_at: now_rfc3339()?,
    };
    write_manifest(private_dir, &manifest)?;
    Ok(PreparedModel {
        path,
        sha256,
        size,
        summary,
        reused: false,
    })
}

/// The model an earlier prepare left, if it is this source's, whole and still valid.
fn try_reuse(
    source: &ModelSource,
    private_dir: &Path,
    source_key: &str,
    limits: &Limits,
) -> Option<PreparedModel> {
    let manifest = read_manifest(private_dir)?;
    if manifest.source_key != source_key
        || source
            .sha256()
            .is_some_and(|expected| expected != manifest.sha256)
    {
        return None;
    }
    let path = private_dir.join(MODEL_FILE);
    let file = open_no_follow(&path).ok()?;
    if file.metadata().ok()?.len() != manifest.size {
        return None;
    }
    let summary = gguf::validate(file, limits).ok()?;
    Some(PreparedModel {
        path,
        sha256: manifest.sha256,
        size: manifest.size,
        summary,
        reused: true,
    })
}

pub(super) fn read_manifest(private_dir: &Path) -> Option<Manifest> {
    let mut bytes = Vec::new();
    open_no_follow(&private_dir.join(MANIFEST_FILE))
        .ok()?
        .take(MAX_MANIFEST)
        .read_to_end(&mut bytes)
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}

pub(super) fn write_manifest(private_dir: &Path, manifest: &Manifest) -> Result<(), ModelProblem> {
    let mut tmp = temp_file(private_dir)?;
    let json =
        serde_json::to_vec_pretty(manifest).map_err(|e| storage("writing the manifest", e))?;
    tmp.write_all(&json)
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(|e| storage("writing the manifest", e))?;
    tmp.persist(private_dir.join(MANIFEST_FILE))
        .map_err(|e| storage("writing the manifest", e.error))?;
    Ok(())
}

/// Copies at most `max` bytes, hashing them; refuses a source that grew past it.
pub(super) fn copy_hashing(
    from: &mut File,
    to: &mut File,
    max: u64,
) -> Result<(u64, [u8; 32]), ModelProblem> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(storage("reading the model file", e)),
        };
        size += n as u64;
        if size > max {
            return Err(ModelProblem::TooLarge { limit: max });
        }
        hasher.update(&buf[..n]);
        to.write_all(&buf[..n])
            .map_err(|e| storage("copying the model", e))?;
    }
    Ok((size, hasher.finalize().into()))
}

/// The private directory, owner-only, and without what an interrupted fetch left.
pub(super) fn make_private_dir(dir: &Path) -> Result<(), ModelProblem> {
    std::fs::create_dir_all(dir).map_err(|e| storage("creating the private directory", e))?;
    let meta =
        std::fs::symlink_metadata(dir).map_err(|e| storage("creating the private directory", e))?;
    if !meta.is_dir() {
        return Err(ModelProblem::Storage(
            "the private directory isn't a directory".into(),
        ));
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| storage("securing the private directory", e))?;
    let entries =
        std::fs::read_dir(dir).map_err(|e| storage("reading the private directory", e))?;
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with(PART_PREFIX) {
            // A temp file, or a temp copy of a model directory (`super::weights`).
            let _ = match entry.file_type() {
                Ok(t) if t.is_dir() => std::fs::remove_dir_all(entry.path()),
                _ => std::fs::remove_file(entry.path()),
            };
        }
    }
    Ok(())
}

fn temp_file(dir: &Path) -> Result<NamedTempFile, ModelProblem> {
    tempfile::Builder::new()
        .prefix(PART_PREFIX)
        .suffix(".part")
        .tempfile_in(dir)
        .map_err(|e| storage("creating a temp file", e))
}

pub(super) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ModelProblem> + Send + 'static,
) -> Result<T, ModelProblem> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| storage("the model task", e))?
}

pub(super) fn storage(what: &str, e: impl std::fmt::Display) -> ModelProblem {
    ModelProblem::Storage(format!("{what}: {e}"))
}

/// Now, for a manifest's `fetched_at`.
pub(super) fn now_rfc3339() -> Result<String, ModelProblem> {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .map_err(|e| storage("dating the manifest", e))
}
