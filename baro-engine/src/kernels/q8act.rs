//! Activation quantization to 8-bit blocks (issue 14's groundwork for integer dots): per
//! block of 32 floats, the scale `d = max|x| / 127` (f32, the maximum taken in sequence), the
//! 32 values `q = x / d` rounded half to even as i8 packed four to a u32 (little-endian,
//! element 4w + t in byte t of word w), and the block sum of the q (i32, an order-free sum
//! the verifier proves cannot overflow: 32 · 127). Not registered in the engine's kernel
//! lists; nothing here launches it.
//!
//! Exactly, for every input (the same bits on every target):
//! - `d` is `max|x_j| / 127` rounded once. If the block holds a NaN, `d` is the canonical
//!   quiet NaN `0x7fc00000` (not a payload of the input: GPUs do not propagate payloads the
//!   way the host does); if it holds an infinity and no NaN, `d` is `+inf`.
//! - `q_j` is `x_j / d` rounded half to even, clamped to [−127, 127]. Where `d` is 0 (an
//!   all-zero block, or one whose `max|x|` is so small that `/ 127` underflows to 0) every
//!   `q` is 0; where `x_j / d` is NaN (a NaN block, `±inf / inf`) `q_j` is 0; a finite `x_j`
//!   over an infinite `d` gives ±0, so 0. `−0.0` gives 0.
//! - the block sum is the exact integer Σ q_j (|sum| ≤ 4064).
//!
//! One thread per block (a `par` loop over 256 blocks per workgroup): simple and exact, not
//! yet the coalesced layout a fast kernel wants.

use baro::{kernel, kernel_helper};

/// Elements per quantization block.
pub const Q8_BLOCK: usize = 32;

/// `x / d` rounded half to even and clamped to [−127, 127]; 0 where `d` is 0 or the
/// quotient is NaN (the float → int conversion takes NaN to 0 and saturates).
#[kernel_helper]
pub fn q8_of(x: f32, d: f32) -> i32 {
    let v = if d == 0.0 { 0.0 } else { x / d };
    let f = v.floor();
    let h = v - f;
    let r = if h > 0.5 { f + 1.0 } else { if h < 0.5 { f } else { if ((f as i32) & 1) == 0 { f } else { f + 1.0 } } };
    (r as i32).max(-127).min(127)
}

/// x: (nb, 32) f32 → q: (nb, 8) u32 (four i8 each), d: (nb) f32, s: (nb) i32.
#[kernel(grid = [(nb + 255) / 256], block = 256, uses = [q8_of], verify(nb = [1, 2, 3, 257]))]
pub fn q8act(x: &[f32], q: &mut [u32], d: &mut [f32], s: &mut [i32], nb: usize) {
    let base = group_id(0) * 256;
    for t in par(0..if nb - base < 256 { nb - base } else { 256 }) {
        let b = base + t;
        let amax = max!(j in 0..32, order = seq, x[b * 32 + j].abs());
        let scale = if amax != amax { f32::from_bits(0x7fc00000) } else { amax / 127.0 };
        d[b] = scale;
        for w in 0..8 {
            let e = b * 32 + w * 4;
            q[b * 8 + w] = ((q8_of(x[e], scale) as u32) & 255)
                | (((q8_of(x[e + 1], scale) as u32) & 255) << 8)
                | (((q8_of(x[e + 2], scale) as u32) & 255) << 16)
                | (((q8_of(x[e + 3], scale) as u32) & 255) << 24);
        }
        s[b] = sum!(j in 0..32, order = any, q8_of(x[b * 32 + j], scale));
    }
}

