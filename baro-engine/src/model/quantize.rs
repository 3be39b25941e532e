//! Quantization to the ggml block formats, for writing test GGUF files. Deliberately simple,
//! not llama.cpp's error-minimising search:
//! - Q8_0: d = f16(max|x| / 127), q = round(x / d).
//! - Q4_K / Q5_K: per sub-block of 32 the range [min(0, min x), max x]; the f16 super-scales
//!   d and dmin are rounded up so that the 6-bit sub-scales, also rounded up, cover the range;
//!   then q = round((x + dmin·m) / (d·sc)). Every element is within half a sub-block step
//!   (d·sc / 2) of its dequantized value, up to f32 rounding.
//! - Q6_K: per sub-block of 16 a signed 8-bit scale covering max|x| with q in -31..31 (the
//!   code -32 is never produced); q = round(x / (d·sc)); the same half-step bound.
//!
//! Never used to decide a kernel's arithmetic; the engine only reads these formats.

use half::f16;

use crate::model::dequant::{
    K_SCALE_BYTES, Q4_K_BLOCK_BYTES, Q5_K_BLOCK_BYTES, Q6_K_BLOCK_BYTES, Q8_0_BLOCK_BYTES, Q8_0_BLOCK_LEN, QK_K,
};
use crate::model::tensor::TensorType;

/// Encodes `values` (a whole number of blocks) as `ty`. Returns `None` when the length is not
/// a multiple of the block length.
pub fn quantize(ty: TensorType, values: &[f32]) -> Option<Vec<u8>> {
    if values.len() % ty.block_len() != 0 {
        return None;
    }
    let mut out = Vec::with_capacity(values.len() / ty.block_len() * ty.block_bytes());
    for block in values.chunks_exact(ty.block_len()) {
        match ty {
            TensorType::F32 => out.extend_from_slice(&block[0].to_le_bytes()),
            TensorType::F16 => out.extend_from_slice(&f16::from_f32(block[0]).to_le_bytes()),
            TensorType::BF16 => out.extend_from_slice(&half::bf16::from_f32(block[0]).to_le_bytes()),
            TensorType::Q8_0 => quantize_q8_0(block, &mut out),
            TensorType::Q4_K => quantize_q45_k(block, false, &mut out),
            TensorType::Q5_K => quantize_q45_k(block, true, &mut out),
            TensorType::Q6_K => quantize_q6_k(block, &mut out),
        }
    }
    Some(out)
}

/// The smallest f16 that is at least `x` (x ≥ 0, finite).
fn f16_at_least(x: f32) -> f16 {
    let mut h = f16::from_f32(x);
    if h.to_f32() < x {
        h = f16::from_bits(h.to_bits() + 1);
    }
    h
}

fn quantize_q8_0(x: &[f32], out: &mut Vec<u8>) {
    let amax = x.iter().fold(0.0f32, |a, v| a.max(v.abs()));
    let d = f16::from_f32(amax / 127.0);
    let df = d.to_f32();
    out.extend_from_slice(&d.to_le_bytes());
    for &v in x {
        let q = if df == 0.0 { 0.0 } else { (v / df).round().clamp(-127.0, 127.0) };
        out.push(q as i8 as u8);
    }
    debug_assert_eq!(x.len(), Q8_0_BLOCK_LEN);
    debug_assert_eq!(out.len() % Q8_0_BLOCK_BYTES, 0);
}

/// Inverse of `dequant::scale_min_k4`.
fn pack_scale_min_k4(sc: &[u8; 8], m: &[u8; 8]) -> [u8; K_SCALE_BYTES] {
    let mut s = [0u8; K_SCALE_BYTES];
    for j in 0..4 {
        s[j] = sc[j] | ((sc[j + 4] >> 4) << 6);
        s[j + 4] = m[j] | ((m[j + 4] >> 4) << 6);
        s[j + 8] = (sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4);
    }
    s
}

