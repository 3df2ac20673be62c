//! Validates a GGUF model file before llama.cpp is given it, reading only its header,
//! metadata and tensor table through bounded reads: never the tensor data, never more than
//! one string at a time (tensor names, at most 63 bytes each, and metadata keys, within the
//! metadata limit, are kept to find duplicates).
//!
//! Layout (little-endian; versions 2 and 3, which differ only in that 3 may be big-endian,
//! which llama.cpp on our platforms can't load and which reads here as an unknown version):
//!
//! ```text
//! "GGUF"  u32 version  u64 n_tensors  u64 n_kv
//! n_kv × { string key, u32 value_type, value }        string = u64 length + bytes
//!                                                     array  = u32 elem_type + u64 count + elems
//! n_tensors × { string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset }
//! padding to general.alignment (u32, a power of two, default 32)
//! tensor data: each tensor at data_start + offset, in table order, each at the aligned end
//!              of the one before (what llama.cpp's reader requires)
//! ```
//!
//! Beyond the format, the checks mirror what llama.cpp's reader refuses (nested arrays, an
//! alignment that isn't a u32, names of 64 bytes or more, duplicates, a row that isn't whole
//! blocks), so a file refused there is refused here first, with a reason; and tensor names
//! may not look like paths.

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufReader, Seek};

mod problem;
mod reader;

pub use problem::{GgufProblem, Section};

use problem::{io, shown};
use reader::Reader;

use super::Limits;
use super::ggml_types;

pub const MAGIC: &[u8; 4] = b"GGUF";
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// ggml's GGML_MAX_NAME (64) counts the NUL.
pub const MAX_TENSOR_NAME: usize = 63;
pub const MAX_DIMS: u32 = 4;
/// Short: its value is read only to be shown.
const MAX_ARCHITECTURE: usize = 64;

/// GGUF metadata value types.
mod vt {
    pub const STRING: u32 = 8;
    pub const ARRAY: u32 = 9;
    pub const U32: u32 = 4;
    pub const MAX: u32 = 12;

    /// Bytes of a fixed-size value; None for strings and arrays.
    pub fn fixed_size(t: u32) -> Option<u64> {
        match t {
            0 | 1 | 7 => Some(1), // u8, i8, bool
            2 | 3 => Some(2),     // u16, i16
            4..=6 => Some(4),     // u32, i32, f32
            10..=12 => Some(8),   // u64, i64, f64
            _ => None,
        }
    }
}

/// What a valid file is, in short.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GgufSummary {
    pub version: u32,
    pub tensor_count: u64,
    pub metadata_count: u64,
    /// `general.architecture`, when the file says it.
    pub architecture: Option<String>,
    pub alignment: u64,
    /// Where the tensor data starts.
    pub data_offset: u64,
    pub file_size: u64,
}

/// Validates the GGUF file at `path` without following a symlink at its last component.
pub fn validate_path(path: &std::path::Path, limits: &Limits) -> Result<GgufSummary, GgufProblem> {
    let file = super::open_no_follow(path).map_err(|e| GgufProblem::Io(e.to_string()))?;
    validate(file, limits)
}

/// Validates an open GGUF file, reading from its start.
pub fn validate(mut file: File, limits: &Limits) -> Result<GgufSummary, GgufProblem> {
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(GgufProblem::Io("not a regular file".into()));
    }
    let len = meta.len();
    if len > limits.max_file_size {
        return Err(GgufProblem::FileTooLarge {
            size: len,
            limit: limits.max_file_size,
        });
    }
    file.rewind().map_err(io)?;
    let mut r = Reader {
        inner: BufReader::with_capacity(64 * 1024, file),
        pos: 0,
        len,
        section: Section::Header,
        metadata: (0, u64::MAX),
    };

    if &r.array::<4>()? != MAGIC {
        return Err(GgufProblem::BadMagic);
    }
    let version = r.u32()?;
    if !(2..=3).contains(&version) {
        return Err(GgufProblem::UnsupportedVersion(version));
    }
    let tensor_count = r.u64()?;
    let metadata_count = r.u64()?;
    if tensor_count > limits.max_tensors {
        return Err(GgufProblem::TooManyTensors {
            count: tensor_count,
            limit: limits.max_tensors,
        });
    }
    if metadata_count > limits.max_metadata_count {
        return Err(GgufProblem::TooManyMetadata {
            count: metadata_count,
            limit: limits.max_metadata_count,
        });
    }
    if tensor_count == 0 {
        return Err(GgufProblem::NoTensors);
    }

    r.section = Section::Metadata;
    r.metadata = (r.pos, limits.max_metadata_bytes);
    let meta = read_metadata(&mut r, metadata_count, limits)?;
    r.metadata = (0, u64::MAX);

    r.section = Section::TensorInfo;
    let tensors = read_tensor_infos(&mut r, tensor_count)?;

    let data_offset =
        align(r.pos, meta.alignment).ok_or(GgufProblem::Truncated(Section::TensorData))?;
    if data_offset > len {
        return Err(GgufProblem::Truncated(Section::TensorData));
    }
    check_layout(&tensors, data_offset, meta.alignment, len)?;

    Ok(GgufSummary {
        version,
        tensor_count,
        metadata_count,
        architecture: meta.architecture,
        alignment: meta.alignment,
        data_offset,
        file_size: len,
    })
}

