//! Host tests of the q8 precision mode's kernels (`kernels::q8act`): the activation
//! quantization and the Q8_0 × q8 matvec against their plain-Rust references byte for byte,
//! the verifier on both, and their offline sm_90 / gfx1100 compiles.

use baro_engine::kernels::q8act::*;
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


/// Random Q8_0 blocks (finite f16 scales, any i8 quants) for `n_mats · n · k / 32` blocks.
fn q8_0_bytes(n_blocks: usize, seed: u64) -> Vec<u8> {
    let mut rng = baro::reference::Rng::new(seed);
    let mut w = Vec::with_capacity(n_blocks * 34);
    for _ in 0..n_blocks {
        w.extend(half::f16::from_f32(rng.f32() * 0.05).to_le_bytes());
        w.extend((0..32).map(|_| (rng.f32() * 127.0) as i8 as u8));
    }
    w
}

fn matvec_q8(xq: &[u32], xd: &[f32], w: &[u8], ids: &[u32], k: usize, n: usize, x_stride: usize) -> Vec<f32> {
    let dev = Device::host().expect("host device");
    let kern = dev.compile(&matvec_q8_0_q8()).unwrap_or_else(|e| panic!("{e}"));
    let (qb, db, wb, ib) = (dev.upload(xq).unwrap(), dev.upload(xd).unwrap(), dev.upload_bytes(ScalarType::U8, w).unwrap(), dev.upload(ids).unwrap());
    let mut y = dev.alloc(ScalarType::F32, ids.len() * n).unwrap();
    dev.run(&kern, &mut [A::buf(&qb), A::buf(&db), A::words(&wb), A::buf(&ib), A::buf_mut(&mut y), A::from(k), A::from(n), A::from(x_stride), A::from(ids.len())]).unwrap_or_else(|e| panic!("{e}"));
    dev.read(&y).unwrap()
}

#[test]
fn matvec_q8_0_q8_equals_its_reference_byte_for_byte() {
    let mut rng = baro::reference::Rng::new(7);
    // (k, n, slots with per-slot inputs?): one block, an odd count of blocks (both
    // alignments of a block's quants), ragged outputs, expert slots with one input and with one
    // input per slot.
    for (k, n, n_mats, ids, per_slot) in [(32usize, 1usize, 1usize, vec![0u32], false), (96, 9, 1, vec![0], false), (1056, 17, 3, vec![2, 0], false), (2048, 24, 4, vec![3, 1, 2], true)] {
        let x_stride = if per_slot { k } else { 0 };
        let x = rng.vec_f32(if per_slot { ids.len() * k } else { k });
        let (xq, xd, _) = q8act_reference(&x);
        let w = q8_0_bytes(n_mats * n * k / 32, k as u64);
        let got = matvec_q8(&xq, &xd, &w, &ids, k, n, x_stride);
        let want = matvec_q8_0_q8_reference(&xq, &xd, &w, &ids, k, n, x_stride);
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&want), "k={k} n={n} ids={ids:?}");
        // And close to the f32 matvec on the unquantized x (q8 activations lose ~1 % per block).
        let exact = baro_engine::kernels::quant::matvec_quant_reference(baro_engine::model::TensorType::Q8_0, &x, &w, &ids, k, n, x_stride);
        let scale = exact.iter().fold(0.0f32, |m, v| m.max(v.abs())).max(1e-6);
        for (i, (a, b)) in got.iter().zip(&exact).enumerate() {
            assert!((a - b).abs() <= 0.05 * scale, "k={k} output {i}: q8 {a} vs f32 {b} (scale {scale})");
        }
    }
}

#[test]
fn matvec_q8_0_q8_verifies_with_its_rows_sibling() {
    let k = matvec_q8_0_q8();
    baro_dsl::verify::verify_kernel(&k).unwrap_or_else(|e| panic!("{e:?}"));
    let rows = matvec_q8_0_q8_rows();
    assert_eq!(rows.sibling.as_ref().map(|s| s.of.as_str()), Some("matvec_q8_0_q8"), "declared the m = 1 kernel's sibling");
    baro_dsl::verify::check_sibling(&rows, &k).unwrap_or_else(|e| panic!("{e:?}"));
}

#[test]
fn matvec_q8_0_q8_compiles_for_sm90_and_gfx1100() {
    use baro_dsl::cache::CompileCache;
    use baro_dsl::compile::compile_gpu;
    use baro_dsl::options::CompileOptions;
    let cache = CompileCache::new(None);
    for kern in [matvec_q8_0_q8(), matvec_q8_0_q8_rows()] {
        for target in ["sm_90", "gfx1100"] {
            let a = compile_gpu(&kern, &target.parse().unwrap(), &CompileOptions::default(), &cache).unwrap_or_else(|e| panic!("{} {target}: {e}", kern.name));
            assert!(!a.image.is_empty(), "{} {target}", kern.name);
            if target == "sm_90" {
                // The integer dots are the hardware's 4-way byte dot.
                let ptx = String::from_utf8_lossy(&a.image);
                assert!(ptx.matches("dp4a.s32.s32").count() >= 8, "{}: expected the 8 dp4a of a block in the PTX", kern.name);
            }
        }
    }
}
