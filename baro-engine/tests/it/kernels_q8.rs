//! Host tests of the q8 precision mode's kernels (`kernels::q8act`, `kernels::kquant_q8`): the
//! activation quantization and the Q8_0, Q4_K, Q5_K and Q6_K × q8 matvecs against their
//! plain-Rust references byte for byte, the verifier and rows siblings, and their offline
//! sm_90 / gfx1100 compiles.

use baro_dsl::runtime::{Device, DeviceArg as A};
use baro_dsl::ScalarType;
use baro_engine::kernels::q8act::*;

fn run(x: &[f32]) -> (Vec<u32>, Vec<f32>, Vec<i32>) {
    let nb = x.len() / Q8_BLOCK;
    let dev = Device::host().expect("host device");
    let k = dev.compile(&q8act()).unwrap_or_else(|e| panic!("{e}"));
    let xb = dev.upload(x).unwrap();
    let mut q = dev.alloc(ScalarType::U32, nb * 8).unwrap();
    let mut d = dev.alloc(ScalarType::F32, nb).unwrap();
    let mut s = dev.alloc(ScalarType::I32, nb).unwrap();
    dev.run(&k, &mut [A::buf(&xb), A::buf_mut(&mut q), A::buf_mut(&mut d), A::buf_mut(&mut s), A::from(nb)])
        .unwrap_or_else(|e| panic!("{e}"));
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

/// Several workgroups of 32 blocks (the last one ragged), the edge blocks among random ones.
#[test]
fn q8act_equals_its_reference_over_several_workgroups() {
    let mut rng = baro::reference::Rng::new(8);
    let mut x = rng.vec_f32(40 * Q8_BLOCK);
    x.extend(blocks());
    x.extend(rng.vec_f32(6 * Q8_BLOCK));
    let nb = x.len() / Q8_BLOCK;
    assert!(nb > 64 && !nb.is_multiple_of(32), "{nb} blocks");
    let (q, d, s) = run(&x);
    let (wq, wd, ws) = q8act_reference(&x);
    assert_eq!(
        d.iter().map(|f| f.to_bits()).collect::<Vec<_>>(),
        wd.iter().map(|f| f.to_bits()).collect::<Vec<_>>(),
        "scales"
    );
    assert_eq!(q, wq, "packed q");
    assert_eq!(s, ws, "block sums");
}

/// Offline code generation only (no GPU here): the kernel lowers for sm_90 and gfx1100.
#[test]
fn q8act_compiles_for_sm90_and_gfx1100() {
    use baro_dsl::compile::compile_gpu;
    use baro_dsl::options::CompileOptions;
    let cache = crate::common::gpu_cache();
    for (kern, block) in [
        (q8act(), 256),
        (add_rmsnorm_q8(), 256),
        (add_rmsnorm_q8_rows(), 256),
        (moe_combine_add_rmsnorm_q8(), 256),
        (moe_combine_add_rmsnorm_q8_rows(), 256),
        (gated_rmsnorm_q8(), 128),
        (gated_rmsnorm_q8_rows(), 128),
        (swiglu_pairs_q8(), 256),
        (swiglu_pairs_q8_rows(), 256),
    ] {
        for target in ["sm_90", "gfx1100"] {
            let a = compile_gpu(&kern, &target.parse().unwrap(), &CompileOptions::default(), cache)
                .unwrap_or_else(|e| panic!("{} {target}: {e}", kern.name));
            assert!(!a.image.is_empty(), "{} {target}", kern.name);
            assert_eq!(a.block_dim, block, "{} {target}", kern.name);
        }
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
    let (qb, db, wb, ib) = (
        dev.upload(xq).unwrap(),
        dev.upload(xd).unwrap(),
        dev.upload_bytes(ScalarType::U8, w).unwrap(),
        dev.upload(ids).unwrap(),
    );
    let mut y = dev.alloc(ScalarType::F32, ids.len() * n).unwrap();
    dev.run(
        &kern,
        &mut [
            A::buf(&qb),
            A::buf(&db),
            A::words(&wb),
            A::buf(&ib),
            A::buf_mut(&mut y),
            A::from(k),
            A::from(n),
            A::from(x_stride),
            A::from(ids.len()),
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    dev.read(&y).unwrap()
}

#[test]
fn matvec_q8_0_q8_equals_its_reference_byte_for_byte() {
    let mut rng = baro::reference::Rng::new(7);
    // (k, n, slots with per-slot inputs?): one block, an odd count of blocks (both
    // alignments of a block's quants), ragged outputs, expert slots with one input and with one
    // input per slot.
    for (k, n, n_mats, ids, per_slot) in [
        (32usize, 1usize, 1usize, vec![0u32], false),
        (96, 9, 1, vec![0], false),
        (1056, 17, 3, vec![2, 0], false),
        (2048, 24, 4, vec![3, 1, 2], true),
    ] {
        let x_stride = if per_slot { k } else { 0 };
        let x = rng.vec_f32(if per_slot { ids.len() * k } else { k });
        let (xq, xd, _) = q8act_reference(&x);
        let w = q8_0_bytes(n_mats * n * k / 32, k as u64);
        let got = matvec_q8(&xq, &xd, &w, &ids, k, n, x_stride);
        let want = matvec_q8_0_q8_reference(&xq, &xd, &w, &ids, k, n, x_stride);
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&want), "k={k} n={n} ids={ids:?}");
        // And close to the f32 matvec on the unquantized x (q8 activations lose ~1 % per block).
        let exact = baro_engine::kernels::quant::matvec_quant_reference(
            baro_engine::model::TensorType::Q8_0,
            &x,
            &w,
            &ids,
            k,
            n,
            x_stride,
        );
        let scale = exact.iter().fold(0.0f32, |m, v| m.max(v.abs())).max(1e-6);
        for (i, (a, b)) in got.iter().zip(&exact).enumerate() {
            assert!((a - b).abs() <= 0.05 * scale, "k={k} output {i}: q8 {a} vs f32 {b} (scale {scale})");
        }
    }
}

/// The Q8_0 tile kernels over 8 rows of one matrix, `matvec_q8_0_q8_rows8` (the rows' blocks
/// staged in workgroup memory, dot4s) and `matvec_q8_0_q8_mma` (the integer matrix step),
/// against the m = 1 kernel row by row and against the derived serial rows kernel, byte for
/// byte: row counts below, at and across the tile of 8, one block, both alignments of a
/// block's quants, ragged outputs across workgroups of 16 and 32, a partial last chunk of 8
/// blocks (k = 1056), k at each kernel's limit, and matrix 2 of a stack (`ids[0]`); a k past
/// the limit is a bounds error, not a result.
#[test]
fn matvec_q8_0_q8_tiles_equal_the_m1_kernel_per_row() {
    let dev = Device::host().expect("host device");
    let serial = dev.compile(&matvec_q8_0_q8_rows()).unwrap_or_else(|e| panic!("{e}"));
    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
    for (tile, max_k) in [(matvec_q8_0_q8_rows8(), Q8_ROWS8_MAX_K), (matvec_q8_0_q8_mma(), Q8_MMA_MAX_K)] {
        let name = tile.name.clone();
        let k8 = dev.compile(&tile).unwrap_or_else(|e| panic!("{e}"));
        let mut rng = baro::reference::Rng::new(8);
        let mut compared = 0;
        for (k, n) in [(32usize, 3usize), (96, 9), (1056, 17), (max_k, 8)] {
            let w = q8_0_bytes(3 * n * k / 32, k as u64 + 1);
            let wb = dev.upload_bytes(ScalarType::U8, &w).unwrap();
            for rows in [1usize, 3, 8, 9, 17] {
                let x = rng.vec_f32(rows * k);
                let (xq, xd, _) = q8act_reference(&x);
                let ids = vec![2u32; rows];
                let (qb, db, ib) = (dev.upload(&xq).unwrap(), dev.upload(&xd).unwrap(), dev.upload(&ids).unwrap());
                let mut out = Vec::new();
                for kern in [&k8, &serial] {
                    let mut y = dev.alloc(ScalarType::F32, rows * n).unwrap();
                    dev.run(
                        kern,
                        &mut [
                            A::buf(&qb),
                            A::buf(&db),
                            A::words(&wb),
                            A::buf(&ib),
                            A::buf_mut(&mut y),
                            A::from(k),
                            A::from(n),
                            A::from(0usize),
                            A::from(1usize),
                            A::from(rows),
                        ],
                    )
                    .unwrap_or_else(|e| panic!("{e}"));
                    out.push(dev.read(&y).unwrap());
                }
                let want: Vec<f32> = (0..rows)
                    .flat_map(|r| matvec_q8(&xq[r * k / 4..][..k / 4], &xd[r * k / 32..][..k / 32], &w, &[2], k, n, 0))
                    .collect();
                assert_eq!(
                    bits(&out[0]),
                    bits(&want),
                    "{name} k={k} n={n} rows={rows}: against the m = 1 kernel per row"
                );
                assert_eq!(bits(&out[0]), bits(&out[1]), "{name} k={k} n={n} rows={rows}: against matvec_q8_0_q8_rows");
                compared += want.len();
            }
        }
        assert_eq!(compared, (3 + 9 + 17 + 8) * (1 + 3 + 8 + 9 + 17), "{name}");
        // Past the workgroup arrays: a bounds error naming the kernel.
        let k = max_k + 32;
        let (xq, xd, _) = q8act_reference(&vec![0.5f32; k]);
        let w = q8_0_bytes(k / 32, 3);
        let (qb, db, wb, ib) = (
            dev.upload(&xq).unwrap(),
            dev.upload(&xd).unwrap(),
            dev.upload_bytes(ScalarType::U8, &w).unwrap(),
            dev.upload(&[0u32]).unwrap(),
        );
        let mut y = dev.alloc(ScalarType::F32, 1).unwrap();
        let err = dev
            .run(
                &k8,
                &mut [
                    A::buf(&qb),
                    A::buf(&db),
                    A::words(&wb),
                    A::buf(&ib),
                    A::buf_mut(&mut y),
                    A::from(k),
                    A::from(1usize),
                    A::from(0usize),
                    A::from(1usize),
                    A::from(1usize),
                ],
            )
            .expect_err("k past the limit must fail");
        assert!(err.to_string().contains(&name), "the error names the kernel: {err}");
    }
}

/// `add_rmsnorm_q8` (and its derived rows sibling) against `add_rmsnorm` then `q8act`, byte for
/// byte: h and y, the q words, scales and block sums; lengths of one block, across the 256
/// elements of a workgroup and not a multiple of 256, values at many scales, several rows.
#[test]
fn add_rmsnorm_q8_is_add_rmsnorm_then_q8act() {
    let dev = Device::host().expect("host device");
    let compile = |k: baro_dsl::ir::Kernel| dev.compile(&k).unwrap_or_else(|e| panic!("{e}"));
    let (fused, fused_rows, norm, quant) = (
        compile(add_rmsnorm_q8()),
        compile(add_rmsnorm_q8_rows()),
        compile(baro_engine::kernels::norm::add_rmsnorm()),
        compile(q8act()),
    );
    let mut rng = baro::reference::Rng::new(9);
    let eps = 1e-6f32;
    for n in [32usize, 256, 288, 2048] {
        for rows in [1usize, 3] {
            let scale = if n == 288 { 1e3 } else { 1.0 };
            let (a, b, w) = (
                rng.vec_f32(rows * n).iter().map(|v| v * scale).collect::<Vec<_>>(),
                rng.vec_f32(rows * n),
                rng.vec_f32(n),
            );
            let (ab, bb, wb) = (dev.upload(&a).unwrap(), dev.upload(&b).unwrap(), dev.upload(&w).unwrap());
            let nb = rows * n / 32;
            let mut outs = Vec::new();
            for (kern, is_rows) in [(&fused, false), (&fused_rows, true)] {
                if !is_rows && rows > 1 {
                    continue;
                }
                let (mut h, mut y) =
                    (dev.alloc(ScalarType::F32, rows * n).unwrap(), dev.alloc(ScalarType::F32, rows * n).unwrap());
                let (mut q, mut d, mut s) = (
                    dev.alloc(ScalarType::U32, nb * 8).unwrap(),
                    dev.alloc(ScalarType::F32, nb).unwrap(),
                    dev.alloc(ScalarType::I32, nb).unwrap(),
                );
                let mut args = vec![
                    A::buf(&ab),
                    A::buf(&bb),
                    A::buf(&wb),
                    A::buf_mut(&mut h),
                    A::buf_mut(&mut y),
                    A::buf_mut(&mut q),
                    A::buf_mut(&mut d),
                    A::buf_mut(&mut s),
                    A::from(n),
                    A::from(eps),
                ];
                if is_rows {
                    args.push(A::from(rows));
                }
                dev.run(kern, &mut args).unwrap_or_else(|e| panic!("{e}"));
                let f = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
                outs.push((
                    kern,
                    f(dev.read(&h).unwrap()),
                    f(dev.read(&y).unwrap()),
                    dev.read::<u32>(&q).unwrap(),
                    f(dev.read(&d).unwrap()),
                    dev.read::<i32>(&s).unwrap(),
                ));
            }
            // The separate kernels, row by row.
            let (mut hw, mut yw) = (Vec::new(), Vec::new());
            for r in 0..rows {
                let (ar, br) = (dev.upload(&a[r * n..][..n]).unwrap(), dev.upload(&b[r * n..][..n]).unwrap());
                let (mut h, mut y) = (dev.alloc(ScalarType::F32, n).unwrap(), dev.alloc(ScalarType::F32, n).unwrap());
                dev.run(
                    &norm,
                    &mut [
                        A::buf(&ar),
                        A::buf(&br),
                        A::buf(&wb),
                        A::buf_mut(&mut h),
                        A::buf_mut(&mut y),
                        A::from(n),
                        A::from(eps),
                    ],
                )
                .unwrap_or_else(|e| panic!("{e}"));
                hw.extend(dev.read::<f32>(&h).unwrap());
                yw.extend(dev.read::<f32>(&y).unwrap());
            }
            let yb = dev.upload(&yw).unwrap();
            let (mut q, mut d, mut s) = (
                dev.alloc(ScalarType::U32, nb * 8).unwrap(),
                dev.alloc(ScalarType::F32, nb).unwrap(),
                dev.alloc(ScalarType::I32, nb).unwrap(),
            );
            dev.run(
                &quant,
                &mut [A::buf(&yb), A::buf_mut(&mut q), A::buf_mut(&mut d), A::buf_mut(&mut s), A::from(nb)],
            )
            .unwrap_or_else(|e| panic!("{e}"));
            let want_d: Vec<u32> = dev.read::<f32>(&d).unwrap().into_iter().map(f32::to_bits).collect();
            let (want_q, want_s) = (dev.read::<u32>(&q).unwrap(), dev.read::<i32>(&s).unwrap());
            assert!(!outs.is_empty());
            for (kern, h, y, q, d, s) in outs {
                let at = format!("{} n={n} rows={rows}", kern.name());
                assert_eq!(h, hw.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), "{at}: h");
                assert_eq!(y, yw.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), "{at}: y");
                assert_eq!((q, d, s), (want_q.clone(), want_d.clone(), want_s.clone()), "{at}: the q8 blocks");
            }
        }
    }
}