struct Metadata {
    alignment: u64,
    architecture: Option<String>,
}

fn read_metadata(r: &mut Reader, count: u64, limits: &Limits) -> Result<Metadata, GgufProblem> {
    let mut keys = HashSet::new();
    let mut alignment = None;
    let mut architecture = None;
    for _ in 0..count {
        let key = r.string(limits.max_key_len)?;
        if key.is_empty() || key.iter().any(|&b| b < 0x20 || b == 0x7f) {
            return Err(GgufProblem::BadKey { key: shown(&key) });
        }
        if keys.contains(&key) {
            return Err(GgufProblem::DuplicateKey { key: shown(&key) });
        }
        let value_type = r.u32()?;
        match key.as_slice() {
            b"general.alignment" => {
                if value_type != vt::U32 {
                    return Err(GgufProblem::BadAlignment);
                }
                let a = r.u32()?;
                if !a.is_power_of_two() {
                    return Err(GgufProblem::BadAlignment);
                }
                alignment = Some(u64::from(a));
            }
            b"general.architecture" => {
                if value_type != vt::STRING {
                    return Err(GgufProblem::BadArchitecture);
                }
                let value = r.string(limits.max_string_len)?;
                match String::from_utf8(value) {
                    Ok(s)
                        if !s.is_empty()
                            && s.len() <= MAX_ARCHITECTURE
                            && !s.chars().any(char::is_control) =>
                    {
                        architecture = Some(s)
                    }
                    _ => return Err(GgufProblem::BadArchitecture),
                }
            }
            _ => skip_value(r, &key, value_type, limits)?,
        }
        keys.insert(key);
    }
    Ok(Metadata {
        alignment: alignment.unwrap_or(DEFAULT_ALIGNMENT),
        architecture,
    })
}

/// Skips one metadata value after checking its type and its size against the limits.
fn skip_value(
    r: &mut Reader,
    key: &[u8],
    value_type: u32,
    limits: &Limits,
) -> Result<(), GgufProblem> {
    let bad_type = |type_id| GgufProblem::BadValueType {
        key: shown(key),
        type_id,
    };
    match value_type {
        vt::STRING => r.skip_string(limits.max_string_len),
        vt::ARRAY => {
            let elem = r.u32()?;
            let count = r.u64()?;
            if elem == vt::ARRAY {
                return Err(GgufProblem::NestedArray { key: shown(key) });
            }
            if elem > vt::MAX {
                return Err(bad_type(elem));
            }
            if count > limits.max_array_len {
                return Err(GgufProblem::ArrayTooLong {
                    key: shown(key),
                    len: count,
                    limit: limits.max_array_len,
                });
            }
            match vt::fixed_size(elem) {
                Some(size) => r.skip(count.saturating_mul(size)),
                None => (0..count).try_for_each(|_| r.skip_string(limits.max_string_len)),
            }
        }
        t => r.skip(vt::fixed_size(t).ok_or_else(|| bad_type(t))?),
    }
}

/// One entry of the tensor table, as far as the layout check needs it.
struct TensorInfo {
    name: String,
    size: u64,
    offset: u64,
}

