//! Plain-Rust dequantization of the ggml block formats (Q8_0, Q4_K, Q5_K, Q6_K): the reference
//! the dot kernels are checked against. The block layouts and the order of every f32 operation
//! follow ggml's reference `dequantize_row_*` (ggml-quants.c); this code is written from that
//! description, not copied. Never used on the decode path (it makes a full-precision copy).
//!
//! Element `e` of a K-quant super-block of 256 belongs to sub-block `e / 32` (Q4_K, Q5_K; a
//! 6-bit scale and a 6-bit min each) or `e / 16` (Q6_K; an 8-bit signed scale each).

use half::f16;

use crate::model::tensor::TensorType;

/// Elements per Q8_0 block.
pub const Q8_0_BLOCK_LEN: usize = 32;
/// `{ f16 d; i8 qs[32] }`.
pub const Q8_0_BLOCK_BYTES: usize = 2 + 32;
/// Elements per K-quant super-block.
pub const QK_K: usize = 256;
/// The packed 6-bit scales and mins of Q4_K and Q5_K.
pub const K_SCALE_BYTES: usize = 12;
/// `{ f16 d; f16 dmin; u8 scales[12]; u8 qs[128] }`.
pub const Q4_K_BLOCK_BYTES: usize = 2 + 2 + K_SCALE_BYTES + QK_K / 2;
/// `{ f16 d; f16 dmin; u8 scales[12]; u8 qh[32]; u8 qs[128] }`.
pub const Q5_K_BLOCK_BYTES: usize = 2 + 2 + K_SCALE_BYTES + QK_K / 8 + QK_K / 2;
/// `{ u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d }`.
pub const Q6_K_BLOCK_BYTES: usize = QK_K / 2 + QK_K / 4 + QK_K / 16 + 2;

pub(crate) fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// The 6-bit scale and min of sub-block `j` (0..8) from the 12 packed bytes.
pub fn scale_min_k4(j: usize, s: &[u8]) -> (u8, u8) {
    if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        ((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4), (s[j + 4] >> 4) | ((s[j] >> 6) << 4))
    }
}

/// Dequantizes whole blocks of `ty`; `bytes.len()` must be a multiple of the block size (a
/// trailing partial block is ignored).
pub fn to_f32(ty: TensorType, bytes: &[u8]) -> Vec<f32> {
    let n_blocks = bytes.len() / ty.block_bytes();
    let mut out = Vec::with_capacity(n_blocks * ty.block_len());
    for block in bytes.chunks_exact(ty.block_bytes()) {
        match ty {
            TensorType::F32 => out.push(f32::from_le_bytes([block[0], block[1], block[2], block[3]])),
            TensorType::F16 => out.push(f16_at(block, 0)),
            TensorType::BF16 => out.push(half::bf16::from_le_bytes([block[0], block[1]]).to_f32()),
            TensorType::Q8_0 => dequant_q8_0(block, &mut out),
            TensorType::Q4_K => dequant_q4_k(block, &mut out),
            TensorType::Q5_K => dequant_q5_k(block, &mut out),
            TensorType::Q6_K => dequant_q6_k(block, &mut out),
        }
    }
    out
}

fn dequant_q8_0(b: &[u8], out: &mut Vec<f32>) {
    let d = f16_at(b, 0);
    out.extend(b[2..2 + Q8_0_BLOCK_LEN].iter().map(|&q| d * f32::from(q as i8)));
}

fn dequant_q4_k(b: &[u8], out: &mut Vec<f32>) {
    let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
    let scales = &b[4..4 + K_SCALE_BYTES];
    let qs = &b[4 + K_SCALE_BYTES..];
    for e in 0..QK_K {
        let sub = e / 32;
        let (sc, m) = scale_min_k4(sub, scales);
        let byte = qs[(e / 64) * 32 + e % 32];
        let q = if sub % 2 == 0 { byte & 0xF } else { byte >> 4 };
        out.push(d * f32::from(sc) * f32::from(q) - dmin * f32::from(m));
    }
}

fn dequant_q5_k(b: &[u8], out: &mut Vec<f32>) {
    let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
    let scales = &b[4..4 + K_SCALE_BYTES];
    let qh = &b[4 + K_SCALE_BYTES..4 + K_SCALE_BYTES + QK_K / 8];
    let qs = &b[4 + K_SCALE_BYTES + QK_K / 8..];
    for e in 0..QK_K {
        let sub = e / 32;
        let (sc, m) = scale_min_k4(sub, scales);
        let byte = qs[(e / 64) * 32 + e % 32];
        let low = if sub % 2 == 0 { byte & 0xF } else { byte >> 4 };
        let high = ((qh[e % 32] >> sub) & 1) << 4;
        out.push(d * f32::from(sc) * f32::from(low | high) - dmin * f32::from(m));
    }
}

fn dequant_q6_k(b: &[u8], out: &mut Vec<f32>) {
    let ql = &b[..QK_K / 2];
    let qh = &b[QK_K / 2..QK_K / 2 + QK_K / 4];
    let scales = &b[QK_K / 2 + QK_K / 4..QK_K / 2 + QK_K / 4 + QK_K / 16];
    let d = f16_at(b, Q6_K_BLOCK_BYTES - 2);
    for e in 0..QK_K {
        let (half, p) = (e / 128, e % 128);
        let (group, l) = (p / 32, p % 32);
        let ql_byte = ql[64 * half + l + 32 * (group % 2)];
        let low = if group < 2 { ql_byte & 0xF } else { ql_byte >> 4 };
        let high = (qh[32 * half + l] >> (2 * group)) & 3;
        let q = i32::from(low | (high << 4)) - 32;
        let sc = f32::from(scales[e / 16] as i8);
        out.push(d * sc * q as f32);
    }
}
