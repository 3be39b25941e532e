//! Dequantization (`dequant.rs`) against a second, loop-structured decoder written the way
//! ggml's reference loops are; quantization round-trip error bounds (`quantize.rs`); and the
//! quantized GGUF variants of the vocab fixture.

use crate::common;

use baro_engine::model::dequant::{self, scale_min_k4, QK_K};
use baro_engine::model::quantize::quantize;
use baro_engine::model::{GgufFile, HfCheckpoint, TensorType};
use common::{canonical_f32, fixture, gguf_from, pick_type, Rng};
use half::f16;

const QUANT: [TensorType; 4] = [TensorType::Q8_0, TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K];

fn h(b: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// A second decoder in ggml's loop shape (pointer walks, `is`, `u1`/`u2` masks).
fn reference_decode(ty: TensorType, b: &[u8]) -> Vec<f32> {
    let mut y = Vec::new();
    match ty {
        TensorType::Q8_0 => y.extend(b[2..34].iter().map(|&q| h(b, 0) * q as i8 as f32)),
        TensorType::Q4_K | TensorType::Q5_K => {
            let (d, min) = (h(b, 0), h(b, 2));
            let scales = &b[4..16];
            let five = ty == TensorType::Q5_K;
            let qh = &b[16..48];
            let mut ql = if five { 48 } else { 16 };
            let (mut is, mut u1, mut u2) = (0, 1u8, 2u8);
            for _ in (0..QK_K).step_by(64) {
                let (sc, m) = scale_min_k4(is, scales);
                let (d1, m1) = (d * sc as f32, min * m as f32);
                let (sc, m) = scale_min_k4(is + 1, scales);
                let (d2, m2) = (d * sc as f32, min * m as f32);
                for l in 0..32 {
                    let hi = if five && qh[l] & u1 != 0 { 16 } else { 0 };
                    y.push(d1 * ((b[ql + l] & 0xF) + hi) as f32 - m1);
                }
                for l in 0..32 {
                    let hi = if five && qh[l] & u2 != 0 { 16 } else { 0 };
                    y.push(d2 * ((b[ql + l] >> 4) + hi) as f32 - m2);
                }
                ql += 32;
                is += 2;
                u1 <<= 2;
                u2 <<= 2;
            }
        }
        TensorType::Q6_K => {
            let d = h(b, 208);
            let mut out = [0f32; QK_K];
            let (mut ql, mut qh, mut sc, mut yo) = (0usize, 128usize, 192usize, 0usize);
            for _ in (0..QK_K).step_by(128) {
                for l in 0..32 {
                    let is = l / 16;
                    let q1 = ((b[ql + l] & 0xF) | ((b[qh + l] & 3) << 4)) as i8 - 32;
                    let q2 = ((b[ql + l + 32] & 0xF) | (((b[qh + l] >> 2) & 3) << 4)) as i8 - 32;
                    let q3 = ((b[ql + l] >> 4) | (((b[qh + l] >> 4) & 3) << 4)) as i8 - 32;
                    let q4 = ((b[ql + l + 32] >> 4) | (((b[qh + l] >> 6) & 3) << 4)) as i8 - 32;
                    let s = |k: usize| b[sc + is + k] as i8 as f32;
                    out[yo + l] = d * s(0) * q1 as f32;
                    out[yo + l + 32] = d * s(2) * q2 as f32;
                    out[yo + l + 64] = d * s(4) * q3 as f32;
                    out[yo + l + 96] = d * s(6) * q4 as f32;
                }
                yo += 128;
                ql += 64;
                qh += 32;
                sc += 8;
            }
            y.extend(out);
        }
        _ => unreachable!("only quantized types"),
    }
    y
}

/// A random block whose f16 scales are finite and modest.
fn random_block(ty: TensorType, rng: &mut Rng) -> Vec<u8> {
    let mut b: Vec<u8> = (0..ty.block_bytes()).map(|_| rng.next_u64() as u8).collect();
    let mut put = |at: usize, v: f32| b[at..at + 2].copy_from_slice(&f16::from_f32(v).to_le_bytes());
    match ty {
        TensorType::Q8_0 => put(0, rng.unit() * 0.1),
        TensorType::Q4_K | TensorType::Q5_K => {
            put(0, rng.unit() * 0.01);
            put(2, rng.unit() * 0.01);
        }
        TensorType::Q6_K => put(208, rng.unit() * 0.01),
        _ => {}
    }
    b
}

#[test]
fn dequant_matches_a_loop_structured_decoder_bit_for_bit() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for ty in QUANT {
        for _ in 0..300 {
            let b = random_block(ty, &mut rng);
            let got = dequant::to_f32(ty, &b);
            let want = reference_decode(ty, &b);
            assert_eq!(got.len(), ty.block_len());
            assert!(got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "{ty}");
        }
    }
}