/// `swiglu_pairs_q8` (m = 1 with several slots, and its derived rows sibling) against
/// `swiglu_pairs` then `q8act`, byte for byte: h, the q words, scales and block sums.
#[test]
fn swiglu_pairs_q8_is_swiglu_pairs_then_q8act() {
    let dev = Device::host().expect("host device");
    let compile = |k: baro_dsl::ir::Kernel| dev.compile(&k).unwrap_or_else(|e| panic!("{e}"));
    let (fused, fused_rows, plain, quant) = (
        compile(swiglu_pairs_q8()),
        compile(swiglu_pairs_q8_rows()),
        compile(baro_engine::kernels::moe::swiglu_pairs()),
        compile(q8act()),
    );
    let mut rng = baro::reference::Rng::new(10);
    let mut cases = 0;
    for n in [32usize, 288, 512] {
        for (slots, rows_kernel) in [(1usize, false), (3, false), (3, true)] {
            let gu: Vec<f32> = rng.vec_f32(slots * 2 * n).iter().map(|v| v * 4.0).collect();
            let gb = dev.upload(&gu).unwrap();
            let nb = slots * n / 32;
            let run_q8 = |x: &baro_dsl::runtime::Buffer| {
                let (mut q, mut d, mut s) = (
                    dev.alloc(ScalarType::U32, nb * 8).unwrap(),
                    dev.alloc(ScalarType::F32, nb).unwrap(),
                    dev.alloc(ScalarType::I32, nb).unwrap(),
                );
                dev.run(
                    &quant,
                    &mut [A::buf(x), A::buf_mut(&mut q), A::buf_mut(&mut d), A::buf_mut(&mut s), A::from(nb)],
                )
                .unwrap_or_else(|e| panic!("{e}"));
                (
                    dev.read::<u32>(&q).unwrap(),
                    dev.read::<f32>(&d).unwrap().into_iter().map(f32::to_bits).collect::<Vec<_>>(),
                    dev.read::<i32>(&s).unwrap(),
                )
            };
            let mut h = dev.alloc(ScalarType::F32, slots * n).unwrap();
            dev.run(&plain, &mut [A::buf(&gb), A::buf_mut(&mut h), A::from(n), A::from(slots)])
                .unwrap_or_else(|e| panic!("{e}"));
            let want_h: Vec<u32> = dev.read::<f32>(&h).unwrap().into_iter().map(f32::to_bits).collect();
            let want_q = run_q8(&h);
            let (mut h2, mut q, mut d, mut s) = (
                dev.alloc(ScalarType::F32, slots * n).unwrap(),
                dev.alloc(ScalarType::U32, nb * 8).unwrap(),
                dev.alloc(ScalarType::F32, nb).unwrap(),
                dev.alloc(ScalarType::I32, nb).unwrap(),
            );
            let kern = if rows_kernel { &fused_rows } else { &fused };
            let mut args = vec![
                A::buf(&gb),
                A::buf_mut(&mut h2),
                A::buf_mut(&mut q),
                A::buf_mut(&mut d),
                A::buf_mut(&mut s),
                A::from(n),
            ];
            // The rows kernel takes one slot per row (n_slots fixed at 1).
            args.extend(if rows_kernel { vec![A::from(1usize), A::from(slots)] } else { vec![A::from(slots)] });
            dev.run(kern, &mut args).unwrap_or_else(|e| panic!("{e}"));
            let at = format!("{} n={n} slots/rows={slots}", kern.name());
            assert_eq!(
                dev.read::<f32>(&h2).unwrap().into_iter().map(f32::to_bits).collect::<Vec<_>>(),
                want_h,
                "{at}: h"
            );
            let got = (
                dev.read::<u32>(&q).unwrap(),
                dev.read::<f32>(&d).unwrap().into_iter().map(f32::to_bits).collect::<Vec<_>>(),
                dev.read::<i32>(&s).unwrap(),
            );
            assert_eq!(got, want_q, "{at}: the q8 blocks");
            cases += 1;
        }
    }
    assert_eq!(cases, 9);
}

