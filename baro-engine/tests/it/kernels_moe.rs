//! Host tests of the MoE kernels: the router (softmax, top-k with the lower-id tie-break,
//! renormalisation), SwiGLU, the top-k-order combine with the gated shared expert, and one
//! whole routed block (router → Q4_K gate/up and Q5_K down expert matvecs by id → SwiGLU →
//! combine) against the composition of the plain-Rust references; plus the verifier.

use crate::common;

use common::dev;

use baro::dsl::mathlib;
use baro::reference::{bits, Rng};
use baro_dsl::runtime::{Buffer, Device, DeviceArg as A};
use baro_dsl::verify::verify_kernel;
use baro_dsl::{Kernel, ScalarType};
use baro_engine::kernels::{matvec, moe, quant};
use baro_engine::model::{quantize::quantize, TensorType};

fn run(d: &Device, k: &Kernel, args: &mut [A<'_>]) {
    let c = d.compile(k).unwrap_or_else(|e| panic!("{}: {e}", k.name));
    d.run(&c, args).unwrap_or_else(|e| panic!("{}: {e}", k.name));
}

fn zeros(d: &Device, n: usize) -> Buffer {
    d.alloc(ScalarType::F32, n).expect("alloc")
}

fn router(d: &Device, logits: &[f32], top_k: usize) -> (Vec<f32>, Vec<u32>, Vec<f32>) {
    let n = logits.len();
    let lb = d.upload(logits).unwrap();
    let (mut probs, mut w) = (zeros(d, n), zeros(d, top_k));
    let mut ids = d.alloc(ScalarType::U32, top_k).unwrap();
    run(
        d,
        &moe::router_topk(),
        &mut [
            A::buf(&lb),
            A::buf_mut(&mut probs),
            A::buf_mut(&mut ids),
            A::buf_mut(&mut w),
            A::from(n),
            A::from(top_k),
        ],
    );
    (d.read(&probs).unwrap(), d.read(&ids).unwrap(), d.read(&w).unwrap())
}

#[test]
fn router_matches_reference_and_breaks_ties_low() {
    let d = dev();
    let mut rng = Rng::new(31);
    for (n, k) in [(8usize, 2usize), (33, 5), (256, 8)] {
        let logits: Vec<f32> = rng.vec_f32(n).iter().map(|v| v * 4.0).collect();
        let (p, ids, w) = router(&d, &logits, k);
        let (rp, rids, rw) = moe::router_reference(&logits, k);
        assert_eq!((bits(&p), &ids, bits(&w)), (bits(&rp), &rids, bits(&rw)), "n={n} k={k}");
        // The picks are the k largest logits, in descending order, weights sum to ~1.
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]).then(a.cmp(&b)));
        assert_eq!(ids, order[..k].iter().map(|&e| e as u32).collect::<Vec<_>>());
        assert!((w.iter().sum::<f32>() - 1.0).abs() < 1e-6);
    }
    // Ties: equal logits at ids 6, 2, 9 and 4 (the max); the lower id wins among equals.
    let mut logits = vec![-1.0f32; 12];
    for e in [6, 2, 9] {
        logits[e] = 0.5;
    }
    logits[4] = 0.75;
    let (_, ids, w) = router(&d, &logits, 3);
    assert_eq!(ids, vec![4, 2, 6]);
    assert_eq!(w[1].to_bits(), w[2].to_bits());
}