fn quantize_q45_k(x: &[f32], five_bit: bool, out: &mut Vec<u8>) {
    let q_max: f32 = if five_bit { 31.0 } else { 15.0 };
    let mut neg_min = [0f32; 8];
    for (s, sub) in x.chunks_exact(32).enumerate() {
        neg_min[s] = -sub.iter().fold(0.0f32, |a, &v| a.min(v));
    }
    let dmin = f16_at_least(neg_min.iter().fold(0.0f32, |a, &v| a.max(v)) / 63.0);
    let dminf = dmin.to_f32();
    let mut m = [0u8; 8];
    let mut need = [0f32; 8];
    for (s, sub) in x.chunks_exact(32).enumerate() {
        m[s] = if dminf == 0.0 { 0 } else { (neg_min[s] / dminf).ceil().min(63.0) as u8 };
        let m1 = dminf * f32::from(m[s]);
        need[s] = (sub.iter().fold(-m1, |a, &v| a.max(v)) + m1) / q_max;
    }
    let d = f16_at_least(need.iter().fold(0.0f32, |a, &v| a.max(v)) / 63.0);
    let df = d.to_f32();
    let mut sc = [0u8; 8];
    let mut q = [0u8; QK_K];
    for (s, sub) in x.chunks_exact(32).enumerate() {
        let m1 = dminf * f32::from(m[s]);
        sc[s] = if df == 0.0 { 0 } else { (need[s] / df).ceil().min(63.0) as u8 };
        let d1 = df * f32::from(sc[s]);
        for (l, &v) in sub.iter().enumerate() {
            let code = if d1 == 0.0 { 0.0 } else { ((v + m1) / d1).round().clamp(0.0, q_max) };
            q[32 * s + l] = code as u8;
        }
    }
    out.extend_from_slice(&d.to_le_bytes());
    out.extend_from_slice(&dmin.to_le_bytes());
    out.extend_from_slice(&pack_scale_min_k4(&sc, &m));
    if five_bit {
        let mut qh = [0u8; QK_K / 8];
        for (e, &code) in q.iter().enumerate() {
            qh[e % 32] |= ((code >> 4) & 1) << (e / 32);
        }
        out.extend_from_slice(&qh);
    }
    let mut qs = [0u8; QK_K / 2];
    for (e, &code) in q.iter().enumerate() {
        let shift = if (e / 32) % 2 == 0 { 0 } else { 4 };
        qs[(e / 64) * 32 + e % 32] |= (code & 0xF) << shift;
    }
    out.extend_from_slice(&qs);
    debug_assert_eq!(out.len() % if five_bit { Q5_K_BLOCK_BYTES } else { Q4_K_BLOCK_BYTES }, 0);
}

fn quantize_q6_k(x: &[f32], out: &mut Vec<u8>) {
    let mut step = [0f32; 16];
    for (s, sub) in x.chunks_exact(16).enumerate() {
        step[s] = sub.iter().fold(0.0f32, |a, v| a.max(v.abs())) / 31.0;
    }
    let d = f16_at_least(step.iter().fold(0.0f32, |a, &v| a.max(v)) / 127.0);
    let df = d.to_f32();
    let mut scales = [0i8; 16];
    let mut ql = [0u8; QK_K / 2];
    let mut qh = [0u8; QK_K / 4];
    for (s, sub) in x.chunks_exact(16).enumerate() {
        let amax = sub.iter().fold(0.0f32, |a, v| a.max(v.abs()));
        scales[s] = if df == 0.0 { 0 } else { (amax / (31.0 * df)).ceil().min(127.0) as i8 };
        let d1 = df * f32::from(scales[s]);
        for (l, &v) in sub.iter().enumerate() {
            let e = 16 * s + l;
            let code = if d1 == 0.0 { 0.0 } else { (v / d1).round().clamp(-32.0, 31.0) };
            let u = (code as i32 + 32) as u8;
            let (half, p) = (e / 128, e % 128);
            let (group, l) = (p / 32, p % 32);
            let shift = if group < 2 { 0 } else { 4 };
            ql[64 * half + l + 32 * (group % 2)] |= (u & 0xF) << shift;
            qh[32 * half + l] |= (u >> 4) << (2 * group);
        }
    }
    out.extend_from_slice(&ql);
    out.extend_from_slice(&qh);
    out.extend(scales.iter().map(|&s| s as u8));
    out.extend_from_slice(&d.to_le_bytes());
    debug_assert_eq!(out.len() % Q6_K_BLOCK_BYTES, 0);
}
