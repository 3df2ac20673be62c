//! Where an endpoint's model comes from, parsed and checked before anything is fetched.

use std::fs::File;
use std::path::{Component, Path, PathBuf};

use super::{ModelProblem, parse_sha256};

/// An endpoint's model: where it is, and the SHA-256 it must have, if the endpoint says.
/// Its Debug and Display leave out a URL's query, where signed URLs keep their secrets.
#[derive(Clone, PartialEq, Eq)]
pub struct ModelSource {
    pub(super) location: Location,
    /// Lowercase hex.
    pub(super) sha256: Option<String>,
}

#[derive(Clone, PartialEq, Eq)]
pub(super) enum Location {
    /// As given: relative to the models directory, or absolute (and then inside it).
    File(PathBuf),
    Url(Url),
}

impl ModelSource {
    /// `location`: `https://…`, `http://…` (loopback only, when allowed), `file:PATH`,
    /// `file:///ABSOLUTE`, or a bare path; `sha256`: 64 hex digits.
    pub fn parse(location: &str, sha256: Option<&str>) -> Result<Self, ModelProblem> {
        let sha256 = sha256
            .map(|s| {
                parse_sha256(s).ok_or(ModelProblem::BadSource(
                    "the checksum isn't a SHA-256 in hex (64 digits)",
                ))
            })
            .transpose()?;
        let lower = location.get(..8).unwrap_or(location).to_ascii_lowercase();
        let location = if lower.starts_with("https://") || lower.starts_with("http://") {
            Location::Url(Url::parse(location)?)
        } else if let Some(rest) = location.strip_prefix("file://") {
            if !rest.starts_with('/') {
                return Err(ModelProblem::BadSource("a file: URL can't name a host"));
            }
            Location::File(file_path(rest)?)
        } else if let Some(rest) = location.strip_prefix("file:") {
            Location::File(file_path(rest)?)
        } else if location.contains("://") {
            return Err(ModelProblem::BadSource(
                "only https:// URLs and files in the models directory are supported",
            ));
        } else {
            Location::File(file_path(location)?)
        };
        Ok(ModelSource { location, sha256 })
    }

    /// The expected SHA-256, lowercase hex.
    pub fn sha256(&self) -> Option<&str> {
        self.sha256.as_deref()
    }

    /// What identifies the source for reuse: the whole location, query included.
    pub(super) fn identity(&self) -> String {
        match &self.location {
            Location::File(p) => format!("file:{}", p.display()),
            Location::Url(u) => u.full.clone(),
        }
    }
}

impl std::fmt::Display for ModelSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.location {
            Location::File(p) => write!(f, "file:{}", p.display()),
            Location::Url(u) => write!(f, "{}", u.redacted()),
        }
    }
}

impl std::fmt::Debug for ModelSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelSource")
            .field("location", &self.to_string())
            .field("sha256", &self.sha256)
            .finish()
    }
}

fn file_path(s: &str) -> Result<PathBuf, ModelProblem> {
    if s.is_empty() || s.contains('\0') {
        return Err(ModelProblem::BadSource(
            "the model file's name is empty or has a NUL",
        ));
    }
    Ok(PathBuf::from(s))
}

/// The model file a file source names, resolved: a path strictly inside the models directory,
/// symlinks resolved, with the directory's own resolved path. `..` is refused outright, even
/// where it would stay inside.
pub(super) fn resolve_file(
    path: &Path,
    models_dir: Option<&Path>,
) -> Result<(PathBuf, PathBuf), ModelProblem> {
    let dir = models_dir.ok_or(ModelProblem::NoModelsDir)?;
    let root = dir.canonicalize().map_err(|_| ModelProblem::NoModelsDir)?;
    if path.components().any(|c| c == Component::ParentDir) {
        return Err(ModelProblem::OutsideModelsDir);
    }
    let named = if path.is_absolute() {
        // Compared before resolving too: an absolute path elsewhere is refused without
        // saying whether it exists.
        if !path.starts_with(dir) && !path.starts_with(&root) {
            return Err(ModelProblem::OutsideModelsDir);
        }
        path.to_owned()
    } else {
        root.join(path)
    };
    let resolved = named.canonicalize().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => ModelProblem::NotFound,
        _ => ModelProblem::Storage(format!("can't resolve the model file: {e}")),
    })?;
    if resolved == root || !resolved.starts_with(&root) {
        return Err(ModelProblem::OutsideModelsDir);
    }
    Ok((root, resolved))
}

