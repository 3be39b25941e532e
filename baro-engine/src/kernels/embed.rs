//! Embedding gather: the row of token `ids[pos]` from an f32, bf16, Q8_0, Q4_K, Q5_K or Q6_K
//! table, widened to f32. No arithmetic except the quantized formats' dequantization, which is
//! `model::dequant`'s element for element (the same f32 operations in the same order, so a
//! gathered row equals `dequant::to_f32` of that row bit for bit); one workgroup, the row
//! spread over lanes. A token id past the table is the bounds check's error, never a read
//! elsewhere. The rows siblings (`_rows`, derived by `rows(..)` and proven at build time) run
//! one workgroup per row: row r gathers `ids[pos + r]` into `y[r · dim ..]`.
//!
//! The f16 scales are decoded inline from their two bytes (`kernels::f16_bits`); a 6-bit
//! Q4_K/Q5_K scale or min of sub-block j ≥ 4 reads byte `(j + 4) % 8` for `j − 4` so that no
//! index expression underflows in the branch not taken.

use baro::kernel;
use half::bf16;

use crate::model::dequant::Q8_0_BLOCK_BYTES;
use crate::model::TensorType;

/// `y[i] = table[ids[pos] · dim + i]`; table: (vocab, dim).
#[kernel(grid = [1], block = 256,
         rows(name = embed_f32_rows, axis = 0, row_stride(y = dim), row_step(pos = 1)))]
pub fn embed_f32(ids: &[u32], table: &[f32], y: &mut [f32], pos: usize, dim: usize) {
    let row = (ids[pos] as usize) * dim;
    for i in par(0..dim) {
        y[i] = table[row + i];
    }
}

/// As `embed_f32` from a bf16 table (widening is exact).
#[kernel(grid = [1], block = 256,
         rows(name = embed_bf16_rows, axis = 0, row_stride(y = dim), row_step(pos = 1)))]
pub fn embed_bf16(ids: &[u32], table: &[bf16], y: &mut [f32], pos: usize, dim: usize) {
    let row = (ids[pos] as usize) * dim;
    for i in par(0..dim) {
        y[i] = table[row + i].to_f32();
    }
}

/// As `embed_f32` from a Q8_0 table of raw GGUF bytes (dim a multiple of 32; rows of
/// dim/32 blocks of 34 bytes): `y[i] = d · (q as f32)` with d the block's f16 scale.
#[kernel(grid = [1], block = 256,
         rows(name = embed_q8_0_rows, axis = 0, row_stride(y = dim), row_step(pos = 1)))]
pub fn embed_q8_0(ids: &[u32], table: &[u8], y: &mut [f32], pos: usize, dim: usize) {
    let row = (ids[pos] as usize) * (dim / 32) * 34;
    for i in par(0..dim) {
        let at = row + (i / 32) * 34;
        let h = (table[at] as u32) | ((table[at + 1] as u32) << 8);
        let d = f32::from_bits(
            ((h & 0x8000) << 16)
                | (if (h & 0x7c00) == 0 {
                    (((h & 0x3ff) as f32) * 5.9604645e-8).to_bits()
                } else {
                    ((h & 0x7fff) << 13) + (if (h & 0x7c00) == 0x7c00 { 0x70000000 } else { 0x38000000 })
                }),
        );
        y[i] = d * ((table[at + 2 + i % 32] as i8) as f32);
    }
}

/// As `embed_f32` from a K-quant table of raw GGUF bytes (dim a multiple of 256; rows of
/// dim/256 super-blocks of `BYTES` bytes), one definition over the format (`FMT`):
/// - Q4_K, `{ f16 d; f16 dmin; u8 scales[12]; u8 qs[128] }` of 144 bytes:
///   `y[i] = d · sc · q − dmin · m` for element e = i % 256 of sub-block e / 32;
/// - Q5_K, `{ f16 d; f16 dmin; u8 scales[12]; u8 qh[32]; u8 qs[128] }` of 176 bytes: the quant
///   gains bit `j` of `qh[e % 32]` as its 5th bit.
#[kernel(grid = [1], block = 256,
         rows(name = ROWS, axis = 0, row_stride(y = dim), row_step(pos = 1)),
         instances(embed_q4_k(FMT = Q4K, BYTES = 144, ROWS = embed_q4_k_rows),
                   embed_q5_k(FMT = Q5K, BYTES = 176, ROWS = embed_q5_k_rows)))]
