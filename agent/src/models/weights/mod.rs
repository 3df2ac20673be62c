//! Model directories for vLLM, in the layout model hubs publish: `config.json`, a tokenizer,
//! and the weights as safetensors (one file, or shards with `model.safetensors.index.json`).
//! Checked before anything is served: only the files such a directory holds (JSON, safetensors,
//! tokenizer and text files; never a symlink, a subdirectory or anything else), no pickled
//! weights (`.bin`, `.pt`, `.pth`, `.pkl`, `.ckpt`: unpickling runs code), no code of its own
//! (`.py` files, or an `auto_map` in its configs: what `trust_remote_code` would run), every
//! safetensors header within its file ([`safetensors`]), an index naming only files present,
//! and size and count limits. vLLM is then run offline with remote code off
//! (`crate::drivers::docker::spec`). GGUF files stay llama.cpp's (`super::gguf`).

mod copy;
pub mod safetensors;
#[cfg(test)]
mod tests;

use std::io::Read;
use std::path::Path;

use serde_json::Value;

pub use copy::{PreparedWeights, prepare_dir};

/// The model directory's name in the endpoint's private directory.
pub const MODEL_DIR: &str = "model";
const CONFIG: &str = "config.json";
const INDEX: &str = "model.safetensors.index.json";
/// The tokenizer's files, of which a model has at least one.
const TOKENIZERS: [&str; 2] = ["tokenizer.json", "tokenizer.model"];
/// Configs where `auto_map` would name code of the model's own.
const CODE_CONFIGS: [&str; 3] = [CONFIG, "tokenizer_config.json", "preprocessor_config.json"];
const PICKLED: [&str; 6] = ["bin", "pt", "pth", "pkl", "pickle", "ckpt"];
/// Text files a published model directory carries beside its weights.
const TEXT: [&str; 4] = ["txt", "md", "model", "jinja"];

/// Bounds on a model directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirLimits {
    pub max_files: u64,
    pub max_file_size: u64,
    pub max_total_size: u64,
    /// A JSON file (tokenizers run to tens of MB).
    pub max_json_size: u64,
    pub max_tensors: u64,
}

impl Default for DirLimits {
    fn default() -> Self {
        DirLimits {
            max_files: 512,
            max_file_size: 64 << 30,
            max_total_size: 1 << 40,
            max_json_size: 64 << 20,
            max_tensors: 1 << 20,
        }
    }
}

/// What a valid model directory holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightsSummary {
    pub files: u64,
    pub bytes: u64,
    pub safetensors_files: u64,
    pub tensors: u64,
    /// `config.json`'s `architectures[0]` or `model_type`, when it says.
    pub architecture: Option<String>,
}

