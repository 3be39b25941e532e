//! Every example kernel run on the host JIT, against the hand-written plain-Rust reference
//! of its schedule (byte for byte), its rows sibling against T replays of the m=1 kernel
//! (byte for byte, ragged T), and a naive sequential sum (which must differ somewhere:
//! proof that the declared order is what runs).

#[path = "../../examples/matvec.rs"]
mod matvec;
#[path = "../../examples/matvec_half.rs"]
mod matvec_half;
#[path = "../../examples/matvec_wide.rs"]
mod matvec_wide;
#[path = "../../examples/q8_dot.rs"]
mod q8_dot;
#[path = "../../examples/rmsnorm.rs"]
mod rmsnorm;
#[path = "../../examples/softmax.rs"]
mod softmax;

use baro::dsl::runtime::{Arg, HostKernel, HostRuntime};
use baro::reference::{bits, sum_sequential, Rng};
use half::{bf16, f16};
use proptest::prelude::*;
use std::sync::{Arc, OnceLock};

fn runtime() -> &'static HostRuntime {
    static RT: OnceLock<HostRuntime> = OnceLock::new();
    RT.get_or_init(|| HostRuntime::new().expect("host runtime"))
}

fn compiled(k: baro::dsl::Kernel) -> Arc<HostKernel> {
    runtime().compile(&k).expect("compile")
}

fn config() -> ProptestConfig {
    ProptestConfig { cases: 12, failure_persistence: None, ..ProptestConfig::default() }
}

