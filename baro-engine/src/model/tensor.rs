//! Tensor element types (the GGUF/ggml types the engine reads) and borrowed tensor views.
//!
//! Shapes here are always outermost first (row-major, as torch and safetensors write them);
//! GGUF stores dimensions innermost first and `gguf.rs` reverses them at the boundary. A
//! quantized type packs its blocks along the innermost dimension. Nothing here copies weights
//! except the explicit `to_f32` conversion.

use std::fmt;

use crate::model::dequant;

/// The element types a weight can have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types)]
pub enum TensorType {
    F32,
    F16,
    BF16,
    Q8_0,
    Q4_K,
    Q5_K,
    Q6_K,
}

impl TensorType {
    pub const ALL: [TensorType; 7] = [
        TensorType::F32,
        TensorType::F16,
        TensorType::BF16,
        TensorType::Q8_0,
        TensorType::Q4_K,
        TensorType::Q5_K,
        TensorType::Q6_K,
    ];

    /// The `ggml_type` number GGUF stores.
    pub fn ggml_id(self) -> u32 {
        match self {
            TensorType::F32 => 0,
            TensorType::F16 => 1,
            TensorType::Q8_0 => 8,
            TensorType::Q4_K => 12,
            TensorType::Q5_K => 13,
            TensorType::Q6_K => 14,
            TensorType::BF16 => 30,
        }
    }

    pub fn from_ggml_id(id: u32) -> Option<TensorType> {
        TensorType::ALL.into_iter().find(|t| t.ggml_id() == id)
    }

    /// Elements per block (1 for plain floats).
    pub fn block_len(self) -> usize {
        match self {
            TensorType::F32 | TensorType::F16 | TensorType::BF16 => 1,
            TensorType::Q8_0 => dequant::Q8_0_BLOCK_LEN,
            TensorType::Q4_K | TensorType::Q5_K | TensorType::Q6_K => dequant::QK_K,
        }
    }

    /// Bytes per block.
    pub fn block_bytes(self) -> usize {
        match self {
            TensorType::F32 => 4,
            TensorType::F16 | TensorType::BF16 => 2,
            TensorType::Q8_0 => dequant::Q8_0_BLOCK_BYTES,
            TensorType::Q4_K => dequant::Q4_K_BLOCK_BYTES,
            TensorType::Q5_K => dequant::Q5_K_BLOCK_BYTES,
            TensorType::Q6_K => dequant::Q6_K_BLOCK_BYTES,
        }
    }

    pub fn is_quantized(self) -> bool {
        self.block_len() > 1
    }

    /// Bytes of a tensor of this type with `shape` (outermost first), or `None` when the
    /// innermost dimension is not a whole number of blocks or the size overflows.
    pub fn bytes_for(self, shape: &[usize]) -> Option<usize> {
        let inner = shape.last().copied().unwrap_or(1);
        if inner % self.block_len() != 0 {
            return None;
        }
        // The nonzero dimensions' product must fit: then so does every partial product, in any
        // order (a zero-element shape like [0, 2^40, 2^40] is refused, not sized 0).
        let nonzero = shape.iter().filter(|&&d| d != 0).try_fold(1usize, |acc, &d| acc.checked_mul(d))?;
        let n = if shape.contains(&0) { 0 } else { nonzero };
        (n / self.block_len()).checked_mul(self.block_bytes())
    }

    /// The ggml name of a type number, known to the engine or not (for error messages).
    pub fn ggml_name(id: u32) -> &'static str {
        const NAMES: [&str; 31] = [
            "F32", "F16", "Q4_0", "Q4_1", "Q4_2", "Q4_3", "Q5_0", "Q5_1", "Q8_0", "Q8_1", "Q2_K", "Q3_K", "Q4_K",
            "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS",
            "I8", "I16", "I32", "I64", "F64", "IQ1_M", "BF16",
        ];
        NAMES.get(id as usize).copied().unwrap_or("unknown")
    }
}

impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(TensorType::ggml_name(self.ggml_id()))
    }
}

/// A tensor whose bytes live elsewhere (a memory map, usually).
#[derive(Clone, Copy, Debug)]
pub struct TensorView<'a> {
    pub ty: TensorType,
    /// Outermost first.
    pub shape: &'a [usize],
    /// Exactly `ty.bytes_for(shape)` bytes, little-endian.
    pub bytes: &'a [u8],
}

impl TensorView<'_> {
    pub fn n_elements(&self) -> usize {
        self.shape.iter().product()
    }

    /// Every element as f32 (exact for F32/F16/BF16; the ggml dequantization for the
    /// quantized types). A full-precision copy: for tests and references, never for decode.
    pub fn to_f32(&self) -> Vec<f32> {
        dequant::to_f32(self.ty, self.bytes)
    }
}
