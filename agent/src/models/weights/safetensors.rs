//! One safetensors file's header, checked against the file it heads: an 8-byte little-endian
//! header length, a JSON object of tensors (dtype, shape, data offsets) and an optional
//! `__metadata__` map of strings, then the tensors' bytes. Every tensor's bytes are exactly its
//! dtype times its shape, and together they tile the data section with no gap, no overlap and
//! nothing left over, as the format requires. Only the header is read.

use std::io::Read;

use serde_json::{Map, Value};

use super::{WeightsProblem, quoted};

/// The format's own bound on a header.
pub const MAX_HEADER: u64 = 100_000_000;
/// The key of the optional string map beside the tensors.
const METADATA: &str = "__metadata__";

/// What a header declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SafetensorsSummary {
    pub tensors: u64,
    /// The data section: the file's size less the header.
    pub data_bytes: u64,
}

/// Bits per element of a dtype the format defines.
fn dtype_bits(dtype: &str) -> Option<u64> {
    Some(match dtype {
        "F4" => 4,
        "F6_E2M3" | "F6_E3M2" => 6,
        "BOOL" | "U8" | "I8" | "F8_E5M2" | "F8_E4M3" | "F8_E8M0" => 8,
        "I16" | "U16" | "F16" | "BF16" => 16,
        "I32" | "U32" | "F32" => 32,
        "I64" | "U64" | "F64" => 64,
        _ => return None,
    })
}

/// Reads and checks the header of a safetensors file of `file_size` bytes; at most
/// `max_tensors` tensors.
pub fn validate(
    mut file: impl Read,
    file_size: u64,
    max_tensors: u64,
) -> Result<SafetensorsSummary, WeightsProblem> {
    let bad = |why: String| WeightsProblem::BadSafetensors(why);
    let mut len = [0u8; 8];
    file.read_exact(&mut len)
        .map_err(|_| bad("shorter than its header's length".into()))?;
    let header_len = u64::from_le_bytes(len);
    if header_len > MAX_HEADER {
        return Err(bad(format!(
            "a header of {header_len} bytes, over the format's {MAX_HEADER}"
        )));
    }
    let data_bytes = file_size
        .checked_sub(8)
        .and_then(|rest| rest.checked_sub(header_len))
        .ok_or_else(|| {
            bad(format!(
                "a header of {header_len} bytes in a {file_size}-byte file"
            ))
        })?;
    let mut header = Vec::new();
    file.take(header_len)
        .read_to_end(&mut header)
        .map_err(|e| WeightsProblem::Storage(format!("reading a header: {e}")))?;
    if header.len() as u64 != header_len {
        return Err(bad("the header ends early".into()));
    }
    if header.first() != Some(&b'{') {
        return Err(bad("the header isn't a JSON object".into()));
    }
    let Ok(Value::Object(entries)) = serde_json::from_slice::<Value>(&header) else {
        return Err(bad("the header isn't a JSON object".into()));
    };
    let mut spans = Vec::with_capacity(entries.len());
    for (name, entry) in &entries {
        if name == METADATA {
            check_metadata(entry)?;
            continue;
        }
        if spans.len() as u64 >= max_tensors {
            return Err(bad(format!("over {max_tensors} tensors")));
        }
        let tensor = entry
            .as_object()
            .ok_or_else(|| bad(format!("tensor {} isn't an object", quoted(name))))?;
        spans.push(span(name, tensor)?);
    }
    spans.sort_unstable();
    let mut at = 0u64;
    for (begin, end, name) in &spans {
        if *begin != at {
            let why = if *begin < at {
                "overlaps another"
            } else {
                "leaves a gap before it"
            };
            return Err(bad(format!("tensor {} {why}", quoted(name))));
        }
        at = *end;
    }
    if at != data_bytes {
        return Err(bad(format!(
            "the tensors cover {at} bytes of a {data_bytes}-byte data section"
        )));
    }
    Ok(SafetensorsSummary {
        tensors: spans.len() as u64,
        data_bytes,
    })
}

/// A tensor's data offsets, once its dtype and shape account for exactly their length.
fn span<'a>(
    name: &'a str,
    tensor: &Map<String, Value>,
) -> Result<(u64, u64, &'a str), WeightsProblem> {
    let bad = |why: &str| WeightsProblem::BadSafetensors(format!("tensor {} {why}", quoted(name)));
    let bits = tensor
        .get("dtype")
        .and_then(Value::as_str)
        .and_then(dtype_bits)
        .ok_or_else(|| bad("has no dtype the format defines"))?;
    let shape = tensor
        .get("shape")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("has no shape"))?;
    let mut elements = 1u64;
    for dim in shape {
        let dim = dim
            .as_u64()
            .ok_or_else(|| bad("has a shape that isn't whole numbers"))?;
        elements = elements
            .checked_mul(dim)
            .ok_or_else(|| bad("has a shape too large"))?;
    }
    let bits_total = elements
        .checked_mul(bits)
        .ok_or_else(|| bad("has a shape too large"))?;
    if bits_total % 8 != 0 {
        return Err(bad("doesn't fill whole bytes"));
    }
    let offsets = tensor
        .get("data_offsets")
        .and_then(Value::as_array)
        .map(|o| o.iter().map(Value::as_u64).collect::<Option<Vec<u64>>>());
    let Some(Some([begin, end])) =
        offsets.map(|o| o.map(<[u64; 2]>::try_from).and_then(Result::ok))
    else {
        return Err(bad("has no data offsets [begin, end]"));
    };
    if end < begin || end - begin != bits_total / 8 {
        return Err(bad("has data offsets that don't match its dtype and shape"));
    }
    Ok((begin, end, name))
}

fn check_metadata(entry: &Value) -> Result<(), WeightsProblem> {
    let strings = entry
        .as_object()
        .is_some_and(|m| m.values().all(Value::is_string));
    if strings {
        Ok(())
    } else {
        Err(WeightsProblem::BadSafetensors(
            "its __metadata__ isn't a map of strings".into(),
        ))
    }
}