/// `router_topk_gate` (and its derived rows sibling) is `router_topk` plus the one-row
/// `matvec_f32` of the shared expert's gate, byte for byte: probs, ids, weights and the gate
/// logit, at the model's widths and ragged ones, NaN logits included.
#[test]
fn router_with_the_gate_is_the_router_and_the_gate_matvec() {
    let d = dev();
    let mut rng = Rng::new(34);
    let (one, rows_k) = (
        d.compile(&moe::router_topk_gate()).unwrap_or_else(|e| panic!("{e}")),
        d.compile(&moe::router_topk_gate_rows()).unwrap_or_else(|e| panic!("{e}")),
    );
    let mut cases = 0;
    for (n, top_k, k) in [(256usize, 8usize, 2048usize), (33, 5, 70), (8, 2, 1)] {
        for rows in [1usize, 3] {
            let mut logits: Vec<f32> = rng.vec_f32(rows * n).iter().map(|v| v * 4.0).collect();
            if n == 33 {
                logits[7] = f32::NAN;
            }
            let (x, gw) = (rng.vec_f32(rows * k), rng.vec_f32(k));
            let (mut want_p, mut want_ids, mut want_w, mut want_g) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for r in 0..rows {
                let (p, ids, w) = moe::router_reference(&logits[r * n..][..n], top_k);
                want_p.extend(p);
                want_ids.extend(ids);
                want_w.extend(w);
                want_g.extend(matvec::matvec_reference(&x[r * k..][..k], &gw, &[0], k, 1, 0));
            }
            let (lb, xb, gb) = (d.upload(&logits).unwrap(), d.upload(&x).unwrap(), d.upload(&gw).unwrap());
            for (kern, is_rows) in [(&one, false), (&rows_k, true)] {
                if !is_rows && rows > 1 {
                    continue;
                }
                let (mut probs, mut w, mut g) = (zeros(&d, rows * n), zeros(&d, rows * top_k), zeros(&d, rows));
                let mut ids = d.alloc(ScalarType::U32, rows * top_k).unwrap();
                let mut args = vec![
                    A::buf(&lb),
                    A::buf(&xb),
                    A::buf(&gb),
                    A::buf_mut(&mut probs),
                    A::buf_mut(&mut ids),
                    A::buf_mut(&mut w),
                    A::buf_mut(&mut g),
                    A::from(n),
                    A::from(top_k),
                    A::from(k),
                ];
                if is_rows {
                    args.push(A::from(rows));
                }
                d.run(kern, &mut args).unwrap_or_else(|e| panic!("{e}"));
                let at = format!("{} n={n} top_k={top_k} k={k} rows={rows}", kern.name());
                assert_eq!(bits(&d.read::<f32>(&probs).unwrap()), bits(&want_p), "{at}: probs");
                assert_eq!(d.read::<u32>(&ids).unwrap(), want_ids, "{at}: ids");
                assert_eq!(bits(&d.read::<f32>(&w).unwrap()), bits(&want_w), "{at}: weights");
                assert_eq!(bits(&d.read::<f32>(&g).unwrap()), bits(&want_g), "{at}: gate logit");
                cases += 1;
            }
        }
    }
    assert_eq!(cases, 3 * 3);
}

#[test]
fn swiglu_and_combine_match_reference() {
    let d = dev();
    let mut rng = Rng::new(32);
    let (dim, k) = (1001usize, 3usize);
    // Slot s's fused projections: gate at gu[s · 2·dim ..], up at gu[s · 2·dim + dim ..].
    let gu = rng.vec_f32(k * 2 * dim);
    let gub = d.upload(&gu).unwrap();
    let mut h = zeros(&d, k * dim);
    run(&d, &moe::swiglu_pairs(), &mut [A::buf(&gub), A::buf_mut(&mut h), A::from(dim), A::from(k)]);
    let want: Vec<f32> = (0..k * dim)
        .map(|i| mathlib::silu(gu[(i / dim) * 2 * dim + i % dim]) * gu[(i / dim) * 2 * dim + dim + i % dim])
        .collect();
    assert_eq!(bits(&d.read::<f32>(&h).unwrap()), bits(&want));

    let (ye, w, sh) = (rng.vec_f32(k * dim), vec![0.5f32, 0.3, 0.2], rng.vec_f32(dim));
    let sl = [0.7f32];
    let (yb, wb, sb, lb) =
        (d.upload(&ye).unwrap(), d.upload(&w).unwrap(), d.upload(&sh).unwrap(), d.upload(&sl).unwrap());
    let mut y = zeros(&d, dim);
    run(
        &d,
        &moe::moe_combine(),
        &mut [A::buf(&yb), A::buf(&wb), A::buf(&sb), A::buf(&lb), A::buf_mut(&mut y), A::from(dim), A::from(k)],
    );
    assert_eq!(bits(&d.read::<f32>(&y).unwrap()), bits(&moe::combine_reference(&ye, &w, &sh, 0.7, dim)));
}