#[test]
fn matvec_q8_0_q8_verifies_with_its_rows_sibling() {
    let k = matvec_q8_0_q8();
    baro_dsl::verify::verify_kernel(&k).unwrap_or_else(|e| panic!("{e:?}"));
    let rows = matvec_q8_0_q8_rows();
    assert_eq!(
        rows.sibling.as_ref().map(|s| s.of.as_str()),
        Some("matvec_q8_0_q8"),
        "declared the m = 1 kernel's sibling"
    );
    baro_dsl::verify::check_sibling(&rows, &k).unwrap_or_else(|e| panic!("{e:?}"));
}

#[test]
fn matvec_q8_0_q8_compiles_for_sm90_and_gfx1100() {
    use baro_dsl::compile::compile_gpu;
    use baro_dsl::options::CompileOptions;
    let cache = crate::common::gpu_cache();
    for kern in [
        matvec_q8_0_q8(),
        matvec_q8_0_q8_rows(),
        matvec_q8_0_q8_rows8(),
        matvec_q8_0_q8_mma(),
        baro_engine::kernels::kquant_q8::matvec_q4_k_q8_mma(),
        baro_engine::kernels::kquant_q8::matvec_q5_k_q8_mma(),
        baro_engine::kernels::kquant_q8::matvec_q6_k_q8_mma(),
    ] {
        for target in ["sm_90", "gfx1100"] {
            let a = compile_gpu(&kern, &target.parse().unwrap(), &CompileOptions::default(), cache)
                .unwrap_or_else(|e| panic!("{} {target}: {e}", kern.name));
            assert!(!a.image.is_empty(), "{} {target}", kern.name);
            let mma = kern.name.ends_with("_mma");
            if target == "sm_90" {
                let ptx = String::from_utf8_lossy(&a.image);
                if mma {
                    // The integer dots are the tensor cores' 16×8×32 s8 step.
                    assert!(
                        ptx.contains("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"),
                        "{}: expected mma.sync m16n8k32 s8 in the PTX",
                        kern.name
                    );
                } else {
                    // The integer dots are the hardware's 4-way byte dot.
                    assert!(
                        ptx.matches("dp4a.s32.s32").count() >= 8,
                        "{}: expected the 8 dp4a of a block in the PTX",
                        kern.name
                    );
                }
            } else if mma {
                // The gfx1100 code object runs the step as `v_wmma_i32_16x16x16_iu8`.
                let dir = tempfile::tempdir().unwrap();
                let path = dir.path().join("k.hsaco");
                std::fs::write(&path, &a.image).unwrap();
                let out = std::process::Command::new("llvm-objdump-19")
                    .args(["-d", "--mcpu=gfx1100"])
                    .arg(&path)
                    .output()
                    .expect("llvm-objdump-19 (installed with LLVM 19 by ./dev)");
                let disasm = String::from_utf8_lossy(&out.stdout);
                assert!(disasm.contains("v_wmma_i32_16x16x16_iu8"), "{}: no v_wmma_i32_16x16x16_iu8", kern.name);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The K-quant × q8 matvecs (`kernels::kquant_q8`): Q4_K, Q5_K, Q6_K weights on q8act blocks.
// ---------------------------------------------------------------------------------------------

use baro_engine::kernels::kquant_q8::{self as kq, matvec_kquant_q8_reference};
use baro_engine::model::quantize::quantize;
use baro_engine::model::TensorType;

const KQUANTS: [TensorType; 3] = [TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K];

/// (m = 1 kernel, derived rows kernel) of a K-quant type.
fn kq_kernels(ty: TensorType) -> (baro_dsl::ir::Kernel, baro_dsl::ir::Kernel) {
    match ty {
        TensorType::Q4_K => (kq::matvec_q4_k_q8(), kq::matvec_q4_k_q8_rows()),
        TensorType::Q5_K => (kq::matvec_q5_k_q8(), kq::matvec_q5_k_q8_rows()),
        TensorType::Q6_K => (kq::matvec_q6_k_q8(), kq::matvec_q6_k_q8_rows()),
        other => panic!("no q8 kernel for {other:?}"),
    }
}

/// q8 activations: packed words, scales, block sums.
struct Q8x {
    q: Vec<u32>,
    d: Vec<f32>,
    s: Vec<i32>,
}

fn q8x(x: &[f32]) -> Q8x {
    let (q, d, s) = q8act_reference(x);
    Q8x { q, d, s }
}

/// Runs `kern` (an m = 1 kernel, or with `rows` its rows sibling) on the host; Q6_K's kernels
/// take no block sums. Returns (slots or rows) · n outputs.
#[allow(clippy::too_many_arguments)]
fn run_kq(
    ty: TensorType,
    kern: &baro_dsl::ir::Kernel,
    x: &Q8x,
    w: &[u8],
    ids: &[u32],
    k: usize,
    n: usize,
    x_stride: usize,
    rows: Option<usize>,
) -> Vec<f32> {
    let dev = Device::host().expect("host device");
    let compiled = dev.compile(kern).unwrap_or_else(|e| panic!("{}: {e}", kern.name));
    let (qb, db, sb, ib) =
        (dev.upload(&x.q).unwrap(), dev.upload(&x.d).unwrap(), dev.upload(&x.s).unwrap(), dev.upload(ids).unwrap());
    let wb = dev.upload_bytes(ScalarType::U8, w).unwrap();
    let mut y = dev.alloc(ScalarType::F32, ids.len() * n).unwrap();
    {
        let mut args = vec![A::buf(&qb), A::buf(&db)];
        if ty != TensorType::Q6_K {
            args.push(A::buf(&sb));
        }
        args.extend([A::words(&wb), A::buf(&ib), A::buf_mut(&mut y), A::from(k), A::from(n)]);
        match rows {
            None => args.extend([A::from(x_stride), A::from(ids.len())]),
            Some(r) => args.extend([A::from(0usize), A::from(1usize), A::from(r)]),
        }
        dev.run(&compiled, &mut args).unwrap_or_else(|e| panic!("{}: {e}", kern.name));
    }
    dev.read(&y).unwrap()
}

/// `n_blocks` super-blocks of `ty` from baro's GGUF quantizer, on values in [-1, 1) with a
/// spread of magnitudes (so sub-block mins and scales vary).
fn kq_quantized(ty: TensorType, n_blocks: usize, seed: u64) -> Vec<u8> {
    let values = baro::reference::Rng::new(seed).vec_f32(n_blocks * 256);
    quantize(ty, &values).expect("whole super-blocks")
}

/// `n_blocks` super-blocks of random bytes (every scale, min and code pattern), with finite
/// f16 super-scales in [-0.05, 0.05).
fn kq_random_bytes(ty: TensorType, n_blocks: usize, seed: u64) -> Vec<u8> {
    let mut rng = baro::reference::Rng::new(seed);
    let size = ty.block_bytes();
    let mut w: Vec<u8> = (0..n_blocks * size).map(|_| rng.next_u64() as u8).collect();
    for blk in w.chunks_exact_mut(size) {
        let scales: &[usize] = if ty == TensorType::Q6_K { &[208] } else { &[0, 2] };
        for &at in scales {
            blk[at..at + 2].copy_from_slice(&half::f16::from_f32(rng.f32() * 0.05).to_le_bytes());
        }
    }
    w
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|f| f.to_bits()).collect()
}

#[test]
fn kquant_q8_matvecs_equal_their_reference_byte_for_byte() {
    let mut rng = baro::reference::Rng::new(14);
    let mut compared = 0;
    // (k, n, matrices, ids, one input per slot?, random bytes instead of quantized values):
    // one super-block; three per row (Q6_K: both alignments in a row, and rows starting on
    // either); expert slots sharing x, ragged n; per-slot x; 136 units per row (four full
    // rounds of 32 lanes and a ragged fifth); random bytes.
    let cases = [
        (256usize, 1usize, 1usize, vec![0u32], false, false),
        (768, 3, 1, vec![0], false, false),
        (2048, 17, 3, vec![2, 0], false, false),
        (1280, 9, 4, vec![3, 1, 2], true, false),
        (4352, 5, 1, vec![0], false, false),
        (768, 11, 2, vec![1, 0], true, true),
        (2048, 8, 1, vec![0], false, true),
    ];
    for ty in KQUANTS {
        let (m1, _) = kq_kernels(ty);
        for (k, n, n_mats, ids, per_slot, random) in &cases {
            let (k, n) = (*k, *n);
            let x_stride = if *per_slot { k } else { 0 };
            let x = q8x(&rng.vec_f32(if *per_slot { ids.len() * k } else { k }));
            let blocks = n_mats * n * k / 256;
            let w =
                if *random { kq_random_bytes(ty, blocks, k as u64 + 1) } else { kq_quantized(ty, blocks, k as u64) };
            let got = run_kq(ty, &m1, &x, &w, ids, k, n, x_stride, None);
            let want = matvec_kquant_q8_reference(ty, &x.q, &x.d, &x.s, &w, ids, k, n, x_stride);
            assert_eq!(bits(&got), bits(&want), "{ty:?} k={k} n={n} ids={ids:?} per_slot={per_slot} random={random}");
            assert!(got.iter().any(|v| *v != 0.0), "{ty:?} k={k}: all zero, the comparison would be vacuous");
            compared += got.len();
        }
    }
    println!("{compared} outputs byte-equal");
}

/// Edge bytes: an all-zero super-block, every scale/min/code at its maximum (Q6_K: −128 and
/// 127 sub-scales with codes −32 and 31) with the largest f16 super-scales, a subnormal d,
/// on q8act's blocks and on raw q8 bytes at −128 and 127.
#[test]
fn kquant_q8_matvecs_on_edge_bytes() {
    for ty in KQUANTS {
        let size = ty.block_bytes();
        let f16_max = half::f16::MAX.to_le_bytes();
        let mut blocks: Vec<Vec<u8>> = vec![vec![0u8; size]];
        if ty == TensorType::Q6_K {
            for (code_byte, scale) in [(0x00u8, 0x80u8), (0xff, 0x7f), (0x00, 0x7f), (0xff, 0x80)] {
                let mut b = vec![code_byte; size];
                b[192..208].fill(scale);
                b[208..210].copy_from_slice(&f16_max);
                blocks.push(b);
            }
            let mut sub = vec![0x6cu8; size];
            sub[208..210].copy_from_slice(&[1, 0]);
            blocks.push(sub);
        } else {
            let mut max = vec![0xffu8; size];
            max[0..2].copy_from_slice(&f16_max);
            max[2..4].copy_from_slice(&f16_max);
            blocks.push(max);
            let mut sub = vec![0x6cu8; size];
            sub[0..4].copy_from_slice(&[1, 0, 1, 0]);
            blocks.push(sub);
        }
        // Rows: each edge block alone (k = 256), then all of them in one row.
        let n = blocks.len();
        let w1: Vec<u8> = blocks.concat();
        let mut rng = baro::reference::Rng::new(99);
        let raw = {
            // Raw q8 bytes: −128 / 127 / random, scale 1, sums consistent with the bytes.
            let bytes: Vec<i8> = (0..256)
                .map(|i| match i % 3 {
                    0 => -128,
                    1 => 127,
                    _ => rng.next_u64() as i8,
                })
                .collect();
            let q = bytes
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0] as u8, c[1] as u8, c[2] as u8, c[3] as u8]))
                .collect();
            let s = bytes.chunks_exact(32).map(|c| c.iter().map(|&b| i32::from(b)).sum()).collect();
            Q8x { q, d: vec![1.0; 8], s }
        };
        let from_act = q8x(&rng.vec_f32(256));
        for x in [&raw, &from_act] {
            let (m1, _) = kq_kernels(ty);
            let got = run_kq(ty, &m1, x, &w1, &[0], 256, n, 0, None);
            let want = matvec_kquant_q8_reference(ty, &x.q, &x.d, &x.s, &w1, &[0], 256, n, 0);
            assert_eq!(bits(&got), bits(&want), "{ty:?} edge blocks");
            assert_eq!(got[0].to_bits(), 0, "{ty:?}: an all-zero super-block gives +0.0");
            assert!(got.iter().all(|v| v.is_finite()), "{ty:?}: {got:?}");
            assert!(got[1..].iter().all(|v| *v != 0.0), "{ty:?}: {got:?}");
        }
        // The same blocks as one row of n super-blocks (Q6_K: both alignments).
        let k = 256 * n;
        let x = q8x(&rng.vec_f32(k));
        let got = run_kq(ty, &kq_kernels(ty).0, &x, &w1, &[0], k, 1, 0, None);
        let want = matvec_kquant_q8_reference(ty, &x.q, &x.d, &x.s, &w1, &[0], k, 1, 0);
        assert_eq!(bits(&got), bits(&want), "{ty:?} edge row");
    }
}

