//! The model files a machine offers: every `*.gguf` regular file under its models directory
//! (a few levels deep; symlinks are not followed, and not listed) whose path is one an endpoint
//! can name ([`is_model_path`]) and which validates as GGUF within the [`Limits`]. Reported
//! in the agent's inventory, so the launch form can offer them. A file is validated again only
//! when its size or modification time changes; the walk is bounded in entries and depth, and
//! the list in length, so a huge directory never stalls the agent or floods its controller.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::SystemTime;

use einsora_core::machine::{ModelFile, is_model_path};

use super::{Limits, gguf, source::open_resolved};

/// Model files listed at most (the controller refuses more).
pub const MAX_LISTED: usize = 256;
/// Directory entries looked at in all, per scan.
const MAX_VISITED: usize = 10_000;
/// Directories below the models directory that are walked.
const MAX_DEPTH: usize = 4;

/// What was learnt of each file, by path: its size and modification time when it was
/// validated, and whether it was valid.
#[derive(Debug, Default)]
pub struct Listing {
    known: HashMap<String, Stamped>,
}

/// A file's size and modification time when it was looked at, and whether it was valid.
type Stamped = (u64, Option<SystemTime>, bool);

impl Listing {
    /// The valid model files under `dir`, sorted by path; empty if `dir` can't be read.
    pub fn scan(&mut self, dir: &Path, limits: &Limits) -> Vec<ModelFile> {
        let Ok(root) = dir.canonicalize() else {
            self.known.clear();
            return Vec::new();
        };
        let mut walk = Walk {
            root: &root,
            limits,
            before: &self.known,
            visited: 0,
            found: BTreeMap::new(),
            seen: HashMap::new(),
        };
        walk.dir(&root, 0);
        let Walk { found, seen, .. } = walk;
        self.known = seen;
        found
            .into_iter()
            .map(|(path, size_bytes)| ModelFile { path, size_bytes })
            .collect()
    }
}

/// One scan's walk of the models directory.
struct Walk<'a> {
    root: &'a Path,
    limits: &'a Limits,
    /// What the previous scan learnt.
    before: &'a HashMap<String, Stamped>,
    visited: usize,
    found: BTreeMap<String, u64>,
    seen: HashMap<String, Stamped>,
}

impl Walk<'_> {
    fn dir(&mut self, dir: &Path, depth: usize) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut entries: Vec<_> = entries.flatten().collect();
        entries.sort_by_key(std::fs::DirEntry::file_name);
        for entry in entries {
            self.visited += 1;
            if self.visited > MAX_VISITED || self.found.len() >= MAX_LISTED {
                return;
            }
            // Not followed: a symlink's type is "symlink", neither file nor directory.
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            if kind.is_dir() {
                if depth < MAX_DEPTH {
                    self.dir(&path, depth + 1);
                }
            } else if kind.is_file() {
                self.file(&entry, &path);
            }
        }
    }

    fn file(&mut self, entry: &std::fs::DirEntry, path: &Path) {
        let Some(name) = listed_name(self.root, path) else {
            return;
        };
        let Ok(meta) = entry.metadata() else {
            return;
        };
        let stamp = (meta.len(), meta.modified().ok());
        let valid = match self.before.get(&name) {
            Some(&(len, modified, valid)) if (len, modified) == stamp => valid,
            _ => open_resolved(self.root, path)
                .ok()
                .is_some_and(|file| gguf::validate(file, self.limits).is_ok()),
        };
        self.seen.insert(name.clone(), (stamp.0, stamp.1, valid));
        if valid {
            self.found.insert(name, stamp.0);
        }
    }
}

/// The path an endpoint would name the file by, if it can name it and it is a `.gguf` file.
fn listed_name(root: &Path, path: &Path) -> Option<String> {
    let relative = path.strip_prefix(root).ok()?.to_str()?;
    (relative.ends_with(".gguf") && is_model_path(relative)).then(|| relative.to_owned())
}
