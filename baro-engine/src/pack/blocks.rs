//! Random tensor data written straight into its encoded bytes. Quantized blocks are made
//! directly, valid by construction (random scales in range, random codes), not by quantizing
//! f32 data: a 22 GB pack is generated at disk speed. For a weight of standard deviation σ:
//!
//! | type | codes | scales |
//! |---|---|---|
//! | Q8_0 | q = (a − b) / 2 for random bytes a, b: triangular on −127..127, std 52.25 | d = σ·j / 52.25 |
//! | Q4_K | 4-bit uniform: mean 7.5, std 4.61 | sc = m ∈ 32..63, d = σ·j / (4.61 · 48.4), dmin = 7.5·d (zero mean) |
//! | Q5_K | 5-bit uniform: mean 15.5, std 9.23 | sc = m ∈ 32..63, d = σ·j / (9.23 · 48.4), dmin = 15.5·d |
//! | Q6_K | 6-bit uniform − 32: mean −0.5, rms 18.48 | sc ∈ 64..127, d = σ·j / (18.48 · 97.3) |
//!
//! where j ∈ [0.75, 1.25] varies per block and 48.4 and 97.3 are the rms of the sub-scales.
//! Every value's magnitude is then about 3σ at most (Q8_0: 127·d ≤ 3.04σ; Q4_K/Q5_K:
//! 63·d·max|q − mean| ≤ 2.74σ; Q6_K: 127·32·d ≤ 2.83σ; plus f16 rounding of d and dmin).
//! Plain float types draw each value from `ValueKind::draw`. A quantized type with a
//! non-weight kind (no mix asks for one) goes through `quantize.rs`.
//!
//! Bytes are a pure function of (type, kind, random stream); never reads the clock or the
//! thread count.

use half::f16;
use rand::RngCore;

use crate::model::dequant::{
    K_SCALE_BYTES, Q4_K_BLOCK_BYTES, Q5_K_BLOCK_BYTES, Q6_K_BLOCK_BYTES, Q8_0_BLOCK_BYTES, Q8_0_BLOCK_LEN, QK_K,
};
use crate::model::quantize;
use crate::model::tensor::TensorType;
use crate::pack::values::ValueKind;

const Q8_0_CODE_STD: f32 = 52.25;
const Q4_CODE_STD: f32 = 4.6098;
const Q5_CODE_STD: f32 = 9.2331;
const Q6_CODE_RMS: f32 = 18.480;
/// rms of a sub-scale uniform on 32..=63, and on 64..=127.
const K4_SCALE_RMS: f32 = 48.39;
const K6_SCALE_RMS: f32 = 97.27;

/// Fills `out` (a whole number of `ty` blocks) with random data of `kind`.
pub fn fill(ty: TensorType, kind: ValueKind, rng: &mut impl RngCore, out: &mut [u8]) {
    debug_assert_eq!(out.len() % ty.block_bytes(), 0);
    match (ty, kind) {
        (TensorType::F32, _) => {
            for v in out.chunks_exact_mut(4) {
                v.copy_from_slice(&kind.draw(rng.next_u64()).to_le_bytes());
            }
        }
        (TensorType::F16, _) => {
            for v in out.chunks_exact_mut(2) {
                v.copy_from_slice(&f16::from_f32(kind.draw(rng.next_u64())).to_le_bytes());
            }
        }
        (TensorType::BF16, _) => {
            for v in out.chunks_exact_mut(2) {
                v.copy_from_slice(&half::bf16::from_f32(kind.draw(rng.next_u64())).to_le_bytes());
            }
        }
        (TensorType::Q8_0, ValueKind::Weight { std }) => fill_q8_0(std, rng, out),
        (TensorType::Q4_K, ValueKind::Weight { std }) => fill_q45_k(std, false, rng, out),
        (TensorType::Q5_K, ValueKind::Weight { std }) => fill_q45_k(std, true, rng, out),
        (TensorType::Q6_K, ValueKind::Weight { std }) => fill_q6_k(std, rng, out),
        (_, _) => {
            let n = out.len() / ty.block_bytes() * ty.block_len();
            let values: Vec<f32> = (0..n).map(|_| kind.draw(rng.next_u64())).collect();
            // A whole number of blocks by construction, so `quantize` returns Some.
            if let Some(bytes) = quantize::quantize(ty, &values) {
                out.copy_from_slice(&bytes);
            }
        }
    }
}

