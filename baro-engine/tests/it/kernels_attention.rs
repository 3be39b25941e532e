//! Host tests of RoPE, the KV-cache append and decode attention against their plain-Rust
//! references, byte for byte, on ragged shapes (GQA groups, context lengths around 32 lanes);
//! plus the verifier on each kernel.

use crate::common;

use common::dev;

use baro::reference::{bits, Rng};
use baro_dsl::runtime::{Buffer, Device, DeviceArg as A};
use baro_dsl::verify::verify_kernel;
use baro_dsl::Kernel;
use baro_engine::kernels::{attention, rope};

fn run(d: &Device, k: &Kernel, args: &mut [A<'_>]) {
    let c = d.compile(k).unwrap_or_else(|e| panic!("{}: {e}", k.name));
    d.run(&c, args).unwrap_or_else(|e| panic!("{}: {e}", k.name));
}

fn zeros(d: &Device, n: usize) -> Buffer {
    d.alloc(baro_dsl::ScalarType::F32, n).expect("alloc")
}

/// Attention's three kernels as the engine launches them (`forward::attention_cached`): the
/// m = 1 kernels (`rows` = None) or their rows siblings over `rows` rows, row r at context
/// n_ctx + r.
#[allow(clippy::too_many_arguments)]
fn attention_launches(
    d: &Device,
    rows: Option<usize>,
    q: &Buffer,
    kc: &Buffer,
    vc: &Buffer,
    gate: &Buffer,
    scratch: &mut Buffer,
    y: &mut Buffer,
    (hd, nh, nkv, n_ctx, ctx_stride): (usize, usize, usize, usize, usize),
    scale: f32,
) {
    let (scores, softmax, pv) = match rows {
        None => (attention::attention_scores(), attention::attention_softmax(), attention::attention_pv()),
        Some(_) => {
            (attention::attention_scores_rows(), attention::attention_softmax_rows(), attention::attention_pv_rows())
        }
    };
    let mut a = vec![
        A::buf(q),
        A::buf(kc),
        A::buf_mut(scratch),
        A::from(hd),
        A::from(nh),
        A::from(nkv),
        A::from(n_ctx),
        A::from(ctx_stride),
        A::from(scale),
    ];
    a.extend(rows.map(A::from));
    run(d, &scores, &mut a);
    drop(a);
    let mut a = vec![A::buf_mut(scratch), A::from(nh), A::from(n_ctx), A::from(ctx_stride)];
    a.extend(rows.map(A::from));
    run(d, &softmax, &mut a);
    drop(a);
    let mut a = vec![
        A::buf(scratch),
        A::buf(vc),
        A::buf(gate),
        A::buf_mut(y),
        A::from(hd),
        A::from(nh),
        A::from(nkv),
        A::from(n_ctx),
        A::from(ctx_stride),
        A::from(2 * hd),
        A::from(hd),
    ];
    a.extend(rows.map(A::from));
    run(d, &pv, &mut a);
}

#[test]
fn rope_table_is_the_f64_angle() {
    let (c, s) = rope::rope_table(1e7, 64, 3);
    assert_eq!((c.len(), s.len()), (96, 96));
    assert_eq!((c[0], s[0], c[32], s[32]), (1.0, 0.0, (1.0f64).cos() as f32, (1.0f64).sin() as f32));
    let a = 2.0 * 1e7f64.powf(-2.0 * 5.0 / 64.0);
    assert_eq!((c[64 + 5], s[64 + 5]), (a.cos() as f32, a.sin() as f32));
}

#[test]
fn rope_rotates_the_first_rope_dim() {
    let d = dev();
    let mut rng = Rng::new(21);
    for (rope_dim, head_stride, n_heads, pos) in [(64usize, 256usize, 3usize, 7usize), (6, 10, 2, 0), (62, 70, 1, 99)] {
        let (c, s) = rope::rope_table(1e7, rope_dim, pos + 1);
        let x = rng.vec_f32(n_heads * head_stride);
        let (mut xb, cb, sb) = (d.upload(&x).unwrap(), d.upload(&c).unwrap(), d.upload(&s).unwrap());
        run(
            &d,
            &rope::rope_neox(),
            &mut [
                A::buf_mut(&mut xb),
                A::buf(&cb),
                A::buf(&sb),
                A::from(pos),
                A::from(rope_dim),
                A::from(head_stride),
                A::from(n_heads),
            ],
        );
        let want = rope::rope_reference(&x, &c, &s, pos, rope_dim, head_stride, n_heads);
        assert_eq!(bits(&d.read::<f32>(&xb).unwrap()), bits(&want), "rope_dim={rope_dim}");
        if pos > 0 {
            assert_ne!(bits(&want[..rope_dim]), bits(&x[..rope_dim]), "rotation changed nothing");
        }
        assert_eq!(
            bits(&want[rope_dim..head_stride]),
            bits(&x[rope_dim..head_stride]),
            "dims past rope_dim must pass through"
        );
    }
}

#[test]
fn attention_decode_matches_reference() {
    let d = dev();
    let mut rng = Rng::new(22);
    // (head_dim, n_heads, n_kv_heads, n_ctx)
    for (hd, nh, nkv, n_ctx) in
        [(16usize, 4usize, 2usize, 1usize), (37, 6, 2, 31), (64, 4, 1, 33), (256, 16, 2, 70), (32, 4, 2, 300)]
    {
        let kv_dim = nkv * hd;
        let q: Vec<f32> = rng.vec_f32(nh * hd).iter().map(|v| v * 4.0).collect();
        let qg = rng.vec_f32(nh * 2 * hd); // the q_proj output: gate at offset hd of each head
        let (mut kc, mut vc) = (zeros(&d, n_ctx * kv_dim), zeros(&d, n_ctx * kv_dim));
        let (mut kh, mut vh) = (Vec::new(), Vec::new());
        for pos in 0..n_ctx {
            let (kn, vn) = (rng.vec_f32(kv_dim), rng.vec_f32(kv_dim));
            let (kb, vb) = (d.upload(&kn).unwrap(), d.upload(&vn).unwrap());
            run(
                &d,
                &attention::kv_append(),
                &mut [
                    A::buf(&kb),
                    A::buf(&vb),
                    A::buf_mut(&mut kc),
                    A::buf_mut(&mut vc),
                    A::from(pos),
                    A::from(kv_dim),
                ],
            );
            kh.extend(kn);
            vh.extend(vn);
        }
        assert_eq!(bits(&d.read::<f32>(&kc).unwrap()), bits(&kh));
        assert_eq!(bits(&d.read::<f32>(&vc).unwrap()), bits(&vh));
        let scale = (hd as f64).powf(-0.5) as f32;
        let (qb, gb) = (d.upload(&q).unwrap(), d.upload(&qg).unwrap());
        let ctx_stride = n_ctx + 3;
        let (mut scratch, mut y) = (zeros(&d, nh * ctx_stride), zeros(&d, nh * hd));
        attention_launches(&d, None, &qb, &kc, &vc, &gb, &mut scratch, &mut y, (hd, nh, nkv, n_ctx, ctx_stride), scale);
        let want = attention::attention_reference(&q, &kh, &vh, &qg, hd, nh, nkv, n_ctx, 2 * hd, hd, scale);
        assert_eq!(bits(&d.read::<f32>(&y).unwrap()), bits(&want), "head_dim={hd} heads={nh}/{nkv} n_ctx={n_ctx}");
        // Against an f64 softmax-attention to a tolerance: the reference is the right function.
        for h in 0..nh {
            let kvo = (h / (nh / nkv)) * hd;
            let sc: Vec<f64> = (0..n_ctx)
                .map(|t| {
                    (0..hd).map(|i| f64::from(q[h * hd + i]) * f64::from(kh[t * kv_dim + kvo + i])).sum::<f64>()
                        * f64::from(scale)
                })
                .collect();
            let m = sc.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            // f32 rounding of a score is relative to Σ|q·k|·scale; softmax passes it on as is.
            let sabs = (0..n_ctx)
                .map(|t| {
                    (0..hd).map(|i| (f64::from(q[h * hd + i]) * f64::from(kh[t * kv_dim + kvo + i])).abs()).sum::<f64>()
                        * f64::from(scale)
                })
                .fold(0.0, f64::max);
            let z: f64 = sc.iter().map(|v| (v - m).exp()).sum();
            for i in 0..hd {
                let o: f64 = (0..n_ctx).map(|t| (sc[t] - m).exp() / z * f64::from(vh[t * kv_dim + kvo + i])).sum();
                let mag: f64 =
                    (0..n_ctx).map(|t| (sc[t] - m).exp() / z * f64::from(vh[t * kv_dim + kvo + i]).abs()).sum();
                let g = 1.0 / (1.0 + (-f64::from(qg[h * 2 * hd + hd + i])).exp());
                assert!(
                    (o * g - f64::from(want[h * hd + i])).abs() <= (1e-5 + 4e-7 * sabs) * mag + 1e-7,
                    "head {h} dim {i}: {} vs {} (Σ|p·v| {mag})",
                    want[h * hd + i],
                    o * g
                );
            }
        }
    }
}

#[test]
fn attention_kernels_verify() {
    let k = attention::attention_softmax();
    let proof = verify_kernel(&k).unwrap_or_else(|e| panic!("{}: {e:?}", k.name));
    assert!(proof.regions_checked > 0, "{}: no lane region checked", k.name);
    for k in [attention::attention_scores(), attention::attention_pv(), attention::kv_append(), rope::rope_neox()] {
        verify_kernel(&k).unwrap_or_else(|e| panic!("{}: {e:?}", k.name));
    }
}

/// The rows siblings (`attention_scores_rows`: 16 query rows × 64 positions a workgroup, keys
/// staged 16 positions at a time; `attention_softmax_rows`; `attention_pv_rows`: P·V for 16
/// rows in one pass with a length per row) against the plain-Rust decode reference run
/// once per row on that row's causal context, byte for byte: row counts around and between
/// 16-row tiles (1, 9, 17, 21, 40, 48), contexts of one to many key tiles, continuation chunks
/// (n_ctx > 1), GQA groups, head_dim up to the kernel's largest.
#[test]
fn attention_rows_kernels_are_decode_per_row() {
    let d = dev();
    let mut rng = Rng::new(23);
    // (head_dim, n_heads, n_kv_heads, n_ctx of row 0, rows)
    for (hd, nh, nkv, n_ctx, rows) in [
        (16usize, 4usize, 2usize, 1usize, 1usize),
        (37, 6, 2, 31, 9),
        (64, 4, 1, 33, 17),
        (256, 16, 2, 5, 40),
        (64, 4, 2, 150, 48),
        (256, 8, 2, 290, 21),
    ] {
        let kv_dim = nkv * hd;
        let total = n_ctx + rows - 1;
        let (kh, vh) = (rng.vec_f32(total * kv_dim), rng.vec_f32(total * kv_dim));
        let q: Vec<f32> = rng.vec_f32(rows * nh * hd).iter().map(|v| v * 4.0).collect();
        let qg = rng.vec_f32(rows * nh * 2 * hd);
        let scale = (hd as f64).powf(-0.5) as f32;
        let ctx_stride = total + 2;
        let (kc, vc) = (d.upload(&kh).unwrap(), d.upload(&vh).unwrap());
        let (qb, gb) = (d.upload(&q).unwrap(), d.upload(&qg).unwrap());
        let (mut scratch, mut y) = (zeros(&d, rows * nh * ctx_stride), zeros(&d, rows * nh * hd));
        attention_launches(
            &d,
            Some(rows),
            &qb,
            &kc,
            &vc,
            &gb,
            &mut scratch,
            &mut y,
            (hd, nh, nkv, n_ctx, ctx_stride),
            scale,
        );
        let got = d.read::<f32>(&y).unwrap();
        for r in 0..rows {
            let want = attention::attention_reference(
                &q[r * nh * hd..(r + 1) * nh * hd],
                &kh,
                &vh,
                &qg[r * nh * 2 * hd..(r + 1) * nh * 2 * hd],
                hd,
                nh,
                nkv,
                n_ctx + r,
                2 * hd,
                hd,
                scale,
            );
            assert_eq!(
                bits(&got[r * nh * hd..(r + 1) * nh * hd]),
                bits(&want),
                "head_dim={hd} heads={nh}/{nkv} n_ctx={n_ctx} row {r} of {rows}"
            );
        }
    }
}
