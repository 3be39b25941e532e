//! Embedding gather: the row of token `ids[pos]` from an f32, bf16 or Q8_0 table, widened to
//! f32. No arithmetic except Q8_0's `d · q` (the product `model::dequant` computes); one
//! workgroup, the row spread over lanes. A token id past the table is the bounds check's
//! error, never a read elsewhere.

use baro::kernel;
use half::bf16;

use crate::model::dequant::Q8_0_BLOCK_BYTES;

/// `y[i] = table[ids[pos] · dim + i]`; table: (vocab, dim).
#[kernel(grid = [1])]
pub fn embed_f32(ids: &[u32], table: &[f32], y: &mut [f32], pos: usize, dim: usize) {
    let row = (ids[pos] as usize) * dim;
    for i in par(0..dim) {
        y[i] = table[row + i];
    }
}

/// As `embed_f32` from a bf16 table (widening is exact).
#[kernel(grid = [1])]
pub fn embed_bf16(ids: &[u32], table: &[bf16], y: &mut [f32], pos: usize, dim: usize) {
    let row = (ids[pos] as usize) * dim;
    for i in par(0..dim) {
        y[i] = table[row + i].to_f32();
    }
}

/// As `embed_f32` from a Q8_0 table of raw GGUF bytes (dim a multiple of 32; rows of
/// dim/32 blocks of 34 bytes): `y[i] = d · (q as f32)` with d the block's f16 scale.
#[kernel(grid = [1])]
pub fn embed_q8_0(ids: &[u32], table: &[u8], y: &mut [f32], pos: usize, dim: usize) {
    let row = (ids[pos] as usize) * (dim / 32) * 34;
    for i in par(0..dim) {
        let at = row + (i / 32) * 34;
        let h = (table[at] as u32) | ((table[at + 1] as u32) << 8);
        let d = f32::from_bits(((h & 0x8000) << 16) | (if (h & 0x7c00) == 0 { (((h & 0x3ff) as f32) * 5.9604645e-8).to_bits() } else { ((h & 0x7fff) << 13) + (if (h & 0x7c00) == 0x7c00 { 0x70000000 } else { 0x38000000 }) }));
        y[i] = d * ((table[at + 2 + i % 32] as i8) as f32);
    }
}

/// Q8_0 row `tok` of a table of `dim` columns, dequantized by `model::dequant`.
pub fn q8_0_row(table: &[u8], tok: usize, dim: usize) -> Vec<f32> {
    let row_bytes = dim / 32 * Q8_0_BLOCK_BYTES;
    crate::model::dequant::to_f32(crate::model::TensorType::Q8_0, &table[tok * row_bytes..(tok + 1) * row_bytes])
}
