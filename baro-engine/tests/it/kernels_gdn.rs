//! Host tests of the gated-delta-net decode kernels: the conv step over its ring (several
//! positions, so the ring wraps), the delta-rule step over several tokens (the state carries),
//! and the gated RMSNorm, byte for byte against their plain-Rust references; the recurrence
//! also against a naive f64 transcription of Transformers' `torch_recurrent_gated_delta_rule`;
//! plus the verifier on each kernel.

use crate::common;

use common::dev;

use baro::reference::{bits, Rng};
use baro_dsl::runtime::{Buffer, Device, DeviceArg as A};
use baro_dsl::verify::verify_kernel;
use baro_dsl::{Kernel, ScalarType};
use baro_engine::kernels::gdn;

fn run(d: &Device, k: &Kernel, args: &mut [A<'_>]) {
    let c = d.compile(k).unwrap_or_else(|e| panic!("{}: {e}", k.name));
    d.run(&c, args).unwrap_or_else(|e| panic!("{}: {e}", k.name));
}

fn zeros(d: &Device, n: usize) -> Buffer {
    d.alloc(ScalarType::F32, n).expect("alloc")
}

#[test]
fn conv_step_matches_reference_across_the_ring() {
    let d = dev();
    let mut rng = Rng::new(41);
    for (channels, kernel) in [(37usize, 4usize), (5, 2)] {
        let w = rng.vec_f32(channels * kernel);
        let wb = d.upload(&w).unwrap();
        let mut ring = zeros(&d, channels * (kernel - 1));
        let mut ring_h = vec![0.0f32; channels * (kernel - 1)];
        let mut inputs = Vec::new();
        for pos in 0..7 {
            let x = rng.vec_f32(channels);
            let xb = d.upload(&x).unwrap();
            let mut y = zeros(&d, channels);
            run(
                &d,
                &gdn::gdn_conv_step(),
                &mut [
                    A::buf(&xb),
                    A::buf(&wb),
                    A::buf_mut(&mut ring),
                    A::buf_mut(&mut y),
                    A::from(channels),
                    A::from(kernel),
                    A::from(pos),
                ],
            );
            let want = gdn::conv_step_reference(&x, &w, &mut ring_h, kernel, pos);
            assert_eq!(bits(&d.read::<f32>(&y).unwrap()), bits(&want), "channels={channels} K={kernel} pos={pos}");
            inputs.push(x);
            // The ring is the causal window: tap t reads the input of position pos − (K−1) + t (zero before 0).
            for c in 0..channels {
                let naive: f64 = (0..kernel)
                    .map(|t| {
                        let p = (pos + t) as i64 - (kernel as i64 - 1);
                        let v = if p < 0 { 0.0 } else { inputs[p as usize][c] };
                        f64::from(w[c * kernel + t]) * f64::from(v)
                    })
                    .sum();
                let silu = naive / (1.0 + (-naive).exp());
                assert!((silu - f64::from(want[c])).abs() < 1e-5, "pos {pos} channel {c}");
            }
        }
    }
}

/// Transformers' recurrent step in f64 (one value head), for the tolerance check.
#[allow(clippy::too_many_arguments)]
fn naive_step(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    b: f32,
    a: f32,
    ssm_a: f32,
    dt: f32,
    s: &mut [f64],
    dv: usize,
) -> Vec<f64> {
    let dk = q.len();
    let l2 = |x: &[f32]| {
        let n = (x.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>() + 1e-6).sqrt();
        x.iter().map(|&v| f64::from(v) / n).collect::<Vec<f64>>()
    };
    let (qn, kn) = (l2(q), l2(k));
    let qn: Vec<f64> = qn.iter().map(|v| v / (dk as f64).sqrt()).collect();
    let beta = 1.0 / (1.0 + (-f64::from(b)).exp());
    let x = f64::from(a) + f64::from(dt);
    let g = f64::from(ssm_a) * (if x > 20.0 { x } else { x.exp().ln_1p() });
    for e in s.iter_mut() {
        *e *= g.exp();
    }
    let mut o = vec![0.0; dv];
    for j in 0..dv {
        let kv: f64 = (0..dk).map(|i| s[i * dv + j] * kn[i]).sum();
        let delta = (f64::from(v[j]) - kv) * beta;
        for i in 0..dk {
            s[i * dv + j] += kn[i] * delta;
        }
        o[j] = (0..dk).map(|i| s[i * dv + j] * qn[i]).sum();
    }
    o
}

#[test]
fn delta_rule_step_matches_reference_over_tokens() {
    let d = dev();
    let mut rng = Rng::new(42);
    // (dk, dv, n_k_heads, n_v_heads, tiled)
    for (dk, dv, nk, nv, tiled) in
        [(16usize, 16usize, 2usize, 4usize, false), (37, 9, 2, 4, true), (128, 128, 1, 2, false)]
    {
        let q_scale = (1.0 / (dk as f64).sqrt()) as f32;
        let (ssm_a, dt): (Vec<f32>, Vec<f32>) =
            ((0..nv).map(|_| -(rng.f32().abs() * 4.0 + 0.1)).collect(), rng.vec_f32(nv));
        let (ab, db) = (d.upload(&ssm_a).unwrap(), d.upload(&dt).unwrap());
        let mut state = zeros(&d, nv * dk * dv);
        let mut state_h = vec![0.0f32; nv * dk * dv];
        let mut state_64 = vec![0.0f64; nv * dk * dv];
        for step in 0..4 {
            let qkv = rng.vec_f32(2 * nk * dk + nv * dv);
            let (bv, av) = (rng.vec_f32(nv), rng.vec_f32(nv));
            // beta's and alpha's logits in one buffer, as the fused projection writes them.
            let ba: Vec<f32> = bv.iter().chain(&av).copied().collect();
            let (qb, bab) = (d.upload(&qkv).unwrap(), d.upload(&ba).unwrap());
            let mut o = zeros(&d, nv * dv);
            run(
                &d,
                &gdn::gdn_step(),
                &mut [
                    A::buf(&qb),
                    A::buf(&bab),
                    A::buf(&ab),
                    A::buf(&db),
                    A::buf_mut(&mut state),
                    A::buf_mut(&mut o),
                    A::from(dk),
                    A::from(dv),
                    A::from(nk),
                    A::from(nv),
                    A::from(tiled),
                    A::from(q_scale),
                ],
            );
            let want =
                gdn::gdn_step_reference(&qkv, &bv, &av, &ssm_a, &dt, &mut state_h, dk, dv, nk, nv, tiled, q_scale);
            assert_eq!(bits(&d.read::<f32>(&o).unwrap()), bits(&want), "dk={dk} dv={dv} step {step}: o");
            assert_eq!(bits(&d.read::<f32>(&state).unwrap()), bits(&state_h), "dk={dk} dv={dv} step {step}: state");
            for h in 0..nv {
                let kh = if tiled { h % nk } else { h / (nv / nk) };
                let (q, k) = (&qkv[kh * dk..][..dk], &qkv[nk * dk + kh * dk..][..dk]);
                let v = &qkv[2 * nk * dk + h * dv..][..dv];
                let o64 = naive_step(
                    q,
                    k,
                    v,
                    bv[h],
                    av[h],
                    ssm_a[h],
                    dt[h],
                    &mut state_64[h * dk * dv..(h + 1) * dk * dv],
                    dv,
                );
                for j in 0..dv {
                    assert!(
                        (o64[j] - f64::from(want[h * dv + j])).abs() < 1e-4,
                        "dk={dk} step {step} head {h} j {j}: {} vs {}",
                        want[h * dv + j],
                        o64[j]
                    );
                }
            }
        }
    }
}

/// `gdn_step_ba` (the beta/alpha projection in the delta rule's launch) against
/// `matvec_f32`'s reference for b | a and then `gdn_step`'s reference, over steps (the state
/// carries), byte for byte; and `gdn_scan_ba_rows` over a chunk of rows against the m = 1
/// kernel run row by row (outputs and final state).
#[test]
fn delta_rule_with_the_ba_projection_is_the_matvec_then_the_step() {
    use baro_engine::kernels::matvec;
    let d = dev();
    let mut rng = Rng::new(44);
    let (one, rows_k) = (
        d.compile(&gdn::gdn_step_ba()).unwrap_or_else(|e| panic!("{e}")),
        d.compile(&gdn::gdn_scan_ba_rows()).unwrap_or_else(|e| panic!("{e}")),
    );
    // (dk, dv, n_k_heads, n_v_heads, tiled, k)
    for (dk, dv, nk, nv, tiled, k) in
        [(16usize, 16usize, 2usize, 4usize, false, 70usize), (37, 9, 2, 4, true, 33), (128, 128, 1, 2, true, 2048)]
    {
        let q_scale = (1.0 / (dk as f64).sqrt()) as f32;
        let (ssm_a, dt): (Vec<f32>, Vec<f32>) =
            ((0..nv).map(|_| -(rng.f32().abs() * 4.0 + 0.1)).collect(), rng.vec_f32(nv));
        let w_ba: Vec<f32> = rng.vec_f32(2 * nv * k).iter().map(|v| v * 0.1).collect();
        let (ab, db, wb) = (d.upload(&ssm_a).unwrap(), d.upload(&dt).unwrap(), d.upload(&w_ba).unwrap());
        let stride = 2 * nk * dk + nv * dv;
        let rows = 5;
        let (qkv, x) = (rng.vec_f32(rows * stride), rng.vec_f32(rows * k));
        // m = 1, row by row, against the references.
        let mut state = zeros(&d, nv * dk * dv);
        let mut state_h = vec![0.0f32; nv * dk * dv];
        let mut outs = Vec::new();
        for r in 0..rows {
            let (qr, xr) = (&qkv[r * stride..][..stride], &x[r * k..][..k]);
            let ba = matvec::matvec_reference(xr, &w_ba, &[0], k, 2 * nv, 0);
            let want = gdn::gdn_step_reference(
                qr,
                &ba[..nv],
                &ba[nv..],
                &ssm_a,
                &dt,
                &mut state_h,
                dk,
                dv,
                nk,
                nv,
                tiled,
                q_scale,
            );
            let (qb, xb) = (d.upload(qr).unwrap(), d.upload(xr).unwrap());
            let mut o = zeros(&d, nv * dv);
            d.run(
                &one,
                &mut [
                    A::buf(&qb),
                    A::buf(&xb),
                    A::buf(&wb),
                    A::buf(&ab),
                    A::buf(&db),
                    A::buf_mut(&mut state),
                    A::buf_mut(&mut o),
                    A::from(dk),
                    A::from(dv),
                    A::from(nk),
                    A::from(nv),
                    A::from(tiled),
                    A::from(q_scale),
                    A::from(k),
                ],
            )
            .unwrap_or_else(|e| panic!("{e}"));
            let got = d.read::<f32>(&o).unwrap();
            assert_eq!(bits(&got), bits(&want), "dk={dk} k={k} row {r}: o");
            assert_eq!(bits(&d.read::<f32>(&state).unwrap()), bits(&state_h), "dk={dk} k={k} row {r}: state");
            outs.extend(got);
        }
        // The rows kernel over the whole chunk from a zero state.
        let (qb, xb) = (d.upload(&qkv).unwrap(), d.upload(&x).unwrap());
        let (mut state_r, mut o) = (zeros(&d, nv * dk * dv), zeros(&d, rows * nv * dv));
        d.run(
            &rows_k,
            &mut [
                A::buf(&qb),
                A::buf(&xb),
                A::buf(&wb),
                A::buf(&ab),
                A::buf(&db),
                A::buf_mut(&mut state_r),
                A::buf_mut(&mut o),
                A::from(dk),
                A::from(dv),
                A::from(nk),
                A::from(nv),
                A::from(tiled),
                A::from(q_scale),
                A::from(k),
                A::from(rows),
            ],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(bits(&d.read::<f32>(&o).unwrap()), bits(&outs), "dk={dk} k={k}: rows kernel o");
        assert_eq!(bits(&d.read::<f32>(&state_r).unwrap()), bits(&state_h), "dk={dk} k={k}: rows kernel state");
    }
}

#[test]
fn gated_rmsnorm_matches_reference() {
    let d = dev();
    let mut rng = Rng::new(43);
    for (hd, nh) in [(128usize, 4usize), (37, 3), (1, 2)] {
        let (x, z, w) = (rng.vec_f32(hd * nh), rng.vec_f32(hd * nh), rng.vec_f32(hd));
        let (xb, zb, wb) = (d.upload(&x).unwrap(), d.upload(&z).unwrap(), d.upload(&w).unwrap());
        let mut y = zeros(&d, hd * nh);
        run(
            &d,
            &gdn::gated_rmsnorm(),
            &mut [
                A::buf(&xb),
                A::buf(&zb),
                A::buf(&wb),
                A::buf_mut(&mut y),
                A::from(hd),
                A::from(nh),
                A::from(1e-6f32),
            ],
        );
        assert_eq!(
            bits(&d.read::<f32>(&y).unwrap()),
            bits(&gdn::gated_rmsnorm_reference(&x, &z, &w, hd, 1e-6)),
            "head_dim={hd}"
        );
    }
}

#[test]
fn gdn_kernels_verify() {
    for k in [gdn::gdn_step(), gdn::gated_rmsnorm()] {
        let proof = verify_kernel(&k).unwrap_or_else(|e| panic!("{}: {e:?}", k.name));
        assert!(proof.regions_checked > 0, "{}: no lane region checked", k.name);
    }
    verify_kernel(&gdn::gdn_conv_step()).unwrap_or_else(|e| panic!("gdn_conv_step: {e:?}"));
}

/// `gdn_scan_rows` over a chunk of rows against the plain-Rust step reference run row by row,
/// byte for byte (every row's output and the final state): row counts across its 8-row blocks
/// of precomputed scalars, a state carried in from an earlier chunk, both head layouts.
#[test]
fn delta_rule_scan_over_rows_is_the_step_per_row() {
    let d = dev();
    let mut rng = Rng::new(43);
    // (dk, dv, n_k_heads, n_v_heads, tiled, rows)
    for (dk, dv, nk, nv, tiled, rows) in
        [(16usize, 16usize, 2usize, 4usize, false, 1usize), (37, 9, 2, 4, true, 70), (128, 40, 1, 2, false, 130)]
    {
        let q_scale = (1.0 / (dk as f64).sqrt()) as f32;
        let (ssm_a, dt): (Vec<f32>, Vec<f32>) =
            ((0..nv).map(|_| -(rng.f32().abs() * 4.0 + 0.1)).collect(), rng.vec_f32(nv));
        let (ab, db) = (d.upload(&ssm_a).unwrap(), d.upload(&dt).unwrap());
        let mut state_h: Vec<f32> = rng.vec_f32(nv * dk * dv).iter().map(|v| v * 0.1).collect();
        let mut state = d.upload(&state_h).unwrap();
        let stride = 2 * nk * dk + nv * dv;
        let qkv = rng.vec_f32(rows * stride);
        let ba = rng.vec_f32(rows * 2 * nv);
        let (qb, bab) = (d.upload(&qkv).unwrap(), d.upload(&ba).unwrap());
        let mut o = zeros(&d, rows * nv * dv);
        run(
            &d,
            &gdn::gdn_scan_rows(),
            &mut [
                A::buf(&qb),
                A::buf(&bab),
                A::buf(&ab),
                A::buf(&db),
                A::buf_mut(&mut state),
                A::buf_mut(&mut o),
                A::from(dk),
                A::from(dv),
                A::from(nk),
                A::from(nv),
                A::from(tiled),
                A::from(q_scale),
                A::from(rows),
            ],
        );
        let got = d.read::<f32>(&o).unwrap();
        for r in 0..rows {
            let (bv, av) = (&ba[r * 2 * nv..][..nv], &ba[r * 2 * nv + nv..][..nv]);
            let want = gdn::gdn_step_reference(
                &qkv[r * stride..][..stride],
                bv,
                av,
                &ssm_a,
                &dt,
                &mut state_h,
                dk,
                dv,
                nk,
                nv,
                tiled,
                q_scale,
            );
            assert_eq!(bits(&got[r * nv * dv..][..nv * dv]), bits(&want), "dk={dk} dv={dv} row {r} of {rows}: o");
        }
        assert_eq!(bits(&d.read::<f32>(&state).unwrap()), bits(&state_h), "dk={dk} dv={dv} rows={rows}: state");
    }
}

/// `gdn_conv_rows` over a chunk (rows read each other's x directly, the ring written once at the
/// end) against the step reference fed row by row, byte for byte: every row's output and the
/// ring after the chunk, for chunks shorter and longer than the ring, starting at positions
/// before and after the ring has filled, two chunks in a row so the second reads the first's ring.
#[test]
fn conv_over_rows_is_the_step_per_row() {
    let d = dev();
    let mut rng = Rng::new(44);
    for (channels, kernel) in [(70usize, 4usize), (5, 2), (130, 3)] {
        let w = rng.vec_f32(channels * kernel);
        let wb = d.upload(&w).unwrap();
        let mut ring = zeros(&d, channels * (kernel - 1));
        let mut ring_h = vec![0.0f32; channels * (kernel - 1)];
        let mut pos = 0;
        for rows in [2usize, 1, 9, 5] {
            let x = rng.vec_f32(rows * channels);
            let xb = d.upload(&x).unwrap();
            let mut y = zeros(&d, rows * channels);
            run(
                &d,
                &gdn::gdn_conv_rows(),
                &mut [
                    A::buf(&xb),
                    A::buf(&wb),
                    A::buf_mut(&mut ring),
                    A::buf_mut(&mut y),
                    A::from(channels),
                    A::from(kernel),
                    A::from(pos),
                    A::from(rows),
                ],
            );
            let got = d.read::<f32>(&y).unwrap();
            for r in 0..rows {
                let want = gdn::conv_step_reference(&x[r * channels..][..channels], &w, &mut ring_h, kernel, pos + r);
                assert_eq!(
                    bits(&got[r * channels..][..channels]),
                    bits(&want),
                    "channels={channels} K={kernel} pos={pos} row {r} of {rows}"
                );
            }
            assert_eq!(bits(&d.read::<f32>(&ring).unwrap()), bits(&ring_h), "channels={channels} K={kernel}: ring");
            pos += rows;
        }
    }
}
