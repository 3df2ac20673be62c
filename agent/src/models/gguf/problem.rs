//! Why a file isn't a GGUF model this agent serves.

/// The part of the file a problem was found in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    Header,
    Metadata,
    TensorInfo,
    TensorData,
}

impl std::fmt::Display for Section {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Section::Header => "header",
            Section::Metadata => "metadata",
            Section::TensorInfo => "tensor table",
            Section::TensorData => "tensor data",
        })
    }
}

/// Why a file is not a GGUF model this agent serves. Keys and names are shown escaped and
/// cut short: they come from the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GgufProblem {
    #[error("the file ends inside its {0}")]
    Truncated(Section),
    #[error("it doesn't start with the GGUF magic")]
    BadMagic,
    #[error("GGUF version {0} is not supported (2 and 3 are, little-endian)")]
    UnsupportedVersion(u32),
    #[error("it is {size} bytes, over the {limit}-byte limit")]
    FileTooLarge { size: u64, limit: u64 },
    #[error("it declares {count} tensors, over the limit of {limit}")]
    TooManyTensors { count: u64, limit: u64 },
    #[error("it declares {count} metadata entries, over the limit of {limit}")]
    TooManyMetadata { count: u64, limit: u64 },
    #[error("it has no tensors")]
    NoTensors,
    #[error("its metadata is over the {limit}-byte limit")]
    MetadataTooLarge { limit: u64 },
    #[error("a string in its {section} is {len} bytes long, over the limit of {limit}")]
    StringTooLong {
        section: Section,
        len: u64,
        limit: u64,
    },
    #[error("metadata {key} is an array of {len} items, over the limit of {limit}")]
    ArrayTooLong { key: String, len: u64, limit: u64 },
    #[error("metadata key {key} is empty or has control characters")]
    BadKey { key: String },
    #[error("metadata {key} appears twice")]
    DuplicateKey { key: String },
    #[error("metadata {key} has unknown value type {type_id}")]
    BadValueType { key: String, type_id: u32 },
    #[error("metadata {key} is an array of arrays, which llama.cpp doesn't read")]
    NestedArray { key: String },
    #[error("general.alignment must be a u32 power of two")]
    BadAlignment,
    #[error("general.architecture must be a short printable string")]
    BadArchitecture,
    #[error("tensor {index}'s name {name} {why}")]
    BadTensorName {
        index: u64,
        name: String,
        why: &'static str,
    },
    #[error("tensor {name} appears twice")]
    DuplicateTensor { name: String },
    #[error("tensor {name} has {n_dims} dimensions (1 to 4 are allowed)")]
    BadDimensionCount { name: String, n_dims: u32 },
    #[error("tensor {name} has a dimension of size zero")]
    ZeroDimension { name: String },
    #[error("tensor {name} has too many elements")]
    TooManyElements { name: String },
    #[error("tensor {name} has unknown ggml type {type_id}")]
    UnknownType { name: String, type_id: u32 },
    #[error("tensor {name}'s rows aren't whole {type_name} blocks")]
    PartialBlock {
        name: String,
        type_name: &'static str,
    },
    #[error("tensor {name}'s offset {offset} isn't a multiple of the alignment {alignment}")]
    MisalignedTensor {
        name: String,
        offset: u64,
        alignment: u64,
    },
    #[error("tensor {name}'s data runs past the end of the file")]
    TensorOutOfBounds { name: String },
    #[error("tensor {name} is at offset {offset}, not {expected} where the tensor before it ends")]
    TensorOutOfPlace {
        name: String,
        offset: u64,
        expected: u64,
    },
    #[error("it can't be read: {0}")]
    Io(String),
}

/// Bytes from the file, shown escaped and cut to 64.
pub(super) fn shown(bytes: &[u8]) -> String {
    const SHOWN: usize = 64;
    let cut = &bytes[..bytes.len().min(SHOWN)];
    let more = if bytes.len() > SHOWN { "…" } else { "" };
    format!("{:?}{more}", String::from_utf8_lossy(cut))
}

pub(super) fn io(e: std::io::Error) -> GgufProblem {
    GgufProblem::Io(e.to_string())
}