#[test]
fn kquant_q8_matvecs_are_close_to_the_f32_matvecs() {
    // q8 activations carry a relative step of 1/254 of each block's max|x|: stated bar 5 % of
    // the largest |y|, on baro-quantized weights and random x.
    let mut rng = baro::reference::Rng::new(5);
    for ty in KQUANTS {
        let (k, n, ids) = (2048usize, 64usize, vec![1u32, 0]);
        let x = rng.vec_f32(k);
        let w = kq_quantized(ty, 2 * n * k / 256, 3);
        let xq = q8x(&x);
        let got = run_kq(ty, &kq_kernels(ty).0, &xq, &w, &ids, k, n, 0, None);
        let exact = baro_engine::kernels::quant::matvec_quant_reference(ty, &x, &w, &ids, k, n, 0);
        let scale = exact.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        assert!(scale > 0.0);
        let worst = got.iter().zip(&exact).map(|(a, b)| (a - b).abs() / scale).fold(0.0f32, f32::max);
        println!("{ty:?}: worst |q8 − f32| / max|y| = {worst:.5}");
        assert!(worst <= 0.05, "{ty:?}: {worst}");
    }
}

#[test]
fn kquant_q8_matvecs_verify_with_their_rows_siblings() {
    for ty in KQUANTS {
        let (m1, rows) = kq_kernels(ty);
        baro_dsl::verify::verify_kernel(&m1).unwrap_or_else(|e| panic!("{ty:?}: {e:?}"));
        assert!(m1.to_string().contains(", any, "), "{ty:?}: the integer dots are declared order-free");
        assert_eq!(
            rows.sibling.as_ref().map(|s| s.of.as_str()),
            Some(m1.name.as_str()),
            "declared the m = 1 kernel's sibling"
        );
        baro_dsl::verify::check_sibling(&rows, &m1).unwrap_or_else(|e| panic!("{ty:?}: {e:?}"));
    }
}