#[test]
fn hand_built_blocks_decode_to_known_values() {
    // Q8_0: d = 0.5, q = e − 16.
    let mut b = f16::from_f32(0.5).to_le_bytes().to_vec();
    b.extend((0..32).map(|e| (e as i8 - 16) as u8));
    assert_eq!(dequant::to_f32(TensorType::Q8_0, &b), (0..32).map(|e| 0.5 * (e - 16) as f32).collect::<Vec<_>>());
    // Q4_K: d = 1, dmin = 0.5, sub-block j has scale j + 1 and min 2j + 1 (j ≥ 4 uses the
    // split high bits: scale 17..20 needs bit 4), every quant 3.
    let sc: Vec<u8> = (0..8).map(|j| if j < 4 { j + 1 } else { j + 13 }).collect();
    let m: Vec<u8> = (0..8).map(|j| 2 * j + 1).collect();
    let mut s = [0u8; 12];
    for j in 0..4 {
        s[j] = sc[j] | ((sc[j + 4] >> 4) << 6);
        s[j + 4] = m[j] | ((m[j + 4] >> 4) << 6);
        s[j + 8] = (sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4);
    }
    let mut b = Vec::new();
    b.extend(f16::from_f32(1.0).to_le_bytes());
    b.extend(f16::from_f32(0.5).to_le_bytes());
    b.extend(s);
    b.extend([0x33u8; 128]);
    let got = dequant::to_f32(TensorType::Q4_K, &b);
    for (e, &v) in got.iter().enumerate() {
        let j = e / 32;
        assert_eq!(v, sc[j] as f32 * 3.0 - 0.5 * m[j] as f32, "element {e}");
    }
    // Q6_K: d = 0.25, scale of sub-block s = s − 8, code 32 + 5 everywhere → q = 5.
    let mut b = vec![0x55u8; 128]; // low nibbles 5
    b.extend([0xAAu8; 64]); // high bits 2 in every 2-bit field → +32
    b.extend((0..16).map(|s| (s as i8 - 8) as u8));
    b.extend(f16::from_f32(0.25).to_le_bytes());
    let got = dequant::to_f32(TensorType::Q6_K, &b);
    for (e, &v) in got.iter().enumerate() {
        assert_eq!(v, 0.25 * (e / 16) as f32 * 5.0 - 0.25 * 8.0 * 5.0, "element {e}");
    }
}

/// Half the quantization step of each element, read back from the encoded block.
fn half_steps(ty: TensorType, b: &[u8]) -> Vec<f32> {
    match ty {
        TensorType::Q8_0 => vec![h(b, 0) / 2.0; 32],
        TensorType::Q4_K | TensorType::Q5_K => {
            (0..QK_K).map(|e| h(b, 0) * scale_min_k4(e / 32, &b[4..16]).0 as f32 / 2.0).collect()
        }
        TensorType::Q6_K => (0..QK_K).map(|e| h(b, 208) * (b[192 + e / 16] as i8) as f32 / 2.0).collect(),
        _ => unreachable!("only quantized types"),
    }
}

