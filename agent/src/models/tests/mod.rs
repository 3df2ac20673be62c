//! Tests of the model files: a GGUF writer (the layout gguf-py writes), the validator's
//! refusals, and fetching from the models directory and over HTTP(S).

mod fetch;
mod gguf;
mod http;
mod listing;

use sha2::{Digest, Sha256};

pub(super) const F32: u32 = 0;
pub(super) const F16: u32 = 1;
pub(super) const Q8_0: u32 = 8;

/// Metadata value types.
pub(super) const U32: u32 = 4;
pub(super) const I32: u32 = 5;
pub(super) const F32V: u32 = 6;
pub(super) const STRING: u32 = 8;
pub(super) const ARRAY: u32 = 9;
pub(super) const U64: u32 = 10;

pub(super) fn string(s: &[u8]) -> Vec<u8> {
    let mut out = (s.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(s);
    out
}

/// A GGUF file to write, every part of it open to tampering.
#[derive(Debug, Clone)]
pub(super) struct Gguf {
    pub magic: [u8; 4],
    pub version: u32,
    /// Override the counts the header declares.
    pub n_tensors: Option<u64>,
    pub n_kv: Option<u64>,
    /// (key, value type, encoded value)
    pub kv: Vec<(Vec<u8>, u32, Vec<u8>)>,
    pub tensors: Vec<Tensor>,
    /// The padding the writer uses (set general.alignment to match).
    pub alignment: u64,
}

#[derive(Debug, Clone)]
pub(super) struct Tensor {
    pub name: Vec<u8>,
    pub dims: Vec<u64>,
    pub ggml_type: u32,
    /// Its data's size in bytes (what the writer writes).
    pub len: u64,
    /// Override the offset the writer computes.
    pub offset: Option<u64>,
}

impl Tensor {
    pub fn new(name: &str, dims: &[u64], ggml_type: u32) -> Tensor {
        let (block, size) = match ggml_type {
            F32 => (1, 4),
            F16 => (1, 2),
            Q8_0 => (32, 34),
            _ => (1, 1),
        };
        let len = dims[0] / block * size * dims[1..].iter().product::<u64>();
        Tensor {
            name: name.as_bytes().to_vec(),
            dims: dims.to_vec(),
            ggml_type,
            len,
            offset: None,
        }
    }
}

/// Where each part of a written file starts.
#[derive(Debug, Clone, Copy)]
pub(super) struct Layout {
    pub kv: usize,
    pub tensor_infos: usize,
    pub infos_end: usize,
    pub data: usize,
}

impl Gguf {
    /// A valid v3 llama-architecture file: the metadata gguf-py writes for make-model.py's
    /// model (strings, u32, f32, and arrays of strings, f32 and i32), F32, F16 and Q8_0
    /// tensors.
    pub fn valid() -> Gguf {
        let tokens = ["<unk>", "<s>", "</s>", "\u{2581}the", "a"];
        let mut token_list = array_head(STRING, tokens.len());
        for t in tokens {
            token_list.extend(string(t.as_bytes()));
        }
        let mut scores = array_head(F32V, tokens.len());
        let mut types = array_head(I32, tokens.len());
        for i in 0..tokens.len() {
            scores.extend((-(i as f32)).to_le_bytes());
            types.extend((i as i32).to_le_bytes());
        }
        Gguf {
            magic: *b"GGUF",
            version: 3,
            n_tensors: None,
            n_kv: None,
            kv: vec![
                (b"general.architecture".to_vec(), STRING, string(b"llama")),
                (b"general.name".to_vec(), STRING, string(b"tiny")),
                (
                    b"llama.context_length".to_vec(),
                    U32,
                    2048u32.to_le_bytes().to_vec(),
                ),
                (
                    b"llama.attention.layer_norm_rms_epsilon".to_vec(),
                    F32V,
                    1e-5f32.to_le_bytes().to_vec(),
                ),
                (b"tokenizer.ggml.tokens".to_vec(), ARRAY, token_list),
                (b"tokenizer.ggml.scores".to_vec(), ARRAY, scores),
                (b"tokenizer.ggml.token_type".to_vec(), ARRAY, types),
                (
                    b"tokenizer.chat_template".to_vec(),
                    STRING,
                    string(b"{{ messages }}"),
                ),
            ],
            tensors: vec![
                Tensor::new("token_embd.weight", &[8, 2], F32),
                Tensor::new("blk.0.attn_norm.weight", &[16], F16),
                Tensor::new("blk.0.ffn_up.weight", &[64, 2], Q8_0),
            ],
            alignment: 32,
        }
    }

    pub fn kv(mut self, key: &str, value_type: u32, value: Vec<u8>) -> Gguf {
        self.kv.push((key.as_bytes().to_vec(), value_type, value));
        self
    }

    pub fn bytes(&self) -> Vec<u8> {
        self.write().0
    }

    pub fn layout(&self) -> Layout {
        self.write().1
    }

    fn write(&self) -> (Vec<u8>, Layout) {
        let pad = |out: &mut Vec<u8>| {
            while !(out.len() as u64).is_multiple_of(self.alignment) {
                out.push(0);
            }
        };
        let mut out = self.magic.to_vec();
        out.extend(self.version.to_le_bytes());
        out.extend(
            self.n_tensors
                .unwrap_or(self.tensors.len() as u64)
                .to_le_bytes(),
        );
        out.extend(self.n_kv.unwrap_or(self.kv.len() as u64).to_le_bytes());
        let kv = out.len();
        for (key, value_type, value) in &self.kv {
            out.extend(string(key));
            out.extend(value_type.to_le_bytes());
            out.extend(value);
        }
        let tensor_infos = out.len();
        let mut offset = 0u64;
        for t in &self.tensors {
            out.extend(string(&t.name));
            out.extend((t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                out.extend(d.to_le_bytes());
            }
            out.extend(t.ggml_type.to_le_bytes());
            out.extend(t.offset.unwrap_or(offset).to_le_bytes());
            offset += t.len.div_ceil(self.alignment) * self.alignment;
        }
        let infos_end = out.len();
        pad(&mut out);
        let data = out.len();
        for (i, t) in self.tensors.iter().enumerate() {
            out.extend((0..t.len).map(|b| (b as u8).wrapping_mul(31).wrapping_add(i as u8)));
            pad(&mut out);
        }
        (
            out,
            Layout {
                kv,
                tensor_infos,
                infos_end,
                data,
            },
        )
    }
}

/// The head of an array value: element type and count.
pub(super) fn array_head(elem: u32, count: usize) -> Vec<u8> {
    let mut out = elem.to_le_bytes().to_vec();
    out.extend((count as u64).to_le_bytes());
    out
}

pub(super) fn sha256_hex(bytes: &[u8]) -> String {
    super::hex(&Sha256::digest(bytes))
}