#[test]
fn kquant_q8_rows_equal_m1_per_row() {
    // Nine rows (a full tile of 8 and one more), each its own expert and activations.
    let mut rng = baro::reference::Rng::new(21);
    let (k, n, n_mats, rows) = (768usize, 9usize, 3usize, 9usize);
    for ty in KQUANTS {
        let (_, rows_kernel) = kq_kernels(ty);
        let x = q8x(&rng.vec_f32(rows * k));
        let ids: Vec<u32> = (0..rows as u32).map(|r| (r * 2 + 1) % n_mats as u32).collect();
        let w = kq_quantized(ty, n_mats * n * k / 256, 77);
        let got = run_kq(ty, &rows_kernel, &x, &w, &ids, k, n, 0, Some(rows));
        // Row r alone: the m = 1 reference with slot ids[r] and x from row r.
        let want = matvec_kquant_q8_reference(ty, &x.q, &x.d, &x.s, &w, &ids, k, n, k);
        assert_eq!(bits(&got), bits(&want), "{ty:?} rows");
    }
}

/// The 8-row form of a K-quant type (one matrix, x staged in workgroup memory).
fn kq_rows8(ty: TensorType) -> baro_dsl::ir::Kernel {
    match ty {
        TensorType::Q4_K => kq::matvec_q4_k_q8_rows8(),
        TensorType::Q5_K => kq::matvec_q5_k_q8_rows8(),
        TensorType::Q6_K => kq::matvec_q6_k_q8_rows8(),
        other => panic!("no 8-row q8 kernel for {other:?}"),
    }
}