/// Opens a resolved model file so that nothing swapped in since it was resolved leads out of
/// the models directory: on Linux, openat2 beneath the directory with no symlink anywhere on
/// the way (ELOOP if one appeared); where that's missing (other systems, kernels before 5.6,
/// seccomp profiles that deny it), without following a symlink at the last component.
pub(super) fn open_resolved(root: &Path, resolved: &Path) -> std::io::Result<File> {
    #[cfg(target_os = "linux")]
    if let Ok(relative) = resolved.strip_prefix(root) {
        use rustix::fs::{Mode, OFlags, ResolveFlags};
        use rustix::io::Errno;
        let dir = rustix::fs::open(
            root,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        match rustix::fs::openat2(
            &dir,
            relative,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
        ) {
            Err(Errno::NOSYS | Errno::PERM) => {}
            opened => return Ok(File::from(opened?)),
        }
    }
    // openat2 is Linux's.
    #[cfg(not(target_os = "linux"))]
    let _ = root;
    super::open_no_follow(resolved)
}

/// [`open_resolved`], its failures as the model's problems: gone is not found, a symlink
/// swapped in since it was resolved leads outside.
pub(super) fn open_source(root: &Path, resolved: &Path, what: &str) -> Result<File, ModelProblem> {
    open_resolved(root, resolved).map_err(|e| {
        use rustix::io::Errno;
        match e.raw_os_error().map(Errno::from_raw_os_error) {
            Some(Errno::NOENT) => ModelProblem::NotFound,
            Some(Errno::LOOP | Errno::XDEV) => ModelProblem::OutsideModelsDir,
            _ => ModelProblem::Storage(format!("opening {what}: {e}")),
        }
    })
}

/// What identifies a file as it is now, for reuse: device and inode, size, modification time.
pub(super) fn identity_of(meta: &std::fs::Metadata) -> String {
    use std::os::unix::fs::MetadataExt;
    let (dev, ino, len) = (meta.dev(), meta.ino(), meta.len());
    format!("{dev}:{ino}\n{len}\n{}.{}", meta.mtime(), meta.mtime_nsec())
}

/// An http(s) URL, split for dialling.
#[derive(Clone, PartialEq, Eq)]
pub(super) struct Url {
    pub https: bool,
    /// Without IPv6 brackets.
    pub host: String,
    pub port: u16,
    pub path_and_query: String,
    pub full: String,
}

impl Url {
    pub fn parse(s: &str) -> Result<Url, ModelProblem> {
        let bad = ModelProblem::BadSource("not a valid http(s) URL");
        let uri: hyper::Uri = s.parse().map_err(|_| bad.clone())?;
        let https = match uri.scheme_str().map(str::to_ascii_lowercase).as_deref() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(bad),
        };
        let authority = uri.authority().ok_or(bad.clone())?;
        if authority.as_str().contains('@') {
            return Err(ModelProblem::BadSource(
                "credentials in a model URL aren't accepted",
            ));
        }
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        if host.is_empty() {
            return Err(bad);
        }
        Ok(Url {
            https,
            host: host.to_ascii_lowercase(),
            port: authority.port_u16().unwrap_or(if https { 443 } else { 80 }),
            path_and_query: uri
                .path_and_query()
                .map_or("/".to_owned(), |p| p.as_str().to_owned()),
            full: s.to_owned(),
        })
    }

    /// Where a redirect's Location points: an absolute URL, or a path on the same server.
    pub fn follow(&self, location: &str) -> Result<Url, ModelProblem> {
        if location.starts_with('/') && !location.starts_with("//") {
            let scheme = if self.https { "https" } else { "http" };
            return Url::parse(&format!("{scheme}://{}{location}", self.authority()));
        }
        Url::parse(location).map_err(|_| {
            ModelProblem::Download(format!(
                "{} redirected to an unusable location",
                self.authority()
            ))
        })
    }

    /// `host:port`, brackets around an IPv6 host: for the Host header and messages.
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// Whether the host is this machine: `localhost` or a loopback address.
    pub fn is_loopback(&self) -> bool {
        self.host == "localhost"
            || self
                .host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    }

    /// Scheme, host, port and path: no query, no fragment.
    pub fn redacted(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        let path = self.path_and_query.split('?').next().unwrap_or("/");
        format!("{scheme}://{}{path}", self.authority())
    }
}
