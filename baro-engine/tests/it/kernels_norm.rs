//! Host tests of the embedding, norm and residual-add-and-norm kernels against their plain-Rust references,
//! byte for byte, on ragged shapes (the K-quant gathers against `model::dequant` on random
//! blocks); plus the verifier on each kernel and an exhaustive check of the f16 decode the
//! quantized kernels inline.

use crate::common;

use common::dev;

use baro::reference::{bits, Rng};
use baro_dsl::runtime::{Buffer, Device, DeviceArg as A};
use baro_dsl::verify::verify_kernel;
use baro_dsl::Kernel;
use baro_engine::kernels::{embed, f16_bits, norm};
use baro_engine::model::{dequant, TensorType};
use half::{bf16, f16};

fn run(d: &Device, k: &Kernel, args: &mut [A<'_>]) {
    let c = d.compile(k).unwrap_or_else(|e| panic!("{}: {e}", k.name));
    d.run(&c, args).unwrap_or_else(|e| panic!("{}: {e}", k.name));
}

fn zeros(d: &Device, n: usize) -> Buffer {
    d.alloc(baro_dsl::ScalarType::F32, n).expect("alloc")
}

#[test]
fn f16_decode_is_exact() {
    // The plain function, every pattern.
    for h in 0..=u16::MAX {
        let want = f16::from_bits(h).to_f32();
        let got = f16_bits(u32::from(h));
        assert!(
            got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
            "f16 {h:#06x}: {got:?} vs {want:?}"
        );
    }
    // The inline decode in `embed_q8_0`: one row of 65536 blocks, block b scaled by pattern b, q = 1.
    let d = dev();
    let n_blocks = 1usize << 16;
    let mut table = Vec::with_capacity(n_blocks * 34);
    for h in 0..=u16::MAX {
        table.extend(h.to_le_bytes());
        table.extend([1u8; 32]);
    }
    let (ids, table_b) = (d.upload(&[0u32]).unwrap(), d.upload(&table).unwrap());
    let mut y = zeros(&d, n_blocks * 32);
    run(
        &d,
        &embed::embed_q8_0(),
        &mut [A::buf(&ids), A::buf(&table_b), A::buf_mut(&mut y), A::from(0usize), A::from(n_blocks * 32)],
    );
    let y: Vec<f32> = d.read(&y).unwrap();
    let mut checked = 0;
    for h in 0..n_blocks {
        let want = f16::from_bits(h as u16).to_f32();
        let got = y[h * 32];
        assert!(
            got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
            "embed_q8_0 scale {h:#06x}: {got:?} vs {want:?}"
        );
        checked += 1;
    }
    assert_eq!(checked, 65536);
}

#[test]
fn embeddings_gather_the_row() {
    let d = dev();
    let mut rng = Rng::new(1);
    let (vocab, dim) = (37, 96);
    let t32 = rng.vec_f32(vocab * dim);
    let tb: Vec<bf16> = t32.iter().map(|&v| bf16::from_f32(v)).collect();
    let mut tq = Vec::new();
    for _ in 0..vocab * dim / 32 {
        tq.extend(f16::from_f32(rng.f32() / 64.0).to_le_bytes());
        tq.extend((0..32).map(|_| rng.below(256) as u8));
    }
    let ids = d.upload(&[5u32, 36, 0]).unwrap();
    let (b32, bb, bq) = (d.upload(&t32).unwrap(), d.upload(&tb).unwrap(), d.upload(&tq).unwrap());
    for pos in 0..3usize {
        let tok = [5usize, 36, 0][pos];
        let mut y = zeros(&d, dim);
        run(&d, &embed::embed_f32(), &mut [A::buf(&ids), A::buf(&b32), A::buf_mut(&mut y), A::from(pos), A::from(dim)]);
        assert_eq!(bits(&d.read::<f32>(&y).unwrap()), bits(&t32[tok * dim..(tok + 1) * dim]));
        run(&d, &embed::embed_bf16(), &mut [A::buf(&ids), A::buf(&bb), A::buf_mut(&mut y), A::from(pos), A::from(dim)]);
        let want: Vec<f32> = tb[tok * dim..(tok + 1) * dim].iter().map(|v| v.to_f32()).collect();
        assert_eq!(bits(&d.read::<f32>(&y).unwrap()), bits(&want));
        run(&d, &embed::embed_q8_0(), &mut [A::buf(&ids), A::buf(&bq), A::buf_mut(&mut y), A::from(pos), A::from(dim)]);
        assert_eq!(bits(&d.read::<f32>(&y).unwrap()), bits(&embed::q8_0_row(&tq, tok, dim)));
    }
    // A token id past the table is an error, not a read elsewhere.
    let bad = d.upload(&[vocab as u32]).unwrap();
    let mut y = zeros(&d, dim);
    let c = d.compile(&embed::embed_f32()).unwrap();
    assert!(d.run(&c, &mut [A::buf(&bad), A::buf(&b32), A::buf_mut(&mut y), A::from(0usize), A::from(dim)]).is_err());
}

/// `n` random blocks of `ty`: random bytes, with every f16 scale (d, and dmin for Q4_K/Q5_K)
/// a random finite pattern (zero, subnormal and normal exponents, both signs).
fn random_k_blocks(rng: &mut Rng, ty: TensorType, n: usize) -> Vec<u8> {
    let bb = ty.block_bytes();
    let scale_at: &[usize] = if ty == TensorType::Q6_K { &[bb - 2] } else { &[0, 2] };
    let mut out = Vec::with_capacity(n * bb);
    for _ in 0..n {
        let mut blk: Vec<u8> = (0..bb).map(|_| rng.below(256) as u8).collect();
        for &at in scale_at {
            let mut h = rng.below(1 << 16) as u16;
            if h & 0x7c00 == 0x7c00 {
                h &= !0x4000; // an inf/NaN exponent becomes a finite one
            }
            blk[at..at + 2].copy_from_slice(&h.to_le_bytes());
        }
        out.extend(blk);
    }
    out
}

#[test]
fn k_quant_embeddings_equal_dequant_bytes() {
    let d = dev();
    let mut rng = Rng::new(5);
    let cases = [
        (TensorType::Q4_K, embed::embed_q4_k()),
        (TensorType::Q5_K, embed::embed_q5_k()),
        (TensorType::Q6_K, embed::embed_q6_k()),
    ];
    for (ty, kernel) in &cases {
        let c = d.compile(kernel).unwrap_or_else(|e| panic!("{}: {e}", kernel.name));
        // (rows, dim): ragged row counts, one and several super-blocks per row.
        for (vocab, dim) in [(1usize, 256usize), (7, 512), (13, 768)] {
            let table = random_k_blocks(&mut rng, *ty, vocab * dim / dequant::QK_K);
            let tb = d.upload(&table).unwrap();
            let ids: Vec<u32> = (0..vocab as u32).rev().collect();
            let idb = d.upload(&ids).unwrap();
            let mut y = zeros(&d, dim);
            let mut whole = Vec::with_capacity(vocab * dim);
            for (pos, &tok) in ids.iter().enumerate() {
                d.run(&c, &mut [A::buf(&idb), A::buf(&tb), A::buf_mut(&mut y), A::from(pos), A::from(dim)]).unwrap();
                let got = d.read::<f32>(&y).unwrap();
                let want = embed::quant_row(*ty, &table, tok as usize, dim);
                assert_eq!(want.len(), dim);
                assert_eq!(bits(&got), bits(&want), "{ty} vocab={vocab} dim={dim} token {tok}");
                whole.push((tok, got));
            }
            // The rows together are the whole table's dequantization.
            whole.sort_by_key(|(t, _)| *t);
            let all: Vec<f32> = whole.into_iter().flat_map(|(_, r)| r).collect();
            assert_eq!(bits(&all), bits(&dequant::to_f32(*ty, &table)), "{ty} vocab={vocab} dim={dim}");
            // A token id past the table is an error, not a read elsewhere.
            let bad = d.upload(&[vocab as u32]).unwrap();
            assert!(
                d.run(&c, &mut [A::buf(&bad), A::buf(&tb), A::buf_mut(&mut y), A::from(0usize), A::from(dim)]).is_err(),
                "{ty} vocab={vocab}"
            );
        }
    }
}

#[test]
fn rmsnorms_match_reference() {
    let d = dev();
    let mut rng = Rng::new(2);
    for n in [1usize, 31, 33, 2048, 2053] {
        let x = rng.vec_f32(n);
        let w: Vec<f32> = rng.vec_f32(n).iter().map(|v| 1.0 + v).collect();
        let (xb, wb) = (d.upload(&x).unwrap(), d.upload(&w).unwrap());
        for (zc, k) in [(false, norm::rmsnorm()), (true, norm::rmsnorm_zc())] {
            let mut y = zeros(&d, n);
            run(&d, &k, &mut [A::buf(&xb), A::buf(&wb), A::buf_mut(&mut y), A::from(n), A::from(1e-6f32)]);
            assert_eq!(
                bits(&d.read::<f32>(&y).unwrap()),
                bits(&norm::rmsnorm_reference(&x, &w, 1e-6, zc)),
                "n={n} zc={zc}"
            );
        }
    }
}

#[test]
fn head_rmsnorm_matches_reference() {
    let d = dev();
    let mut rng = Rng::new(3);
    // (head_dim, in_stride, out_stride, n_heads): the q_proj layout (query then gate per head) and a packed one.
    for (hd, is, os, nh) in [(256usize, 512usize, 256usize, 16usize), (37, 74, 40, 3), (16, 16, 16, 2)] {
        let x = rng.vec_f32(nh * is);
        let w: Vec<f32> = rng.vec_f32(hd).iter().map(|v| 1.0 + v).collect();
        let (xb, wb) = (d.upload(&x).unwrap(), d.upload(&w).unwrap());
        let mut y = zeros(&d, nh * os);
        run(
            &d,
            &norm::head_rmsnorm(),
            &mut [
                A::buf(&xb),
                A::buf(&wb),
                A::buf_mut(&mut y),
                A::from(hd),
                A::from(is),
                A::from(os),
                A::from(nh),
                A::from(1e-6f32),
            ],
        );
        assert_eq!(
            bits(&d.read::<f32>(&y).unwrap()),
            bits(&norm::head_rmsnorm_reference(&x, &w, hd, is, os, nh, 1e-6)),
            "head_dim={hd}"
        );
    }
}

/// `head_rmsnorm_rope` (m = 1, and its derived rows sibling over rows at consecutive
/// positions) is `head_rmsnorm` then `rope_neox`, byte for byte against their plain-Rust
/// references: the q_proj layout with partial rotary (64 of 256), a ragged head fully rotated,
/// and a packed one.
#[test]
fn head_rmsnorm_rope_is_the_norm_then_rope() {
    use baro_engine::kernels::rope;
    let d = dev();
    let mut rng = Rng::new(5);
    let (one, rows_k) = (
        d.compile(&norm::head_rmsnorm_rope()).unwrap_or_else(|e| panic!("{e}")),
        d.compile(&norm::head_rmsnorm_rope_rows()).unwrap_or_else(|e| panic!("{e}")),
    );
    let mut cases = 0;
    // (head_dim, in_stride, out_stride, n_heads, rope_dim)
    for (hd, is, os, nh, rd) in
        [(256usize, 512usize, 256usize, 16usize, 64usize), (38, 76, 40, 3, 38), (16, 16, 16, 2, 8)]
    {
        let (cos, sin) = rope::rope_table(1e7, rd, 16);
        let (cb, sb) = (d.upload(&cos).unwrap(), d.upload(&sin).unwrap());
        let w: Vec<f32> = rng.vec_f32(hd).iter().map(|v| 1.0 + v).collect();
        let wb = d.upload(&w).unwrap();
        for (pos, rows) in [(0usize, 1usize), (5, 1), (3, 4)] {
            let x = rng.vec_f32(rows * nh * is);
            let mut want = Vec::new();
            for r in 0..rows {
                let normed = norm::head_rmsnorm_reference(&x[r * nh * is..][..nh * is], &w, hd, is, os, nh, 1e-6);
                want.extend(rope::rope_reference(&normed, &cos, &sin, pos + r, rd, os, nh));
            }
            let xb = d.upload(&x).unwrap();
            for (kern, is_rows) in [(&one, false), (&rows_k, true)] {
                if !is_rows && rows > 1 {
                    continue;
                }
                let mut y = zeros(&d, rows * nh * os);
                let mut args = vec![
                    A::buf(&xb),
                    A::buf(&wb),
                    A::buf(&cb),
                    A::buf(&sb),
                    A::buf_mut(&mut y),
                    A::from(hd),
                    A::from(is),
                    A::from(os),
                    A::from(nh),
                    A::from(1e-6f32),
                    A::from(pos),
                    A::from(rd),
                ];
                if is_rows {
                    args.push(A::from(rows));
                }
                d.run(kern, &mut args).unwrap_or_else(|e| panic!("{e}"));
                let at = format!("{} head_dim={hd} rope_dim={rd} pos={pos} rows={rows}", kern.name());
                assert_eq!(bits(&d.read::<f32>(&y).unwrap()), bits(&want), "{at}");
                cases += 1;
            }
        }
    }
    assert_eq!(cases, 3 * 5);
}

#[test]
fn add_rmsnorm_is_the_add_then_the_norm() {
    let d = dev();
    let mut rng = Rng::new(4);
    for n in [1usize, 31, 256, 257, 1001, 2048] {
        let (a, b, w) = (rng.vec_f32(n), rng.vec_f32(n), rng.vec_f32(n));
        let (ab, bb, wb) = (d.upload(&a).unwrap(), d.upload(&b).unwrap(), d.upload(&w).unwrap());
        let (mut h, mut y) = (zeros(&d, n), zeros(&d, n));
        run(
            &d,
            &norm::add_rmsnorm(),
            &mut [
                A::buf(&ab),
                A::buf(&bb),
                A::buf(&wb),
                A::buf_mut(&mut h),
                A::buf_mut(&mut y),
                A::from(n),
                A::from(1e-6f32),
            ],
        );
        let sum: Vec<f32> = a.iter().zip(&b).map(|(p, q)| p + q).collect();
        assert_eq!(bits(&d.read::<f32>(&h).unwrap()), bits(&sum), "n={n}: the sums");
        assert_eq!(
            bits(&d.read::<f32>(&y).unwrap()),
            bits(&norm::rmsnorm_reference(&sum, &w, 1e-6, false)),
            "n={n}: the norm"
        );
        // And the same bits as the `rmsnorm` kernel on those sums.
        let (hb, mut y2) = (d.upload(&sum).unwrap(), zeros(&d, n));
        run(&d, &norm::rmsnorm(), &mut [A::buf(&hb), A::buf(&wb), A::buf_mut(&mut y2), A::from(n), A::from(1e-6f32)]);
        assert_eq!(bits(&d.read::<f32>(&y2).unwrap()), bits(&d.read::<f32>(&y).unwrap()), "n={n}: rmsnorm kernel");
    }
}

#[test]
fn norm_kernels_verify() {
    for k in [norm::rmsnorm(), norm::rmsnorm_zc(), norm::head_rmsnorm(), norm::add_rmsnorm()] {
        let proof = verify_kernel(&k).unwrap_or_else(|e| panic!("{}: {e:?}", k.name));
        assert!(proof.regions_checked > 0, "{}: no lane region checked", k.name);
    }
    for k in [
        embed::embed_f32(),
        embed::embed_bf16(),
        embed::embed_q8_0(),
        embed::embed_q4_k(),
        embed::embed_q5_k(),
        embed::embed_q6_k(),
    ] {
        verify_kernel(&k).unwrap_or_else(|e| panic!("{}: {e:?}", k.name));
    }
}