/// The K-quant q8 matvecs on the integer matrix step (`matvec_q4_k_q8_mma`,
/// `matvec_q5_k_q8_mma`: 16 outputs × 8 rows of one matrix; `matvec_q6_k_q8_mma`: 8 × 8) against the plain-Rust reference
/// (row r alone, matrix 2 of a stack of 3) and against the serial rows kernels, byte for byte:
/// row counts below, at and across the tile of 8, outputs across workgroups of 8 and 16, one
/// super-block, 40 units per row (lanes with one and two), `Q8_MMA_MAX_K`; quantized values
/// and random bytes. A k past `Q8_MMA_MAX_K` is a bounds error, not a result.
#[test]
fn kquant_q8_mma_equal_reference_and_serial_rows() {
    let mut rng = baro::reference::Rng::new(41);
    for (ty, mma) in [
        (TensorType::Q4_K, kq::matvec_q4_k_q8_mma()),
        (TensorType::Q5_K, kq::matvec_q5_k_q8_mma()),
        (TensorType::Q6_K, kq::matvec_q6_k_q8_mma()),
    ] {
        let (m1, serial) = kq_kernels(ty);
        assert_eq!(mma.sibling.as_ref().map(|s| s.of.as_str()), Some(m1.name.as_str()), "declared sibling");
        let mut compared = 0;
        for (k, n, random) in [(256usize, 3usize, false), (1280, 17, true), (Q8_MMA_MAX_K, 9, false)] {
            let w = if random {
                kq_random_bytes(ty, 3 * n * k / 256, k as u64)
            } else {
                kq_quantized(ty, 3 * n * k / 256, k as u64)
            };
            for rows in [1usize, 3, 8, 9, 17] {
                let x = q8x(&rng.vec_f32(rows * k));
                let ids = vec![2u32; rows];
                let got = run_kq(ty, &mma, &x, &w, &ids, k, n, 0, Some(rows));
                let want = matvec_kquant_q8_reference(ty, &x.q, &x.d, &x.s, &w, &ids, k, n, k);
                assert_eq!(bits(&got), bits(&want), "{} rows={rows} k={k} n={n}: against the reference", mma.name);
                let serial_got = run_kq(ty, &serial, &x, &w, &ids, k, n, 0, Some(rows));
                assert_eq!(
                    bits(&got),
                    bits(&serial_got),
                    "{} rows={rows} k={k} n={n}: against {}",
                    mma.name,
                    serial.name
                );
                assert!(got.iter().any(|v| *v != 0.0), "{ty:?} k={k}: all zero, the comparison would be vacuous");
                compared += got.len();
            }
        }
        assert_eq!(compared, (3 + 17 + 9) * (1 + 3 + 8 + 9 + 17), "{ty:?}");
        // One super-block past the limit: the workgroup arrays' bounds check fails.
        let k = Q8_MMA_MAX_K + 256;
        let x = q8x(&rng.vec_f32(k));
        let w = kq_quantized(ty, k / 256, 1);
        let dev = Device::host().expect("host device");
        let compiled = dev.compile(&mma).unwrap_or_else(|e| panic!("{}: {e}", mma.name));
        let (qb, db, sb, ib) = (
            dev.upload(&x.q).unwrap(),
            dev.upload(&x.d).unwrap(),
            dev.upload(&x.s).unwrap(),
            dev.upload(&[0u32]).unwrap(),
        );
        let wb = dev.upload_bytes(ScalarType::U8, &w).unwrap();
        let mut y = dev.alloc(ScalarType::F32, 1).unwrap();
        let mut args = vec![A::buf(&qb), A::buf(&db)];
        if ty != TensorType::Q6_K {
            args.push(A::buf(&sb));
        }
        args.extend([A::words(&wb), A::buf(&ib), A::buf_mut(&mut y), A::from(k), A::from(1usize)]);
        args.extend([A::from(0usize), A::from(1usize), A::from(1usize)]);
        let err = dev.run(&compiled, &mut args).expect_err("k past Q8_MMA_MAX_K must fail").to_string();
        assert!(err.contains(&mma.name), "the error names the kernel: {err}");
    }
}

/// The 8-row K-quant q8 matvecs of one matrix against the plain-Rust reference (row r alone,
/// matrix 2 of a stack of 3) and against the serial rows kernels, byte for byte: row counts
/// below, at and across the tile of 8, outputs across workgroups of 8, one super-block, 72
/// units per row (every lane two or three) and `KQ8_ROWS8_MAX_K`; quantized values and random
/// bytes. A k past `KQ8_ROWS8_MAX_K` is a bounds error, not a result.
#[test]
fn kquant_q8_rows8_equal_reference_and_serial_rows() {
    let mut rng = baro::reference::Rng::new(31);
    let mut compared = 0;
    for ty in KQUANTS {
        let (m1, serial) = kq_kernels(ty);
        let rows8 = kq_rows8(ty);
        assert_eq!(
            rows8.sibling.as_ref().map(|s| s.of.as_str()),
            Some(m1.name.as_str()),
            "declared the m = 1 kernel's sibling"
        );
        for (k, n, random) in [(256usize, 3usize, false), (2304, 9, true), (kq::KQ8_ROWS8_MAX_K, 17, false)] {
            let w = if random {
                kq_random_bytes(ty, 3 * n * k / 256, k as u64)
            } else {
                kq_quantized(ty, 3 * n * k / 256, k as u64)
            };
            for rows in [1usize, 3, 7, 8, 9, 17] {
                let x = q8x(&rng.vec_f32(rows * k));
                let ids = vec![2u32; rows];
                let got = run_kq(ty, &rows8, &x, &w, &ids, k, n, 0, Some(rows));
                let want = matvec_kquant_q8_reference(ty, &x.q, &x.d, &x.s, &w, &ids, k, n, k);
                assert_eq!(bits(&got), bits(&want), "{} rows={rows} k={k} n={n}: against the reference", rows8.name);
                assert_eq!(
                    bits(&got),
                    bits(&run_kq(ty, &serial, &x, &w, &ids, k, n, 0, Some(rows))),
                    "{} rows={rows} k={k} n={n}: against {}",
                    rows8.name,
                    serial.name
                );
                assert!(got.iter().any(|v| *v != 0.0), "{ty:?} k={k}: all zero, the comparison would be vacuous");
                compared += got.len();
            }
        }
        // One super-block past the staged maximum: the workgroup arrays' bounds check fails.
        let k = kq::KQ8_ROWS8_MAX_K + 256;
        let x = q8x(&rng.vec_f32(k));
        let w = kq_quantized(ty, k / 256, 1);
        let dev = Device::host().expect("host device");
        let compiled = dev.compile(&rows8).unwrap_or_else(|e| panic!("{}: {e}", rows8.name));
        let (qb, db, sb, ib) = (
            dev.upload(&x.q).unwrap(),
            dev.upload(&x.d).unwrap(),
            dev.upload(&x.s).unwrap(),
            dev.upload(&[0u32]).unwrap(),
        );
        let wb = dev.upload_bytes(ScalarType::U8, &w).unwrap();
        let mut y = dev.alloc(ScalarType::F32, 1).unwrap();
        let mut args = vec![A::buf(&qb), A::buf(&db)];
        if ty != TensorType::Q6_K {
            args.push(A::buf(&sb));
        }
        args.extend([
            A::words(&wb),
            A::buf(&ib),
            A::buf_mut(&mut y),
            A::from(k),
            A::from(1usize),
            A::from(0usize),
            A::from(1usize),
            A::from(1usize),
        ]);
        let err = dev.run(&compiled, &mut args).expect_err("k past KQ8_ROWS8_MAX_K must fail").to_string();
        assert!(err.contains(&rows8.name), "{ty:?}: the error names the kernel: {err}");
    }
    assert_eq!(compared, 3 * (3 + 9 + 17) * (1 + 3 + 7 + 8 + 9 + 17));
}