/// Runs a matvec-shaped pair (m=1 and rows) and checks reference and replay parity; returns
/// how many outputs of the m=1 run differ from a naive sequential sum.
#[allow(clippy::too_many_arguments)]
fn check_matvec_pair<W: baro::dsl::runtime::Element>(
    single: &HostKernel,
    batched: &HostKernel,
    x: &[f32],
    w: &[W],
    w32: &[f32],
    k: usize,
    n: usize,
    rows: usize,
    reference: fn(&[f32], &[f32], usize, usize) -> Vec<f32>,
) -> usize {
    let mut yb = vec![0.0f32; rows * n];
    batched
        .launch(&mut [Arg::buf(x), Arg::buf(w), Arg::buf_mut(&mut yb), Arg::from(k), Arg::from(n), Arg::from(rows)])
        .unwrap();
    let mut naive_differs = 0;
    for r in 0..rows {
        let xr = &x[r * k..(r + 1) * k];
        let mut y = vec![0.0f32; n];
        single.launch(&mut [Arg::buf(xr), Arg::buf(w), Arg::buf_mut(&mut y), Arg::from(k), Arg::from(n)]).unwrap();
        assert_eq!(bits(&y), bits(&reference(xr, w32, k, n)), "row {r}: host vs reference");
        assert_eq!(bits(&y), bits(&yb[r * n..(r + 1) * n]), "row {r}: rows sibling vs m=1 replay");
        naive_differs +=
            (0..n).filter(|&o| sum_sequential(k, |i| xr[i] * w32[o * k + i]).to_bits() != y[o].to_bits()).count();
    }
    naive_differs
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn matvec_f32(k in 1usize..300, n in 1usize..9, rows in 1usize..8, seed in any::<u64>()) {
        let mut rng = Rng::new(seed);
        let x = rng.vec_f32(rows * k);
        let w = rng.vec_f32(n * k);
        let (s, b) = (compiled(matvec::matvec()), compiled(matvec::matvec_rows()));
        check_matvec_pair(&s, &b, &x, &w, &w, k, n, rows, matvec::reference);
    }

    #[test]
    fn matvec_f16_and_bf16(k in 1usize..300, n in 1usize..9, rows in 1usize..8, seed in any::<u64>()) {
        let mut rng = Rng::new(seed);
        let x = rng.vec_f32(rows * k);
        let w = rng.vec_f32(n * k);
        let wh: Vec<f16> = w.iter().map(|&v| f16::from_f32(v)).collect();
        let wb: Vec<bf16> = w.iter().map(|&v| bf16::from_f32(v)).collect();
        let wh32: Vec<f32> = wh.iter().map(|v| v.to_f32()).collect();
        let wb32: Vec<f32> = wb.iter().map(|v| v.to_f32()).collect();
        let (s, b) = (compiled(matvec_half::matvec_f16()), compiled(matvec_half::matvec_f16_rows()));
        check_matvec_pair(&s, &b, &x, &wh, &wh32, k, n, rows, matvec::reference);
        let (s, b) = (compiled(matvec_half::matvec_bf16()), compiled(matvec_half::matvec_bf16_rows()));
        check_matvec_pair(&s, &b, &x, &wb, &wb32, k, n, rows, matvec::reference);
    }

    #[test]
    fn matvec_wide_f16_and_bf16(k in 1usize..1200, n in 1usize..5, rows in 1usize..5, seed in any::<u64>()) {
        let mut rng = Rng::new(seed);
        let x = rng.vec_f32(rows * k);
        let w = rng.vec_f32(n * k);
        let wh: Vec<f16> = w.iter().map(|&v| f16::from_f32(v)).collect();
        let wb: Vec<bf16> = w.iter().map(|&v| bf16::from_f32(v)).collect();
        let wh32: Vec<f32> = wh.iter().map(|v| v.to_f32()).collect();
        let wb32: Vec<f32> = wb.iter().map(|v| v.to_f32()).collect();
        let (s, b) = (compiled(matvec_wide::matvec_wide_f16()), compiled(matvec_wide::matvec_wide_f16_rows()));
        check_matvec_pair(&s, &b, &x, &wh, &wh32, k, n, rows, matvec_wide::reference);
        let (s, b) = (compiled(matvec_wide::matvec_wide_bf16()), compiled(matvec_wide::matvec_wide_bf16_rows()));
        check_matvec_pair(&s, &b, &x, &wb, &wb32, k, n, rows, matvec_wide::reference);
    }

    #[test]
    fn rmsnorm_both_variants(n in 1usize..400, rows in 1usize..7, seed in any::<u64>()) {
        let mut rng = Rng::new(seed);
        let x = rng.vec_f32(rows * n);
        let w = rng.vec_f32(n);
        let eps = 1e-6f32;
        for (zc, single, batched) in [(false, rmsnorm::rmsnorm(), rmsnorm::rmsnorm_rows()), (true, rmsnorm::rmsnorm_zc(), rmsnorm::rmsnorm_zc_rows())] {
            let (single, batched) = (compiled(single), compiled(batched));
            let mut yb = vec![0.0f32; rows * n];
            batched.launch(&mut [Arg::buf(&x), Arg::buf(&w), Arg::buf_mut(&mut yb), Arg::from(n), Arg::from(eps), Arg::from(rows)]).unwrap();
            for r in 0..rows {
                let xr = &x[r * n..(r + 1) * n];
                let mut y = vec![0.0f32; n];
                single.launch(&mut [Arg::buf(xr), Arg::buf(&w), Arg::buf_mut(&mut y), Arg::from(n), Arg::from(eps)]).unwrap();
                prop_assert_eq!(bits(&y), bits(&rmsnorm::reference(xr, &w, eps, zc)));
                prop_assert_eq!(bits(&y), bits(&yb[r * n..(r + 1) * n]));
            }
        }
    }

    #[test]
    fn softmax_rows(n in 1usize..400, rows in 1usize..7, seed in any::<u64>()) {
        let mut rng = Rng::new(seed);
        let x: Vec<f32> = rng.vec_f32(rows * n).iter().map(|v| v * 16.0).collect();
        let (single, batched) = (compiled(softmax::softmax()), compiled(softmax::softmax_rows()));
        let mut yb = vec![0.0f32; rows * n];
        batched.launch(&mut [Arg::buf(&x), Arg::buf_mut(&mut yb), Arg::from(n), Arg::from(rows)]).unwrap();
        for r in 0..rows {
            let xr = &x[r * n..(r + 1) * n];
            let mut y = vec![0.0f32; n];
            single.launch(&mut [Arg::buf(xr), Arg::buf_mut(&mut y), Arg::from(n)]).unwrap();
            prop_assert_eq!(bits(&y), bits(&softmax::reference(xr)));
            prop_assert_eq!(bits(&y), bits(&yb[r * n..(r + 1) * n]));
        }
    }

    #[test]
    fn q8_matvec(blocks in 1usize..40, n in 1usize..7, rows in 1usize..6, seed in any::<u64>()) {
        let k = blocks * 32;
        let mut rng = Rng::new(seed);
        let x = rng.vec_f32(rows * k);
        let q: Vec<i8> = (0..n * k).map(|_| rng.below(256) as u8 as i8).collect();
        let d: Vec<f16> = (0..n * blocks).map(|_| f16::from_f32(rng.f32() / 64.0)).collect();
        let (single, batched) = (compiled(q8_dot::q8_matvec()), compiled(q8_dot::q8_matvec_rows()));
        let mut yb = vec![0.0f32; rows * n];
        batched.launch(&mut [Arg::buf(&x), Arg::buf(&q), Arg::buf(&d), Arg::buf_mut(&mut yb), Arg::from(k), Arg::from(n), Arg::from(rows)]).unwrap();
        for r in 0..rows {
            let xr = &x[r * k..(r + 1) * k];
            let mut y = vec![0.0f32; n];
            single.launch(&mut [Arg::buf(xr), Arg::buf(&q), Arg::buf(&d), Arg::buf_mut(&mut y), Arg::from(k), Arg::from(n)]).unwrap();
            prop_assert_eq!(bits(&y), bits(&q8_dot::reference(xr, &q, &d, k, n)));
            prop_assert_eq!(bits(&y), bits(&yb[r * n..(r + 1) * n]));
        }
    }
}

/// The declared order is what runs: over many rows, the lanes-butterfly result must differ
/// from a naive sequential sum of the same products somewhere.
#[test]
fn declared_order_differs_from_naive_sum() {
    let (k, n, rows) = (1031, 16, 8);
    let mut rng = Rng::new(42);
    let x = rng.vec_f32(rows * k);
    let w = rng.vec_f32(n * k);
    let (s, b) = (compiled(matvec::matvec()), compiled(matvec::matvec_rows()));
    let differs = check_matvec_pair(&s, &b, &x, &w, &w, k, n, rows, matvec::reference);
    println!("naive sequential sum differs in {differs} of {} outputs", n * rows);
    assert!(differs > 0, "a lanes(32) butterfly never differed from a sequential sum over {} outputs", n * rows);
}