/// One routed MoE block at small ragged size: 6 experts of (ffn 96 × hidden 512) Q4_K
/// gate/up, (hidden 256 × ffn 256) Q5_K down, top-3, a Q8_0 shared expert and an f32 gate.
/// The kernels run gate and up as one fused matrix per expert (the engine's layout); the
/// references run them apart.
#[test]
fn routed_block_composes() {
    let d = dev();
    let mut rng = Rng::new(33);
    let (hidden, ffn, n_exp, top_k) = (512usize, 256usize, 6usize, 3usize);
    let x = rng.vec_f32(hidden);
    let q = |ty, n: usize, rng: &mut Rng| quantize(ty, &rng.vec_f32(n)).expect("quantizable");
    let (wr, wg, wu, wd) = (
        rng.vec_f32(n_exp * hidden),
        q(TensorType::Q4_K, n_exp * ffn * hidden, &mut rng),
        q(TensorType::Q4_K, n_exp * ffn * hidden, &mut rng),
        q(TensorType::Q5_K, n_exp * hidden * ffn, &mut rng),
    );
    let (sg, su, sd, sgate) = (
        q(TensorType::Q8_0, ffn * hidden, &mut rng),
        q(TensorType::Q8_0, ffn * hidden, &mut rng),
        q(TensorType::Q8_0, hidden * ffn, &mut rng),
        rng.vec_f32(hidden),
    );
    let xb = d.upload(&x).unwrap();
    let one = d.upload(&[0u32]).unwrap();
    let mv =
        |k: &Kernel, xin: &Buffer, w: &[u8], ids: &Buffer, n_slots: usize, kk: usize, n: usize, xs: usize| -> Buffer {
            let wb = d.upload(w).unwrap();
            let mut y = zeros(&d, n_slots * n);
            run(
                &d,
                k,
                &mut [
                    A::buf(xin),
                    A::buf(&wb),
                    A::buf(ids),
                    A::buf_mut(&mut y),
                    A::from(kk),
                    A::from(n),
                    A::from(xs),
                    A::from(n_slots),
                ],
            );
            y
        };
    // Router logits (f32 matvec), then top-k.
    let wrb = d.upload(&wr).unwrap();
    let mut logits = zeros(&d, n_exp);
    run(
        &d,
        &matvec::matvec_f32(),
        &mut [
            A::buf(&xb),
            A::buf(&wrb),
            A::buf(&one),
            A::buf_mut(&mut logits),
            A::from(hidden),
            A::from(n_exp),
            A::from(0usize),
            A::from(1usize),
        ],
    );
    let logits_h: Vec<f32> = d.read(&logits).unwrap();
    let (_, ids, weights) = router(&d, &logits_h, top_k);
    let (idb, wb) = (d.upload(&ids).unwrap(), d.upload(&weights).unwrap());
    // Experts by id (gate and up fused per expert), then the shared expert and its gate.
    let fuse = |g: &[u8], u: &[u8], n_mats: usize| -> Vec<u8> {
        let per = g.len() / n_mats;
        (0..n_mats).flat_map(|e| g[e * per..(e + 1) * per].iter().chain(&u[e * per..(e + 1) * per]).copied()).collect()
    };
    let gu = mv(&quant::matvec_q4_k(), &xb, &fuse(&wg, &wu, n_exp), &idb, top_k, hidden, 2 * ffn, 0);
    let mut h = zeros(&d, top_k * ffn);
    run(&d, &moe::swiglu_pairs(), &mut [A::buf(&gu), A::buf_mut(&mut h), A::from(ffn), A::from(top_k)]);
    let ye = mv(&quant::matvec_q5_k(), &h, &wd, &idb, top_k, ffn, hidden, ffn);
    let sguv = mv(&quant::matvec_q8_0(), &xb, &fuse(&sg, &su, 1), &one, 1, hidden, 2 * ffn, 0);
    let mut sh = zeros(&d, ffn);
    run(&d, &moe::swiglu_pairs(), &mut [A::buf(&sguv), A::buf_mut(&mut sh), A::from(ffn), A::from(1usize)]);
    let shy = mv(&quant::matvec_q8_0(), &sh, &sd, &one, 1, ffn, hidden, 0);
    let sgb = d.upload(&sgate).unwrap();
    let mut sl = zeros(&d, 1);
    run(
        &d,
        &matvec::matvec_f32(),
        &mut [
            A::buf(&xb),
            A::buf(&sgb),
            A::buf(&one),
            A::buf_mut(&mut sl),
            A::from(hidden),
            A::from(1usize),
            A::from(0usize),
            A::from(1usize),
        ],
    );
    let mut y = zeros(&d, hidden);
    run(
        &d,
        &moe::moe_combine(),
        &mut [A::buf(&ye), A::buf(&wb), A::buf(&shy), A::buf(&sl), A::buf_mut(&mut y), A::from(hidden), A::from(top_k)],
    );

    // The same block from the references.
    let r_logits = matvec::matvec_reference(&x, &wr, &[0], hidden, n_exp, 0);
    assert_eq!(bits(&logits_h), bits(&r_logits));
    let (_, r_ids, r_w) = moe::router_reference(&r_logits, top_k);
    let rq = |ty, x: &[f32], w: &[u8], ids: &[u32], kk, n, xs| quant::matvec_quant_reference(ty, x, w, ids, kk, n, xs);
    let (rg, ru) =
        (rq(TensorType::Q4_K, &x, &wg, &r_ids, hidden, ffn, 0), rq(TensorType::Q4_K, &x, &wu, &r_ids, hidden, ffn, 0));
    let rh: Vec<f32> = rg.iter().zip(&ru).map(|(&a, &b)| mathlib::silu(a) * b).collect();
    let rye = rq(TensorType::Q5_K, &rh, &wd, &r_ids, ffn, hidden, ffn);
    let (rsg, rsu) =
        (rq(TensorType::Q8_0, &x, &sg, &[0], hidden, ffn, 0), rq(TensorType::Q8_0, &x, &su, &[0], hidden, ffn, 0));
    let rsh: Vec<f32> = rsg.iter().zip(&rsu).map(|(&a, &b)| mathlib::silu(a) * b).collect();
    let rshy = rq(TensorType::Q8_0, &rsh, &sd, &[0], ffn, hidden, 0);
    let rsl = matvec::matvec_reference(&x, &sgate, &[0], hidden, 1, 0);
    let want = moe::combine_reference(&rye, &r_w, &rshy, rsl[0], hidden);
    assert_eq!(bits(&d.read::<f32>(&y).unwrap()), bits(&want));
    assert!(want.iter().any(|&v| v != 0.0));
}

