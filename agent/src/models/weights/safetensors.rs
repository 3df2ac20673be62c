//! One safetensors file's header, checked against the file it heads: an 8-byte little-endian
//! header length, a JSON object of tensors (dtype, shape, data offsets) and an optional
//! `__metadata__` map of strings, then the tensors' bytes. Every tensor's bytes are exactly its
//! dtype times its shape, and together they tile the data section with no gap, no overlap and
//! nothing left over, as the format requires. Only the header is read.

use std::io::Read;

use serde::de::{DeserializeSeed, Error as _, MapAccess, SeqAccess, Visitor};

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
    // Read into typed values as it is parsed, never into a tree of JSON values: a header may
    // be 100 MB, and one of tiny values would take many times that as a tree.
    let seed = HeaderSeed { max_tensors };
    let mut json = serde_json::Deserializer::from_slice(&header);
    let tensors = seed
        .deserialize(&mut json)
        .and_then(|t| json.end().map(|()| t))
        .map_err(|e| {
            if e.is_data() {
                bad(e.to_string())
            } else {
                bad("the header isn't a JSON object".into())
            }
        })?;
    let mut spans = Vec::with_capacity(tensors.len());
    for (name, tensor) in &tensors {
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
fn span<'a>(name: &'a str, tensor: &RawTensor) -> Result<(u64, u64, &'a str), WeightsProblem> {
    let bad = |why: &str| WeightsProblem::BadSafetensors(format!("tensor {} {why}", quoted(name)));
    let bits = dtype_bits(&tensor.dtype).ok_or_else(|| bad("has no dtype the format defines"))?;
    let mut elements = 1u64;
    for dim in &tensor.shape.0 {
        elements = elements
            .checked_mul(*dim)
            .ok_or_else(|| bad("has a shape too large"))?;
    }
    let bits_total = elements
        .checked_mul(bits)
        .ok_or_else(|| bad("has a shape too large"))?;
    if bits_total % 8 != 0 {
        return Err(bad("doesn't fill whole bytes"));
    }
    let [begin, end] = tensor.data_offsets;
    if end < begin || end - begin != bits_total / 8 {
        return Err(bad("has data offsets that don't match its dtype and shape"));
    }
    Ok((begin, end, name))
}

/// The most dimensions a tensor's shape may have (models use up to 5 or so).
const MAX_DIMS: usize = 16;

/// One tensor's entry, as the header declares it.
#[derive(Debug, serde::Deserialize)]
struct RawTensor {
    dtype: String,
    shape: Shape,
    data_offsets: [u64; 2],
}

/// A shape: at most [`MAX_DIMS`] whole numbers.
#[derive(Debug)]
struct Shape(Vec<u64>);

impl<'de> serde::Deserialize<'de> for Shape {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Shape, D::Error> {
        struct Dims;
        impl<'de> Visitor<'de> for Dims {
            type Value = Shape;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a shape of whole numbers")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Shape, A::Error> {
                let mut dims = Vec::new();
                loop {
                    let dim = seq
                        .next_element::<u64>()
                        .map_err(|_| A::Error::custom("a shape that isn't whole numbers"))?;
                    let Some(dim) = dim else {
                        return Ok(Shape(dims));
                    };
                    if dims.len() == MAX_DIMS {
                        return Err(A::Error::custom(format!(
                            "a shape of over {MAX_DIMS} dimensions"
                        )));
                    }
                    dims.push(dim);
                }
            }
        }
        d.deserialize_seq(Dims)
    }
}

/// The header's entries read one by one: the tensors (at most `max_tensors`), and the
/// `__metadata__` map checked to be strings and dropped.
struct HeaderSeed {
    max_tensors: u64,
}

impl<'de> DeserializeSeed<'de> for HeaderSeed {
    type Value = Vec<(String, RawTensor)>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for HeaderSeed {
    type Value = Vec<(String, RawTensor)>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object of tensors")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut tensors = Vec::new();
        while let Some(name) = map.next_key::<String>()? {
            if name == METADATA {
                map.next_value::<std::collections::BTreeMap<String, String>>()
                    .map_err(|_| A::Error::custom("its __metadata__ isn't a map of strings"))?;
                continue;
            }
            if tensors.len() as u64 >= self.max_tensors {
                return Err(A::Error::custom(format!(
                    "over {} tensors",
                    self.max_tensors
                )));
            }
            let tensor = map
                .next_value::<RawTensor>()
                .map_err(|e| A::Error::custom(format!("tensor {}: {e}", quoted(&name))))?;
            tensors.push((name, tensor));
        }
        Ok(tensors)
    }
}