pub fn embed_kquant<const FMT: Format, const BYTES: usize, const ROWS: Name>(
    ids: &[u32],
    table: &[u8],
    y: &mut [f32],
    pos: usize,
    dim: usize,
) {
    let row = (ids[pos] as usize) * (dim / 256) * BYTES;
    for i in par(0..dim) {
        let at = row + (i / 256) * BYTES;
        let e = i % 256;
        let j = e / 32;
        let hd = (table[at] as u32) | ((table[at + 1] as u32) << 8);
        let d = f32::from_bits(
            ((hd & 0x8000) << 16)
                | (if (hd & 0x7c00) == 0 {
                    (((hd & 0x3ff) as f32) * 5.9604645e-8).to_bits()
                } else {
                    ((hd & 0x7fff) << 13) + (if (hd & 0x7c00) == 0x7c00 { 0x70000000 } else { 0x38000000 })
                }),
        );
        let hm = (table[at + 2] as u32) | ((table[at + 3] as u32) << 8);
        let dmin = f32::from_bits(
            ((hm & 0x8000) << 16)
                | (if (hm & 0x7c00) == 0 {
                    (((hm & 0x3ff) as f32) * 5.9604645e-8).to_bits()
                } else {
                    ((hm & 0x7fff) << 13) + (if (hm & 0x7c00) == 0x7c00 { 0x70000000 } else { 0x38000000 })
                }),
        );
        let sc = if j < 4 {
            table[at + 4 + j] & 63
        } else {
            (table[at + 8 + j] & 15) | ((table[at + 4 + (j + 4) % 8] >> 6) << 4)
        };
        let m = if j < 4 { table[at + 8 + j] & 63 } else { (table[at + 8 + j] >> 4) | ((table[at + 4 + j] >> 6) << 4) };
        #[when(FMT == Q4K)]
        let q = (table[at + 16 + (e / 64) * 32 + e % 32] >> ((j % 2 * 4) as u8)) & 15;
        #[when(FMT == Q4K)]
        y[i] = d * (sc as f32) * (q as f32) - dmin * (m as f32);
        #[when(FMT == Q5K)]
        let low = (table[at + 48 + (e / 64) * 32 + e % 32] >> ((j % 2 * 4) as u8)) & 15;
        #[when(FMT == Q5K)]
        let high = ((table[at + 16 + e % 32] >> (j as u8)) & 1) << 4;
        #[when(FMT == Q5K)]
        y[i] = d * (sc as f32) * ((low | high) as f32) - dmin * (m as f32);
    }
}

/// As `embed_f32` from a Q6_K table (dim a multiple of 256; super-blocks `{ u8 ql[128];
/// u8 qh[64]; i8 scales[16]; f16 d }` of 210 bytes): `y[i] = d · sc · (q − 32)` for element
/// e = i % 256 of sub-block e / 16.
#[kernel(grid = [1], block = 256,
         rows(name = embed_q6_k_rows, axis = 0, row_stride(y = dim), row_step(pos = 1)))]
pub fn embed_q6_k(ids: &[u32], table: &[u8], y: &mut [f32], pos: usize, dim: usize) {
    let row = (ids[pos] as usize) * (dim / 256) * 210;
    for i in par(0..dim) {
        let at = row + (i / 256) * 210;
        let e = i % 256;
        let half = e / 128;
        let group = e % 128 / 32;
        let l = e % 32;
        let hd = (table[at + 208] as u32) | ((table[at + 209] as u32) << 8);
        let d = f32::from_bits(
            ((hd & 0x8000) << 16)
                | (if (hd & 0x7c00) == 0 {
                    (((hd & 0x3ff) as f32) * 5.9604645e-8).to_bits()
                } else {
                    ((hd & 0x7fff) << 13) + (if (hd & 0x7c00) == 0x7c00 { 0x70000000 } else { 0x38000000 })
                }),
        );
        let low = (table[at + 64 * half + l + 32 * (group % 2)] >> ((group / 2 * 4) as u8)) & 15;
        let high = (table[at + 128 + 32 * half + l] >> ((2 * group) as u8)) & 3;
        let q = ((low | (high << 4)) as i32) - 32;
        y[i] = d * ((table[at + 192 + e / 16] as i8) as f32) * (q as f32);
    }
}

/// The embedding kernel's name for a table of element type `ty`, or None where no gather
/// kernel reads it (F16: widened to F32 at load).
pub fn kernel_name(ty: TensorType) -> Option<&'static str> {
    match ty {
        TensorType::F32 => Some("embed_f32"),
        TensorType::BF16 => Some("embed_bf16"),
        TensorType::Q8_0 => Some("embed_q8_0"),
        TensorType::Q4_K => Some("embed_q4_k"),
        TensorType::Q5_K => Some("embed_q5_k"),
        TensorType::Q6_K => Some("embed_q6_k"),
        TensorType::F16 => None,
    }
}

/// Row `tok` of a `ty` table of `dim` columns (dim a multiple of `ty`'s block length),
/// dequantized by `model::dequant`: the gather kernels' reference.
pub fn quant_row(ty: TensorType, table: &[u8], tok: usize, dim: usize) -> Vec<f32> {
    let row_bytes = dim / ty.block_len() * ty.block_bytes();
    crate::model::dequant::to_f32(ty, &table[tok * row_bytes..(tok + 1) * row_bytes])
}

/// Q8_0 row `tok` of a table of `dim` columns, dequantized by `model::dequant`.
pub fn q8_0_row(table: &[u8], tok: usize, dim: usize) -> Vec<f32> {
    let row_bytes = dim / 32 * Q8_0_BLOCK_BYTES;
    crate::model::dequant::to_f32(crate::model::TensorType::Q8_0, &table[tok * row_bytes..(tok + 1) * row_bytes])
}

/// y[i] = x[row · dim + i]: one row of a row-major buffer (an exact copy), e.g. the last
/// prompt row handed to the m = 1 output head.
#[kernel(grid = [1], block = 256)]
pub fn copy_row(x: &[f32], y: &mut [f32], row: usize, dim: usize) {
    for i in par(0..dim) {
        y[i] = x[row * dim + i];
    }
}

/// y[row · dim + i] = x[i]: one row written into a row-major buffer (an exact copy), the
/// inverse of `copy_row`, e.g. a sequence's attention output put back into its row of a
/// batched decode step.
#[kernel(grid = [1], block = 256)]
pub fn put_row(x: &[f32], y: &mut [f32], row: usize, dim: usize) {
    for i in par(0..dim) {
        y[row * dim + i] = x[i];
    }
}