/// The per-block scale jitter j ∈ [0.75, 1.25] from one random byte.
fn jitter(byte: u8) -> f32 {
    0.75 + 0.5 * f32::from(byte) / 255.0
}

fn fill_q8_0(std: f32, rng: &mut impl RngCore, out: &mut [u8]) {
    rng.fill_bytes(out);
    let mut second = [0u8; Q8_0_BLOCK_LEN];
    for block in out.chunks_exact_mut(Q8_0_BLOCK_BYTES) {
        rng.fill_bytes(&mut second);
        let d = f16::from_f32(std * jitter(block[0]) / Q8_0_CODE_STD);
        block[..2].copy_from_slice(&d.to_le_bytes());
        for (q, &b) in block[2..].iter_mut().zip(&second) {
            *q = ((i16::from(*q) - i16::from(b)) / 2) as i8 as u8;
        }
    }
}

/// Inverse of `dequant::scale_min_k4` for 6-bit scales and mins.
fn pack_scale_min_k4(sc: &[u8; 8], m: &[u8; 8]) -> [u8; K_SCALE_BYTES] {
    let mut s = [0u8; K_SCALE_BYTES];
    for j in 0..4 {
        s[j] = sc[j] | ((sc[j + 4] >> 4) << 6);
        s[j + 4] = m[j] | ((m[j + 4] >> 4) << 6);
        s[j + 8] = (sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4);
    }
    s
}

/// Q4_K / Q5_K: the header (d, dmin, scales) is rewritten from the random bytes it held; the
/// codes (qh, qs) stay random.
fn fill_q45_k(std: f32, five_bit: bool, rng: &mut impl RngCore, out: &mut [u8]) {
    rng.fill_bytes(out);
    let (block_bytes, code_std, code_mean) =
        if five_bit { (Q5_K_BLOCK_BYTES, Q5_CODE_STD, 15.5) } else { (Q4_K_BLOCK_BYTES, Q4_CODE_STD, 7.5) };
    for block in out.chunks_exact_mut(block_bytes) {
        let mut sc = [0u8; 8];
        for (s, &b) in sc.iter_mut().zip(&block[4..12]) {
            *s = 32 + (b & 31);
        }
        let d = f16::from_f32(std * jitter(block[0]) / (code_std * K4_SCALE_RMS));
        let dmin = f16::from_f32(code_mean * d.to_f32());
        block[..2].copy_from_slice(&d.to_le_bytes());
        block[2..4].copy_from_slice(&dmin.to_le_bytes());
        // Equal scale and min per sub-block: the sub-block's mean is d·sc·mean − dmin·sc ≈ 0.
        block[4..4 + K_SCALE_BYTES].copy_from_slice(&pack_scale_min_k4(&sc, &sc));
    }
}

/// Q6_K `{ ql[128], qh[64], scales[16], d }`: codes random, scales and d rewritten.
fn fill_q6_k(std: f32, rng: &mut impl RngCore, out: &mut [u8]) {
    rng.fill_bytes(out);
    let scales_at = QK_K / 2 + QK_K / 4;
    for block in out.chunks_exact_mut(Q6_K_BLOCK_BYTES) {
        let j = jitter(block[Q6_K_BLOCK_BYTES - 2]);
        for s in &mut block[scales_at..scales_at + QK_K / 16] {
            *s = 64 + (*s & 63);
        }
        let d = f16::from_f32(std * j / (Q6_CODE_RMS * K6_SCALE_RMS));
        block[Q6_K_BLOCK_BYTES - 2..].copy_from_slice(&d.to_le_bytes());
    }
}