/// `kernel` with every `check!` removed (a `for` loop left holding nothing runs empty).
fn without_checks(mut kernel: baro_dsl::ir::Kernel) -> baro_dsl::ir::Kernel {
    use baro_dsl::ir::Stmt;
    fn strip(body: &mut Vec<Stmt>) -> usize {
        let before = body.len();
        body.retain(|s| !matches!(s, Stmt::Check { .. }));
        let mut removed = before - body.len();
        for s in body.iter_mut() {
            match s {
                Stmt::For { body, .. } | Stmt::ParFor { body, .. } => removed += strip(body),
                Stmt::If { then_body, else_body, .. } => removed += strip(then_body) + strip(else_body),
                _ => {}
            }
        }
        removed
    }
    assert_eq!(strip(&mut kernel.body), 1, "{}: expected one check! statement", kernel.name);
    kernel
}

/// The 8-row q8 matvecs read one matrix per tile (`ids[r0]`) where the m = 1 kernel reads
/// `ids[r]` per row: they are its siblings only under their `check!` that a tile's ids are
/// equal. The proof holds with the check, and the same kernel without it is rejected, naming
/// a row past the tile's first.
#[test]
fn rows8_tiles_are_siblings_only_under_their_check() {
    for (rows8, m1) in [(matvec_q8_0_q8_rows8(), matvec_q8_0_q8()), (kq::matvec_q4_k_q8_rows8(), kq::matvec_q4_k_q8())]
    {
        let proof = baro_dsl::verify::check_sibling(&rows8, &m1).unwrap_or_else(|e| panic!("{}: {e}", rows8.name));
        assert!(proof.outputs > 0, "{}: vacuous proof", rows8.name);
        assert!(rows8.to_string().contains("check 0 "), "{}: the check is in the IR text", rows8.name);
        let unchecked = without_checks(rows8.clone());
        match baro_dsl::verify::check_sibling(&unchecked, &m1) {
            Err(baro_dsl::verify::SiblingError::Arithmetic(m)) => {
                println!("{} without its check: {m}", rows8.name);
                assert!(
                    m.row % 8 != 0,
                    "{}: the first difference is in a row past a tile's first, found row {}",
                    rows8.name,
                    m.row
                );
            }
            other => panic!("{} without its check: expected an arithmetic mismatch, found {other:?}", rows8.name),
        }
    }
}

/// Routed experts on 8-row tiles: rows grouped so each expert's rows start on a multiple of 8
/// (two experts, the second group ragged) give each row the m = 1 kernel's bits with its own
/// expert; a tile holding two experts fails the launch with the check's message instead of
/// computing a result.
#[test]
fn rows8_tiles_of_one_expert_each_equal_the_reference_and_mixed_tiles_fail() {
    let mut rng = baro::reference::Rng::new(41);
    let (k, n, n_mats) = (1056usize, 9usize, 3usize);
    let w = q8_0_bytes(n_mats * n * k / 32, 5);
    let dev = Device::host().expect("host device");
    let kern = dev.compile(&matvec_q8_0_q8_rows8()).unwrap_or_else(|e| panic!("{e}"));
    let run = |ids: &[u32], x: &[f32]| {
        let (xq, xd, _) = q8act_reference(x);
        let (qb, db, wb, ib) = (
            dev.upload(&xq).unwrap(),
            dev.upload(&xd).unwrap(),
            dev.upload_bytes(ScalarType::U8, &w).unwrap(),
            dev.upload(ids).unwrap(),
        );
        let mut y = dev.alloc(ScalarType::F32, ids.len() * n).unwrap();
        let r = dev.run(
            &kern,
            &mut [
                A::buf(&qb),
                A::buf(&db),
                A::words(&wb),
                A::buf(&ib),
                A::buf_mut(&mut y),
                A::from(k),
                A::from(n),
                A::from(0usize),
                A::from(1usize),
                A::from(ids.len()),
            ],
        );
        r.map(|_| (dev.read::<f32>(&y).unwrap(), matvec_q8_0_q8_reference(&xq, &xd, &w, ids, k, n, k)))
    };
    let ids: Vec<u32> = [vec![2u32; 16], vec![0u32; 5]].concat();
    let x = rng.vec_f32(ids.len() * k);
    let (got, want) = run(&ids, &x).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(bits(&got), bits(&want), "tiles of one expert each");
    assert!(got.iter().any(|v| *v != 0.0));
    let mut mixed = ids.clone();
    mixed[11] = 1;
    let err = run(&mixed, &x).expect_err("a tile of two experts must fail").to_string();
    println!("{err}");
    assert!(
        err.contains("matvec_q8_0_q8_rows8") && err.contains("check 0 failed"),
        "the message names the kernel and the check: {err}"
    );
}

#[test]
fn kquant_q8_matvecs_compile_to_dp4a_and_v_dot4() {
    use baro_dsl::compile::compile_gpu;
    use baro_dsl::options::CompileOptions;
    let objdump = ["/usr/bin/llvm-objdump-19", "/usr/lib/llvm-19/bin/llvm-objdump"]
        .into_iter()
        .find(|p| std::path::Path::new(p).is_file())
        .unwrap_or_else(|| {
            panic!("llvm-objdump-19 not found: install Debian's llvm-19; this offline check never skips")
        });
    let tmp = tempfile::tempdir().unwrap();
    let cache = crate::common::gpu_cache();
    for ty in KQUANTS {
        // Every K-quant dot is signed × signed: the Q4_K/Q5_K codes (below 128) as signed bytes,
        // so that the matrix-step kernels (s8 × s8) compute the m = 1 kernels' own dots.
        let (dp4a, flags) = ("dp4a.s32.s32", "neg_lo:[1,1,0]");
        let (m1, rows) = kq_kernels(ty);
        for kern in [m1, rows, kq_rows8(ty)] {
            let a = compile_gpu(&kern, &"sm_90".parse().unwrap(), &CompileOptions::default(), cache)
                .unwrap_or_else(|e| panic!("{} sm_90: {e}", kern.name));
            let ptx = String::from_utf8_lossy(&a.image);
            let dots: Vec<&str> = ptx.lines().filter(|l| l.contains("dp4a")).collect();
            assert!(
                dots.len() >= 8 && dots.iter().all(|l| l.trim_start().starts_with(dp4a)),
                "{}: expected {dp4a}, found {dots:?}",
                kern.name
            );
            println!("{} sm_90: {} {dp4a}, {} ld.global", kern.name, dots.len(), ptx.matches("ld.global").count());
            let a = compile_gpu(&kern, &"gfx1100".parse().unwrap(), &CompileOptions::default(), cache)
                .unwrap_or_else(|e| panic!("{} gfx1100: {e}", kern.name));
            let path = tmp.path().join(format!("{}.hsaco", a.entry));
            std::fs::write(&path, &a.image).unwrap();
            let out = std::process::Command::new(objdump).args(["-d", "--mcpu=gfx1100"]).arg(&path).output().unwrap();
            let disasm = String::from_utf8_lossy(&out.stdout);
            let dots: Vec<&str> = disasm.lines().filter(|l| l.contains("v_dot4")).collect();
            assert!(
                !dots.is_empty()
                    && dots.iter().all(|l| l.contains("v_dot4_i32_iu8") && l.contains(flags) && !l.contains("clamp")),
                "{}: expected v_dot4_i32_iu8 {flags}, found {dots:?}",
                kern.name
            );
            println!("{} gfx1100: {} v_dot4_i32_iu8", kern.name, dots.len());
        }
    }
}