/// What `q8act` computes, written independently in plain Rust: (q words, d, block sums).
/// `x.len()` must be a multiple of 32.
pub fn q8act_reference(x: &[f32]) -> (Vec<u32>, Vec<f32>, Vec<i32>) {
    let (mut q, mut d, mut s) = (Vec::new(), Vec::new(), Vec::new());
    for block in x.chunks_exact(Q8_BLOCK) {
        let nan = block.iter().any(|v| v.is_nan());
        let amax = block.iter().fold(0.0f32, |m, v| if v.abs() > m { v.abs() } else { m });
        let scale = if nan { f32::from_bits(0x7fc0_0000) } else { amax / 127.0 };
        let qs: Vec<i32> = block
            .iter()
            .map(|&v| {
                let quotient = if scale == 0.0 { 0.0 } else { v / scale };
                if quotient.is_nan() {
                    0
                } else {
                    quotient.round_ties_even().clamp(-127.0, 127.0) as i32
                }
            })
            .collect();
        d.push(scale);
        s.push(qs.iter().sum());
        q.extend(qs.chunks_exact(4).map(|c| u32::from_le_bytes([c[0] as i8 as u8, c[1] as i8 as u8, c[2] as i8 as u8, c[3] as i8 as u8])));
    }
    (q, d, s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use baro_dsl::runtime::{Device, DeviceArg as A};
    use baro_dsl::ScalarType;

    fn run(x: &[f32]) -> (Vec<u32>, Vec<f32>, Vec<i32>) {
        let nb = x.len() / Q8_BLOCK;
        let dev = Device::host().expect("host device");
        let k = dev.compile(&q8act()).unwrap_or_else(|e| panic!("{e}"));
        let xb = dev.upload(x).unwrap();
        let mut q = dev.alloc(ScalarType::U32, nb * 8).unwrap();
        let mut d = dev.alloc(ScalarType::F32, nb).unwrap();
        let mut s = dev.alloc(ScalarType::I32, nb).unwrap();
        dev.run(&k, &mut [A::buf(&xb), A::buf_mut(&mut q), A::buf_mut(&mut d), A::buf_mut(&mut s), A::from(nb)]).unwrap_or_else(|e| panic!("{e}"));
        (dev.read(&q).unwrap(), dev.read(&d).unwrap(), dev.read(&s).unwrap())
    }

    /// The inputs: random blocks at many scales, and every edge case the module names.
    fn blocks() -> Vec<f32> {
        let mut x = Vec::new();
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for scale in [1.0f32, 1e-3, 3e38, 1e-38, 1e-44, 65504.0] {
            for _ in 0..3 {
                x.extend((0..Q8_BLOCK).map(|_| ((next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0) * scale));
            }
        }
        x.extend([0.0f32; Q8_BLOCK]); // all zero: d = 0, q = 0
        x.extend((0..Q8_BLOCK).map(|j| if j % 2 == 0 { -0.0 } else { 0.0 }));
        // max|x| = 127, so d = 1 exactly: the ties 2.5 → 2, 3.5 → 4, −2.5 → −2, 0.5 → 0.
        let mut ties = vec![0.0f32; Q8_BLOCK];
        ties[..8].copy_from_slice(&[127.0, -127.0, 2.5, 3.5, -2.5, 0.5, -0.5, 126.5]);
        x.extend(ties);
        let mut nan = vec![1.0f32; Q8_BLOCK];
        nan[5] = f32::from_bits(0x7fa0_0001); // a signalling payload: d is still the canonical NaN
        x.extend(nan);
        let mut inf = vec![2.0f32; Q8_BLOCK];
        inf[3] = f32::INFINITY;
        inf[9] = f32::NEG_INFINITY;
        x.extend(inf);
        let mut both = vec![-1.0f32; Q8_BLOCK];
        both[0] = f32::NEG_INFINITY;
        both[31] = f32::NAN;
        x.extend(both);
        // Subnormal max|x|: d is subnormal, and x / d may pass 127 before the clamp.
        x.extend((0..Q8_BLOCK).map(|j| f32::from_bits(0x0000_0200 + j as u32) * if j % 3 == 0 { -1.0 } else { 1.0 }));
        x
    }

    #[test]
    fn q8act_equals_its_reference_byte_for_byte() {
        let x = blocks();
        let nb = x.len() / Q8_BLOCK;
        let (q, d, s) = run(&x);
        let (wq, wd, ws) = q8act_reference(&x);
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&d), bits(&wd), "scales");
        assert_eq!(q, wq, "packed q");
        assert_eq!(s, ws, "block sums");
        // The named cases, by value.
        let block = |i: usize| (&q[i * 8..i * 8 + 8], d[i], s[i]);
        let zero = 18;
        for i in [zero, zero + 1] {
            assert_eq!(block(i), (&[0u32; 8][..], 0.0, 0), "all-zero block {i}");
        }
        let (tq, td, _) = block(zero + 2);
        assert_eq!(td, 1.0);
        assert_eq!(tq[0].to_le_bytes().map(|b| b as i8), [127, -127, 2, 4]);
        assert_eq!(tq[1].to_le_bytes().map(|b| b as i8), [-2, 0, 0, 126]);
        let (nq, nd, ns) = block(zero + 3);
        assert_eq!((nd.to_bits(), nq, ns), (0x7fc0_0000, &[0u32; 8][..], 0), "NaN block");
        let (iq, id, is) = block(zero + 4);
        assert_eq!((id, iq, is), (f32::INFINITY, &[0u32; 8][..], 0), "infinite block");
        assert_eq!(block(zero + 5).1.to_bits(), 0x7fc0_0000, "NaN and infinity: NaN wins");
        let (sq, _, _) = block(zero + 6);
        assert!(sq.iter().flat_map(|w| w.to_le_bytes()).all(|b| (b as i8) >= -127), "clamped at -127");
        assert_eq!(nb, zero + 7);
    }

    /// Offline code generation only (no GPU here): the kernel lowers for sm_90 and gfx1100.
    #[test]
    fn q8act_compiles_for_sm90_and_gfx1100() {
        use baro_dsl::cache::CompileCache;
        use baro_dsl::compile::compile_gpu;
        use baro_dsl::options::CompileOptions;
        let cache = CompileCache::new(None);
        for target in ["sm_90", "gfx1100"] {
            let a = compile_gpu(&q8act(), &target.parse().unwrap(), &CompileOptions::default(), &cache).unwrap_or_else(|e| panic!("{target}: {e}"));
            assert!(!a.image.is_empty(), "{target}");
            assert_eq!(a.block_dim, 256, "{target}");
        }
    }

    #[test]
    fn q8act_verifies_and_its_sum_is_order_free() {
        let k = q8act();
        baro_dsl::verify::verify_kernel(&k).unwrap_or_else(|e| panic!("{e:?}"));
        assert!(k.to_string().contains(", any, "), "the block sum is declared order-free");
    }
}