#[test]
fn quantize_round_trip_is_within_half_a_step() {
    let mut rng = Rng(12345);
    for ty in QUANT {
        for case in 0..4 {
            // Uniform, all-positive, heavy-tailed, and one with a constant sub-block.
            let n = 4 * QK_K;
            let x: Vec<f32> = (0..n)
                .map(|i| match case {
                    0 => rng.unit(),
                    1 => rng.unit().abs() * 3.0 + 0.5,
                    2 => rng.unit().powi(5) * 100.0,
                    _ => {
                        if i < 64 {
                            0.25
                        } else {
                            rng.unit()
                        }
                    }
                })
                .collect();
            let q = quantize(ty, &x).unwrap();
            assert_eq!(q.len(), n / ty.block_len() * ty.block_bytes());
            let y = dequant::to_f32(ty, &q);
            let mut max_rel = 0f32;
            for (bi, block) in q.chunks_exact(ty.block_bytes()).enumerate() {
                let steps = half_steps(ty, block);
                for (k, &s) in steps.iter().enumerate() {
                    let i = bi * ty.block_len() + k;
                    let err = (x[i] - y[i]).abs();
                    let slack = 4.0 * f32::EPSILON * (x[i].abs() + 2.0 * s * 64.0);
                    assert!(err <= s + slack, "{ty} case {case} element {i}: |{} − {}| > {s}", x[i], y[i]);
                    max_rel = max_rel.max(err / x.iter().fold(0f32, |a, v| a.max(v.abs())));
                }
            }
            assert!(max_rel > 0.0 || case == 3, "{ty} case {case}: quantization lost nothing");
        }
    }
    assert_eq!(quantize(TensorType::Q4_K, &[0.0; 100]), None);
}

#[test]
fn quantized_gguf_variants_load_to_the_rust_reference() {
    let ck = HfCheckpoint::open(&fixture("vocab")).unwrap();
    let canonical = canonical_f32(&ck);
    // Stated bounds on the relative RMS error of each tensor: a uniform quantizer's step/√12
    // with step = range/levels (range about 2.5σ for Q8_0/Q6_K's max|x| over 32/16 elements,
    // about 3.5σ for Q4_K/Q5_K's min..max over 32), plus room for the rounded-up scales.
    for (ty, rms_bound) in
        [(TensorType::Q8_0, 0.01), (TensorType::Q6_K, 0.03), (TensorType::Q5_K, 0.05), (TensorType::Q4_K, 0.1)]
    {
        let mut worst = 0f64;
        let bytes = gguf_from(&ck.config, &canonical, &|shape| pick_type(ty, shape));
        let g = GgufFile::from_vec(bytes).unwrap();
        let mut n_quantized = 0;
        for (spec, x) in &canonical {
            let t = g.tensor(&spec.name).unwrap();
            assert_eq!(t.ty, pick_type(ty, &spec.shape), "{}", spec.name);
            let y = t.to_f32();
            let want = dequant::to_f32(t.ty, &quantize(t.ty, x).unwrap());
            assert!(y.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "{}", spec.name);
            if t.ty == ty {
                n_quantized += 1;
                let num: f64 = x.iter().zip(&y).map(|(a, b)| ((a - b) as f64).powi(2)).sum();
                let den: f64 = x.iter().map(|a| (*a as f64).powi(2)).sum();
                let rel = (num / den).sqrt();
                assert!(rel <= rms_bound, "{ty} {}: relative rms error {rel}", spec.name);
                worst = worst.max(rel);
            }
        }
        println!("{ty}: worst relative rms error {worst:.4} (bound {rms_bound}) over {n_quantized} tensors");
        assert!(n_quantized >= 10, "{ty}: only {n_quantized} tensors quantized");
    }
}