/// `moe_scatter_tiles` (the q8 mode's grouping) against `sort_tiles_reference`: each expert's
/// group starts on a multiple of the tile, padding slots hold pair 0 and the group's expert,
/// an expert with no pair takes no slot, a pair naming no expert (a NaN router's id) takes none.
#[test]
fn moe_scatter_tiles_pads_groups_to_whole_tiles() {
    let d = dev();
    let mut rng = Rng::new(8);
    let n_experts = 6;
    for (n_pairs, tile) in [(1usize, 8usize), (27, 8), (64, 8), (27, 1)] {
        let mut ids: Vec<u32> = (0..n_pairs).map(|_| [0u32, 2, 3, 5, 5][rng.below(5) as usize]).collect();
        if n_pairs > 3 {
            ids[3] = n_experts as u32; // names no expert
        }
        let ib = d.upload(&ids).unwrap();
        let mut counts = d.alloc(ScalarType::U32, n_experts).unwrap();
        run(&d, &moe::moe_count(), &mut [A::buf(&ib), A::buf_mut(&mut counts), A::from(n_pairs), A::from(n_experts)]);
        let (want_pair_of, want_slot_of, want_sorted) = moe::sort_tiles_reference(&ids, n_experts, tile);
        let cap = n_pairs + (tile - 1) * n_experts;
        let (mut pair_of, mut slot_of, mut sorted, mut n_slots) = (
            d.upload(&vec![u32::MAX; cap]).unwrap(),
            d.upload(&vec![0u32; n_pairs]).unwrap(),
            d.upload(&vec![u32::MAX; cap]).unwrap(),
            d.alloc(ScalarType::U32, 1).unwrap(),
        );
        run(
            &d,
            &moe::moe_scatter_tiles(),
            &mut [
                A::buf(&ib),
                A::buf(&counts),
                A::buf_mut(&mut pair_of),
                A::buf_mut(&mut slot_of),
                A::buf_mut(&mut sorted),
                A::buf_mut(&mut n_slots),
                A::from(n_pairs),
                A::from(n_experts),
                A::from(tile),
            ],
        );
        let slots = d.read::<u32>(&n_slots).unwrap()[0] as usize;
        assert_eq!(slots, want_pair_of.len(), "pairs {n_pairs} tile {tile}: slot count");
        assert_eq!(slots % tile, 0);
        assert_eq!(d.read::<u32>(&pair_of).unwrap()[..slots], want_pair_of[..], "pairs {n_pairs} tile {tile}: pair_of");
        assert_eq!(
            d.read::<u32>(&sorted).unwrap()[..slots],
            want_sorted[..],
            "pairs {n_pairs} tile {tile}: sorted_ids"
        );
        assert_eq!(d.read::<u32>(&slot_of).unwrap(), want_slot_of, "pairs {n_pairs} tile {tile}: slot_of");
        // Every tile holds one expert.
        assert!(want_sorted.chunks(tile).all(|t| t.iter().all(|&e| e == t[0])));
    }
}