/// Why a model directory isn't served. Names are quoted, escaped and cut short.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WeightsProblem {
    #[error("a vLLM model must be a directory in the machine's models directory")]
    NotADirectory,
    #[error("it holds pickled weights ({0}): only safetensors are served")]
    Pickled(String),
    #[error("it carries code of its own ({0}); remote code isn't run")]
    RemoteCode(String),
    #[error(
        "it holds {0}, which a model directory doesn't (JSON, safetensors, tokenizer and text files only)"
    )]
    Unexpected(String),
    #[error("it has no {0}")]
    Missing(&'static str),
    #[error("{0} isn't valid JSON")]
    BadJson(String),
    #[error("a safetensors file is invalid: {0}")]
    BadSafetensors(String),
    #[error("its index names {0}, which isn't in the directory")]
    IndexMissing(String),
    #[error("it is over the {limit}-byte limit ({what})")]
    TooLarge { what: &'static str, limit: u64 },
    #[error("it holds over {0} files")]
    TooManyFiles(u64),
    #[error("reading it failed: {0}")]
    Storage(String),
}

impl WeightsProblem {
    /// The timeline's code: refused for what the directory holds or its size, invalid for
    /// what its files say.
    pub fn status(&self) -> einsora_core::agent::StatusCode {
        use einsora_core::agent::StatusCode;
        match self {
            WeightsProblem::NotADirectory
            | WeightsProblem::Pickled(_)
            | WeightsProblem::RemoteCode(_)
            | WeightsProblem::Unexpected(_)
            | WeightsProblem::TooLarge { .. }
            | WeightsProblem::TooManyFiles(_) => StatusCode::ModelRefused,
            WeightsProblem::Missing(_)
            | WeightsProblem::BadJson(_)
            | WeightsProblem::BadSafetensors(_)
            | WeightsProblem::IndexMissing(_) => StatusCode::ModelInvalid,
            WeightsProblem::Storage(_) => StatusCode::ModelUnavailable,
        }
    }
}

/// A file name from a model directory, fit for a message: escaped and cut short.
pub(super) fn quoted(name: &str) -> String {
    let cut: String = name.chars().take(80).collect();
    format!("{cut:?}")
}

fn extension(name: &str) -> Option<String> {
    name.rsplit_once('.')
        .map(|(_, ext)| ext.to_ascii_lowercase())
}

/// Whether a directory entry called `name` may be copied at all (what it holds is checked
/// after the copy, by [`validate_dir`]).
pub(super) fn check_name(name: &str) -> Result<(), WeightsProblem> {
    let ext = extension(name);
    let ext = ext.as_deref().unwrap_or("");
    if PICKLED.contains(&ext) {
        return Err(WeightsProblem::Pickled(quoted(name)));
    }
    if ext == "py" {
        return Err(WeightsProblem::RemoteCode(quoted(name)));
    }
    let known = ["json", "safetensors"].contains(&ext)
        || TEXT.contains(&ext)
        || name.starts_with("LICENSE")
        || name == ".gitattributes";
    if known && !name.starts_with("..") {
        Ok(())
    } else {
        Err(WeightsProblem::Unexpected(quoted(name)))
    }
}

/// Checks a model directory the agent owns (the endpoint's private copy): every entry a
/// regular file of an expected name, the configs, the tokenizer, the index, and each
/// safetensors header.
pub fn validate_dir(dir: &Path, limits: &DirLimits) -> Result<WeightsSummary, WeightsProblem> {
    let storage = |e: std::io::Error| WeightsProblem::Storage(e.to_string());
    let mut names = Vec::new();
    let mut bytes = 0u64;
    for entry in std::fs::read_dir(dir).map_err(storage)? {
        let entry = entry.map_err(storage)?;
        let name = entry.file_name();
        let name = name
            .to_str()
            .ok_or_else(|| WeightsProblem::Unexpected(quoted(&name.to_string_lossy())))?
            .to_owned();
        check_name(&name)?;
        let meta = entry.metadata().map_err(storage)?; // of the entry itself: no symlink followed
        if !meta.is_file() {
            return Err(WeightsProblem::Unexpected(quoted(&name)));
        }
        if names.len() as u64 >= limits.max_files {
            return Err(WeightsProblem::TooManyFiles(limits.max_files));
        }
        bytes = bytes.saturating_add(meta.len());
        names.push((name, meta.len()));
    }
    if bytes > limits.max_total_size {
        let limit = limits.max_total_size;
        return Err(WeightsProblem::TooLarge {
            what: "all its files",
            limit,
        });
    }
    let has = |n: &str| names.iter().any(|(name, _)| name == n);
    let open = |name: &str| crate::models::open_no_follow(&dir.join(name)).map_err(storage);
    let json = |name: &str| read_json(open(name)?, name, limits.max_json_size);
    if !has(CONFIG) {
        return Err(WeightsProblem::Missing(CONFIG));
    }
    if !TOKENIZERS.iter().any(|t| has(t)) {
        return Err(WeightsProblem::Missing(
            "tokenizer (tokenizer.json or tokenizer.model)",
        ));
    }
    let mut architecture = None;
    for (name, _) in &names {
        if !name.ends_with(".json") {
            continue;
        }
        let value = json(name)?;
        if CODE_CONFIGS.contains(&name.as_str()) && value.get("auto_map").is_some() {
            return Err(WeightsProblem::RemoteCode(format!("auto_map in {name}")));
        }
        if name == CONFIG {
            let named = value
                .pointer("/architectures/0")
                .or_else(|| value.get("model_type"));
            architecture = named
                .and_then(Value::as_str)
                .filter(|s| !s.chars().any(char::is_control))
                .map(|s| s.chars().take(80).collect());
        }
        if name == INDEX {
            check_index(&value, &has)?;
        }
    }
    let (mut safetensors_files, mut tensors) = (0, 0);
    for (name, size) in names.iter().filter(|(n, _)| n.ends_with(".safetensors")) {
        if *size > limits.max_file_size {
            let limit = limits.max_file_size;
            return Err(WeightsProblem::TooLarge {
                what: "a safetensors file",
                limit,
            });
        }
        let summary =
            safetensors::validate(open(name)?, *size, limits.max_tensors).map_err(|p| match p {
                WeightsProblem::BadSafetensors(why) => {
                    WeightsProblem::BadSafetensors(format!("{}: {why}", quoted(name)))
                }
                other => other,
            })?;
        safetensors_files += 1;
        tensors += summary.tensors;
    }
    if safetensors_files == 0 {
        return Err(WeightsProblem::Missing("safetensors weights"));
    }
    Ok(WeightsSummary {
        files: names.len() as u64,
        bytes,
        safetensors_files,
        tensors,
        architecture,
    })
}

fn read_json(file: std::fs::File, name: &str, max: u64) -> Result<Value, WeightsProblem> {
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| WeightsProblem::Storage(e.to_string()))?;
    if bytes.len() as u64 > max {
        return Err(WeightsProblem::TooLarge {
            what: "a JSON file",
            limit: max,
        });
    }
    serde_json::from_slice(&bytes).map_err(|_| WeightsProblem::BadJson(quoted(name)))
}

/// The shard index: a `weight_map` of tensor names to shards, each a safetensors file here.
fn check_index(index: &Value, has: &dyn Fn(&str) -> bool) -> Result<(), WeightsProblem> {
    let map = index
        .get("weight_map")
        .and_then(Value::as_object)
        .ok_or_else(|| WeightsProblem::BadJson(quoted(INDEX)))?;
    for shard in map.values() {
        let shard = shard
            .as_str()
            .ok_or_else(|| WeightsProblem::BadJson(quoted(INDEX)))?;
        if !shard.ends_with(".safetensors") || !has(shard) {
            return Err(WeightsProblem::IndexMissing(quoted(shard)));
        }
    }
    Ok(())
}
