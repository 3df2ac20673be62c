//! The ggml tensor types a GGUF file may hold, with the block layout that gives a tensor's
//! size in bytes: `ne[0]` must be a multiple of the block size, and a row of `ne[0]` elements
//! takes `ne[0] / block_size * type_size` bytes.
//!
//! Values are ggml's own (`ggml_type` ids and the `static_assert`ed block sizes in
//! ggml-common.h); an id not listed here is refused, so a newer type needs a line here first.
//! Ids 4 and 5 (Q4_2, Q4_3) and 31..=33 and 36..=38 (removed in-repo repacking types) are gone
//! from ggml and never appear in a file llama.cpp loads.

/// One tensor type: its ggml id, name, elements per block and bytes per block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GgmlType {
    pub id: u32,
    pub name: &'static str,
    pub block_size: u64,
    pub type_size: u64,
}

const QK_K: u64 = 256;

const fn t(id: u32, name: &'static str, block_size: u64, type_size: u64) -> GgmlType {
    GgmlType {
        id,
        name,
        block_size,
        type_size,
    }
}

/// Every type ggml defines today.
pub const TYPES: &[GgmlType] = &[
    t(0, "F32", 1, 4),
    t(1, "F16", 1, 2),
    t(2, "Q4_0", 32, 2 + 16),
    t(3, "Q4_1", 32, 2 + 2 + 16),
    t(6, "Q5_0", 32, 2 + 4 + 16),
    t(7, "Q5_1", 32, 2 + 2 + 4 + 16),
    t(8, "Q8_0", 32, 2 + 32),
    // ggml's block_q8_1 holds two halves (d, s): 36 bytes. gguf-py's table still says 40 (an
    // older layout with two floats); llama.cpp's reader, which serves the file, uses 36.
    t(9, "Q8_1", 32, 2 + 2 + 32),
    t(10, "Q2_K", QK_K, 2 + 2 + QK_K / 16 + QK_K / 4),
    t(11, "Q3_K", QK_K, 2 + QK_K / 4 + QK_K / 8 + 12),
    t(12, "Q4_K", QK_K, 2 + 2 + QK_K / 2 + 12),
    t(13, "Q5_K", QK_K, 2 + 2 + QK_K / 2 + QK_K / 8 + 12),
    t(14, "Q6_K", QK_K, 2 + QK_K / 2 + QK_K / 4 + QK_K / 16),
    t(15, "Q8_K", QK_K, 4 + QK_K + QK_K / 8),
    t(16, "IQ2_XXS", QK_K, 2 + QK_K / 4),
    t(17, "IQ2_XS", QK_K, 2 + QK_K / 4 + QK_K / 32),
    t(18, "IQ3_XXS", QK_K, 2 + QK_K / 4 + QK_K / 8),
    t(19, "IQ1_S", QK_K, 2 + QK_K / 8 + QK_K / 16),
    t(20, "IQ4_NL", 32, 2 + 16),
    t(21, "IQ3_S", QK_K, 2 + QK_K / 4 + QK_K / 8 + QK_K / 32 + 4),
    t(22, "IQ2_S", QK_K, 2 + QK_K / 4 + QK_K / 16),
    t(23, "IQ4_XS", QK_K, 2 + 2 + QK_K / 2 + QK_K / 64),
    t(24, "I8", 1, 1),
    t(25, "I16", 1, 2),
    t(26, "I32", 1, 4),
    t(27, "I64", 1, 8),
    t(28, "F64", 1, 8),
    t(29, "IQ1_M", QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32),
    t(30, "BF16", 1, 2),
    t(34, "TQ1_0", QK_K, 2 + 4 * 13),
    t(35, "TQ2_0", QK_K, 2 + 64),
    t(39, "MXFP4", 32, 1 + 16),
    t(40, "NVFP4", 64, 4 + 32),
    t(41, "Q1_0", 128, 2 + 16),
];

/// The type with this id, if ggml has one.
pub fn lookup(id: u32) -> Option<GgmlType> {
    TYPES.iter().copied().find(|t| t.id == id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_sizes_are_ggmls() {
        let size = |name: &str| {
            let t = TYPES.iter().find(|t| t.name == name).unwrap();
            (t.block_size, t.type_size)
        };
        // ggml-common.h's static_asserts, spelled out.
        assert_eq!(size("F32"), (1, 4));
        assert_eq!(size("F16"), (1, 2));
        assert_eq!(size("BF16"), (1, 2));
        assert_eq!(size("Q4_0"), (32, 18));
        assert_eq!(size("Q4_1"), (32, 20));
        assert_eq!(size("Q5_0"), (32, 22));
        assert_eq!(size("Q5_1"), (32, 24));
        assert_eq!(size("Q8_0"), (32, 34));
        assert_eq!(size("Q8_1"), (32, 36));
        assert_eq!(size("Q2_K"), (256, 84));
        assert_eq!(size("Q3_K"), (256, 110));
        assert_eq!(size("Q4_K"), (256, 144));
        assert_eq!(size("Q5_K"), (256, 176));
        assert_eq!(size("Q6_K"), (256, 210));
        assert_eq!(size("Q8_K"), (256, 292));
        assert_eq!(size("IQ2_XXS"), (256, 66));
        assert_eq!(size("IQ2_XS"), (256, 74));
        assert_eq!(size("IQ3_XXS"), (256, 98));
        assert_eq!(size("IQ1_S"), (256, 50));
        assert_eq!(size("IQ4_NL"), (32, 18));
        assert_eq!(size("IQ3_S"), (256, 110));
        assert_eq!(size("IQ2_S"), (256, 82));
        assert_eq!(size("IQ4_XS"), (256, 136));
        assert_eq!(size("IQ1_M"), (256, 56));
        assert_eq!(size("TQ1_0"), (256, 54));
        assert_eq!(size("TQ2_0"), (256, 66));
        assert_eq!(size("MXFP4"), (32, 17));
        assert_eq!(size("NVFP4"), (64, 36));
        assert_eq!(size("Q1_0"), (128, 18));
    }

    #[test]
    fn ids_are_unique_and_gaps_unknown() {
        for (i, a) in TYPES.iter().enumerate() {
            assert!(
                TYPES[i + 1..]
                    .iter()
                    .all(|b| b.id != a.id && b.name != a.name)
            );
        }
        for gone in [4, 5, 31, 32, 33, 36, 37, 38, 42, u32::MAX] {
            assert_eq!(lookup(gone), None, "{gone}");
        }
        assert_eq!(lookup(8).map(|t| t.name), Some("Q8_0"));
    }
}