#[test]
fn moe_kernels_verify() {
    for k in [moe::router_topk(), moe::moe_combine(), moe::swiglu_pairs()] {
        let t = std::time::Instant::now();
        let proof = verify_kernel(&k).unwrap_or_else(|e| panic!("{}: {e:?}", k.name));
        println!("{}: {} shapes, {} regions, {:?}", k.name, proof.shapes, proof.regions_checked, t.elapsed());
    }
}

/// The device greedy pick (`kernels::pick`, two launches) against `sampling::greedy` on the
/// host: the same id, including ties within and across chunks, ±0, all -inf, and the same
/// first NaN / first +inf the host reports as errors.
#[test]
fn greedy_pick_on_the_device_is_the_hosts() {
    use baro_engine::kernels::pick;
    use baro_engine::sampling::{greedy, SampleError};
    let d = dev();
    let (k1, k2) = (pick::greedy_chunks(), pick::greedy_pick());
    let device_pick = |logits: &[f32]| -> Result<u32, SampleError> {
        let n = logits.len();
        let c = pick::pick_chunks(n);
        let lb = d.upload(logits).unwrap();
        let mut best = zeros(&d, c);
        let (mut at, mut nan, mut inf) = (
            d.alloc(ScalarType::U32, c).unwrap(),
            d.alloc(ScalarType::U32, c).unwrap(),
            d.alloc(ScalarType::U32, c).unwrap(),
        );
        let mut out = d.alloc(ScalarType::U32, 4).unwrap();
        run(
            &d,
            &k1,
            &mut [
                A::buf(&lb),
                A::buf_mut(&mut best),
                A::buf_mut(&mut at),
                A::buf_mut(&mut nan),
                A::buf_mut(&mut inf),
                A::from(n),
            ],
        );
        run(
            &d,
            &k2,
            &mut [A::buf(&best), A::buf(&at), A::buf(&nan), A::buf(&inf), A::buf_mut(&mut out), A::from(c), A::from(n)],
        );
        let p: Vec<u32> = d.read(&out).unwrap();
        if (p[1] as usize) < n {
            return Err(SampleError::NaN { index: p[1] as usize });
        }
        if (p[2] as usize) < n {
            return Err(SampleError::PositiveInfinity { index: p[2] as usize });
        }
        if p[3] != 0 {
            return Err(SampleError::AllMasked { n });
        }
        Ok(p[0])
    };
    let mut rng = Rng::new(77);
    let mut cases: Vec<Vec<f32>> = Vec::new();
    for n in [1usize, 31, 1024, 1025, 9000, 20_000] {
        cases.push(rng.vec_f32(n));
        // Coarse values: many ties, inside one chunk and across chunks.
        cases.push(rng.vec_f32(n).iter().map(|v| (v * 3.0).round()).collect());
    }
    let mut zeros_mixed = vec![f32::NEG_INFINITY; 5000];
    zeros_mixed[3000] = -0.0;
    zeros_mixed[4500] = 0.0;
    zeros_mixed[1200] = -0.0;
    cases.push(zeros_mixed);
    cases.push(vec![f32::NEG_INFINITY; 3000]);
    let mut late_max = vec![1.0f32; 8193];
    late_max[8192] = 2.0;
    cases.push(late_max);
    let mut nan = rng.vec_f32(5000);
    nan[4000] = f32::NAN;
    nan[2100] = f32::NAN;
    nan[100] = f32::INFINITY;
    cases.push(nan);
    let mut inf = rng.vec_f32(5000);
    inf[3333] = f32::INFINITY;
    inf[4444] = f32::INFINITY;
    cases.push(inf);
    let mut all_nan = vec![f32::NAN; 2000];
    all_nan[0] = f32::NAN;
    cases.push(all_nan);
    for (i, logits) in cases.iter().enumerate() {
        let want = greedy(logits).map_err(|e| e.to_string());
        let got = device_pick(logits).map_err(|e| e.to_string());
        assert_eq!(got, want, "case {i} (n = {})", logits.len());
    }
    // The ties were real: the coarse cases hold repeated maxima.
    let coarse = &cases[11];
    let m = coarse.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
    assert!(coarse.iter().filter(|&&v| v == m).count() > 1);
}