fn f32_bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// `moe_combine_add_rmsnorm_q8` (m = 1, and its derived rows sibling over several rows) against
/// the plain-Rust `moe_combine`, then the residual add, `rmsnorm` and `q8act` references, byte
/// for byte: h, y and the q8 blocks; lengths of one block, across a workgroup's 256 and not a
/// multiple of it, one and several experts.
#[test]
fn moe_combine_add_rmsnorm_q8_is_combine_then_add_rmsnorm_q8() {
    use baro_engine::kernels::{moe, norm};
    let dev = Device::host().expect("host device");
    let compile = |k: baro_dsl::ir::Kernel| dev.compile(&k).unwrap_or_else(|e| panic!("{e}"));
    let (one, rows_k) = (compile(moe_combine_add_rmsnorm_q8()), compile(moe_combine_add_rmsnorm_q8_rows()));
    let mut rng = baro::reference::Rng::new(11);
    let eps = 1e-6f32;
    let mut cases = 0;
    for n in [32usize, 288, 2048] {
        for top_k in [1usize, 8] {
            for rows in [1usize, 3] {
                let a = rng.vec_f32(rows * n);
                let ye: Vec<f32> = rng.vec_f32(rows * top_k * n).iter().map(|v| v * 3.0).collect();
                let wts = rng.vec_f32(rows * top_k);
                let sh = rng.vec_f32(rows * n);
                let sl = rng.vec_f32(rows);
                let w = rng.vec_f32(n);
                let (mut want_h, mut want_y) = (Vec::new(), Vec::new());
                for r in 0..rows {
                    let c = moe::combine_reference(
                        &ye[r * top_k * n..][..top_k * n],
                        &wts[r * top_k..][..top_k],
                        &sh[r * n..][..n],
                        sl[r],
                        n,
                    );
                    let h: Vec<f32> = (0..n).map(|i| a[r * n + i] + c[i]).collect();
                    want_y.extend(norm::rmsnorm_reference(&h, &w, eps, false));
                    want_h.extend(h);
                }
                let (want_q, want_d, want_s) = q8act_reference(&want_y);
                let up = |v: &[f32]| dev.upload(v).unwrap();
                let (ab, yeb, wtb, shb, slb, wb) = (up(&a), up(&ye), up(&wts), up(&sh), up(&sl), up(&w));
                let nb = rows * n / 32;
                for (kern, is_rows) in [(&one, false), (&rows_k, true)] {
                    if !is_rows && rows > 1 {
                        continue;
                    }
                    let (mut h, mut y) =
                        (dev.alloc(ScalarType::F32, rows * n).unwrap(), dev.alloc(ScalarType::F32, rows * n).unwrap());
                    let (mut q, mut d, mut s) = (
                        dev.alloc(ScalarType::U32, nb * 8).unwrap(),
                        dev.alloc(ScalarType::F32, nb).unwrap(),
                        dev.alloc(ScalarType::I32, nb).unwrap(),
                    );
                    let mut args = vec![
                        A::buf(&ab),
                        A::buf(&yeb),
                        A::buf(&wtb),
                        A::buf(&shb),
                        A::buf(&slb),
                        A::buf(&wb),
                        A::buf_mut(&mut h),
                        A::buf_mut(&mut y),
                        A::buf_mut(&mut q),
                        A::buf_mut(&mut d),
                        A::buf_mut(&mut s),
                        A::from(n),
                        A::from(top_k),
                        A::from(eps),
                    ];
                    if is_rows {
                        args.push(A::from(rows));
                    }
                    dev.run(kern, &mut args).unwrap_or_else(|e| panic!("{e}"));
                    let at = format!("{} n={n} top_k={top_k} rows={rows}", kern.name());
                    assert_eq!(f32_bits(&dev.read::<f32>(&h).unwrap()), f32_bits(&want_h), "{at}: h");
                    assert_eq!(f32_bits(&dev.read::<f32>(&y).unwrap()), f32_bits(&want_y), "{at}: y");
                    assert_eq!(dev.read::<u32>(&q).unwrap(), want_q, "{at}: q");
                    assert_eq!(f32_bits(&dev.read::<f32>(&d).unwrap()), f32_bits(&want_d), "{at}: d");
                    assert_eq!(dev.read::<i32>(&s).unwrap(), want_s, "{at}: block sums");
                    cases += 1;
                }
            }
        }
    }
    assert_eq!(cases, 3 * 2 * 3);
}

/// `gated_rmsnorm_q8` (m = 1, and its derived rows sibling) against the plain-Rust
/// `gated_rmsnorm` and `q8act` references, byte for byte: y and the q8 blocks.
#[test]
fn gated_rmsnorm_q8_is_gated_rmsnorm_then_q8act() {
    use baro_engine::kernels::gdn;
    let dev = Device::host().expect("host device");
    let compile = |k: baro_dsl::ir::Kernel| dev.compile(&k).unwrap_or_else(|e| panic!("{e}"));
    let (one, rows_k) = (compile(gated_rmsnorm_q8()), compile(gated_rmsnorm_q8_rows()));
    let mut rng = baro::reference::Rng::new(12);
    let eps = 1e-6f32;
    let mut cases = 0;
    for (hd, nh) in [(32usize, 1usize), (128, 4), (256, 3)] {
        for rows in [1usize, 2] {
            let (x, z, w) = (rng.vec_f32(rows * nh * hd), rng.vec_f32(rows * nh * hd), rng.vec_f32(hd));
            let want_y = gdn::gated_rmsnorm_reference(&x, &z, &w, hd, eps);
            let (want_q, want_d, want_s) = q8act_reference(&want_y);
            let (xb, zb, wb) = (dev.upload(&x).unwrap(), dev.upload(&z).unwrap(), dev.upload(&w).unwrap());
            let nb = rows * nh * hd / 32;
            for (kern, is_rows) in [(&one, false), (&rows_k, true)] {
                if !is_rows && rows > 1 {
                    continue;
                }
                let mut y = dev.alloc(ScalarType::F32, rows * nh * hd).unwrap();
                let (mut q, mut d, mut s) = (
                    dev.alloc(ScalarType::U32, nb * 8).unwrap(),
                    dev.alloc(ScalarType::F32, nb).unwrap(),
                    dev.alloc(ScalarType::I32, nb).unwrap(),
                );
                let mut args = vec![
                    A::buf(&xb),
                    A::buf(&zb),
                    A::buf(&wb),
                    A::buf_mut(&mut y),
                    A::buf_mut(&mut q),
                    A::buf_mut(&mut d),
                    A::buf_mut(&mut s),
                    A::from(hd),
                    A::from(nh),
                    A::from(eps),
                ];
                if is_rows {
                    args.push(A::from(rows));
                }
                dev.run(kern, &mut args).unwrap_or_else(|e| panic!("{e}"));
                let at = format!("{} head_dim={hd} heads={nh} rows={rows}", kern.name());
                assert_eq!(f32_bits(&dev.read::<f32>(&y).unwrap()), f32_bits(&want_y), "{at}: y");
                assert_eq!(dev.read::<u32>(&q).unwrap(), want_q, "{at}: q");
                assert_eq!(f32_bits(&dev.read::<f32>(&d).unwrap()), f32_bits(&want_d), "{at}: d");
                assert_eq!(dev.read::<i32>(&s).unwrap(), want_s, "{at}: block sums");
                cases += 1;
            }
        }
    }
    assert_eq!(cases, 3 * 3);
}