fn read_tensor_infos(r: &mut Reader, count: u64) -> Result<Vec<TensorInfo>, GgufProblem> {
    let mut names = HashSet::new();
    let mut tensors = Vec::with_capacity(count.min(4096) as usize);
    for index in 0..count {
        let name = tensor_name(index, r.string(MAX_TENSOR_NAME as u64)?)?;
        if !names.insert(name.clone()) {
            return Err(GgufProblem::DuplicateTensor {
                name: shown(name.as_bytes()),
            });
        }
        let shown_name = || shown(name.as_bytes());
        let n_dims = r.u32()?;
        if !(1..=MAX_DIMS).contains(&n_dims) {
            return Err(GgufProblem::BadDimensionCount {
                name: shown_name(),
                n_dims,
            });
        }
        let mut ne = [1u64; MAX_DIMS as usize];
        for d in ne.iter_mut().take(n_dims as usize) {
            *d = r.u64()?;
        }
        if ne.contains(&0) {
            return Err(GgufProblem::ZeroDimension { name: shown_name() });
        }
        // ggml counts elements in an i64.
        let too_many = || GgufProblem::TooManyElements { name: shown_name() };
        let elements = ne
            .iter()
            .try_fold(1u64, |n, &d| n.checked_mul(d))
            .ok_or_else(too_many)?;
        if elements > i64::MAX as u64 {
            return Err(too_many());
        }
        let type_id = r.u32()?;
        let ty = ggml_types::lookup(type_id).ok_or_else(|| GgufProblem::UnknownType {
            name: shown_name(),
            type_id,
        })?;
        if !ne[0].is_multiple_of(ty.block_size) {
            return Err(GgufProblem::PartialBlock {
                name: shown_name(),
                type_name: ty.name,
            });
        }
        let size = (ne[0] / ty.block_size)
            .checked_mul(ty.type_size)
            .and_then(|row| ne[1..].iter().try_fold(row, |n, &d| n.checked_mul(d)))
            .ok_or_else(too_many)?;
        let offset = r.u64()?;
        tensors.push(TensorInfo { name, size, offset });
    }
    Ok(tensors)
}

/// A tensor name that can't be taken for a path or cut short by a C string.
fn tensor_name(index: u64, raw: Vec<u8>) -> Result<String, GgufProblem> {
    let why = if raw.is_empty() {
        Some("is empty")
    } else if raw.contains(&0) {
        Some("contains a NUL byte")
    } else if raw.iter().any(|&b| b < 0x20 || b == 0x7f) {
        Some("contains control characters")
    } else if raw.iter().any(|&b| b == b'/' || b == b'\\') {
        Some("contains a path separator")
    } else if raw.windows(2).any(|w| w == b"..") {
        Some("contains '..'")
    } else {
        None
    };
    let bad = |why| GgufProblem::BadTensorName {
        index,
        name: shown(&raw),
        why,
    };
    if let Some(why) = why {
        return Err(bad(why));
    }
    String::from_utf8(raw.clone()).map_err(|_| bad("isn't UTF-8"))
}

/// Every tensor aligned, inside the file, and where the one before it ends (padded).
fn check_layout(
    tensors: &[TensorInfo],
    data_offset: u64,
    alignment: u64,
    len: u64,
) -> Result<(), GgufProblem> {
    let mut expected = 0u64;
    for t in tensors {
        let name = || shown(t.name.as_bytes());
        if !t.offset.is_multiple_of(alignment) {
            return Err(GgufProblem::MisalignedTensor {
                name: name(),
                offset: t.offset,
                alignment,
            });
        }
        let end = data_offset
            .checked_add(t.offset)
            .and_then(|start| start.checked_add(t.size));
        if end.is_none_or(|end| end > len) {
            return Err(GgufProblem::TensorOutOfBounds { name: name() });
        }
        if t.offset != expected {
            return Err(GgufProblem::TensorOutOfPlace {
                name: name(),
                offset: t.offset,
                expected,
            });
        }
        // Within the file, so no overflow short of the padding.
        expected = align(t.offset + t.size, alignment)
            .ok_or_else(|| GgufProblem::TensorOutOfBounds { name: name() })?;
    }
    Ok(())
}

/// `x` rounded up to a multiple of `alignment` (a power of two).
fn align(x: u64, alignment: u64) -> Option<u64> {
    Some(x.checked_add(alignment - 1)? & !(alignment - 1))
}
