//! Reductions on the host JIT follow their declared schedule bit for bit: a row dot under
//! lanes(32, butterfly|pairwise|seq), lanes(3, seq), chunked(16, seq), blocked(32, lanes(8,
//! butterfly)) and seq, against `Schedule::expand(k).eval(..)` over random inputs and ragged
//! lengths; and the order is real: the lane schedules differ from a naive sequential sum.

use crate::host_common;

use baro_dsl::ir::{Expr, Kernel, Reduce, ReduceOp, ScalarType as T};
use baro_dsl::runtime::Arg;
use baro_dsl::Schedule;
use half::bf16;
use host_common::*;
use proptest::prelude::*;

const SCHEDULES: [&str; 7] = [
    "lanes(32, butterfly)",
    "lanes(32, pairwise)",
    "lanes(32, seq)",
    "lanes(3, seq)",
    "chunked(16, seq)",
    "blocked(32, lanes(8, butterfly))",
    "seq",
];

/// `dot(x: &[f32], w: &[W], y: &mut [f32], k: usize)`, grid n: `y[o] = sum(i < k) x[i] * w[o*k+i]`.
fn row_dot(schedule: &Schedule, w_ty: T) -> Kernel {
    row_dot_op(schedule, w_ty, ReduceOp::Add)
}

/// `row_dot` as an `fma_sum` (`op` = `FmaSum`): each partial takes `x[i]·w[o·k + i]` in by fma.
fn row_dot_op(schedule: &Schedule, w_ty: T, op: ReduceOp) -> Kernel {
    let mut k =
        Kernel::new(format!("dot_{}_{}_{}", op.name(), w_ty, schedule.to_string().replace([' ', '(', ')', ','], "_")));
    let x = input(&mut k, "x", T::F32);
    let w = input(&mut k, "w", w_ty);
    let y = output(&mut k, "y", T::F32);
    let kk = scalar(&mut k, "k", T::INDEX);
    let n = scalar(&mut k, "n", T::INDEX);
    k.grid = vec![p(n)];
    let i = k.add_var("i", T::INDEX, false);
    let wi = ld(w, add(mul(Expr::GroupId(0), p(kk)), v(i)));
    let wi = if w_ty == T::F32 { wi } else { Expr::cast(T::F32, wi) };
    let body = mul(ld(x, v(i)), wi);
    let r = Reduce { op, ty: T::F32, schedule: schedule.clone(), var: i, len: p(kk), body };
    k.body = vec![st(y, Expr::GroupId(0), Expr::Reduce(Box::new(r)))];
    k
}

fn reference(s: &Schedule, x: &[f32], w: &[f32], k: usize, o: usize) -> f32 {
    s.expand(k as u64).eval(0.0f32, &|i| x[i as usize] * w[o * k + i as usize], &|a, b| a + b)
}

fn naive(x: &[f32], w: &[f32], k: usize, o: usize) -> f32 {
    (0..k).fold(0.0f32, |acc, i| acc + x[i] * w[o * k + i])
}

fn run(c: &baro_dsl::runtime::HostKernel, x: &[f32], w: Arg<'_>, k: usize, n: usize) -> Vec<f32> {
    let mut y = vec![f32::NAN; n];
    c.launch(&mut [Arg::buf(x), w, Arg::buf_mut(&mut y), Arg::from(k), Arg::from(n)]).unwrap();
    y
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn dot_matches_schedule_tree(k in 0usize..300, n in 1usize..5, seed in 1u64.., which in 0usize..SCHEDULES.len()) {
        let s: Schedule = SCHEDULES[which].parse().unwrap();
        let c = compile(&row_dot(&s, T::F32));
        let mut rng = Rng(seed);
        let (x, w) = (rng.vec_f32(k), rng.vec_f32(n * k));
        let y = run(&c, &x, Arg::buf(&w), k, n);
        for o in 0..n {
            prop_assert_eq!(y[o].to_bits(), reference(&s, &x, &w, k, o).to_bits(), "{} k={} o={}", s, k, o);
        }
    }

    #[test]
    fn bf16_weight_dot_matches_schedule_tree(k in 0usize..200, n in 1usize..4, seed in 1u64..) {
        let s: Schedule = "lanes(32, butterfly)".parse().unwrap();
        let c = compile(&row_dot(&s, T::BF16));
        let mut rng = Rng(seed);
        let x = rng.vec_f32(k);
        let w: Vec<bf16> = rng.vec_f32(n * k).into_iter().map(bf16::from_f32).collect();
        let w32: Vec<f32> = w.iter().map(|b| b.to_f32()).collect();
        let y = run(&c, &x, Arg::buf(&w), k, n);
        for o in 0..n {
            prop_assert_eq!(y[o].to_bits(), reference(&s, &x, &w32, k, o).to_bits());
        }
    }
}

#[test]
fn every_schedule_at_every_ragged_length_up_to_70() {
    let mut rng = Rng(42);
    for name in SCHEDULES {
        let s: Schedule = name.parse().unwrap();
        let c = compile(&row_dot(&s, T::F32));
        for k in 0..70 {
            let (x, w) = (rng.vec_f32(k), rng.vec_f32(2 * k));
            let y = run(&c, &x, Arg::buf(&w), k, 2);
            for o in 0..2 {
                assert_eq!(y[o].to_bits(), reference(&s, &x, &w, k, o).to_bits(), "{s} k={k} o={o}");
            }
        }
    }
}

/// Proof that the order is what runs: every non-sequential schedule disagrees with a naive
/// sequential sum on some inputs, while `seq` never does.
#[test]
fn lane_orders_differ_from_a_naive_sum() {
    let (k, n) = (257, 16);
    let mut rng = Rng(7);
    let (x, w) = (rng.vec_f32(k), rng.vec_f32(n * k));
    for name in SCHEDULES {
        let s: Schedule = name.parse().unwrap();
        let c = compile(&row_dot(&s, T::F32));
        for banned in ["fmuladd", "llvm.fma", " fast ", "reassoc", "contract"] {
            assert!(!c.llvm_ir().contains(banned), "{name}: `{banned}` in the IR");
        }
        let y = run(&c, &x, Arg::buf(&w), k, n);
        let differs = (0..n).filter(|&o| y[o].to_bits() != naive(&x, &w, k, o).to_bits()).count();
        if name == "seq" {
            assert_eq!(differs, 0, "seq must equal the naive sum");
        } else {
            assert!(differs > 0, "{name}: identical to a naive sum on all {n} rows");
        }
    }
}

/// max over lanes(32, butterfly): exact in any order; `max(-0, +0)` is +0.
#[test]
fn max_reduction_is_exact() {
    let s: Schedule = "lanes(32, butterfly)".parse().unwrap();
    let mut k = Kernel::new("rowmax");
    let x = input(&mut k, "x", T::F32);
    let y = output(&mut k, "y", T::F32);
    let len = scalar(&mut k, "k", T::INDEX);
    k.grid = vec![ix(1)];
    let i = k.add_var("i", T::INDEX, false);
    let r = Reduce { op: ReduceOp::Max, ty: T::F32, schedule: s, var: i, len: p(len), body: ld(x, v(i)) };
    k.body = vec![st(y, ix(0), Expr::Reduce(Box::new(r)))];
    let c = compile(&k);
    let mut rng = Rng(3);
    for len in [0usize, 1, 5, 33, 100] {
        let xs = rng.vec_f32(len);
        let mut out = [0f32];
        c.launch(&mut [Arg::buf(&xs), Arg::buf_mut(&mut out), Arg::from(len)]).unwrap();
        let expect = xs.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        assert_eq!(out[0].to_bits(), expect.to_bits(), "len {len}");
    }
    let zeros = [-0.0f32, 0.0, -0.0];
    let mut out = [1f32];
    c.launch(&mut [Arg::buf(&zeros), Arg::buf_mut(&mut out), Arg::from(3usize)]).unwrap();
    assert_eq!(out[0].to_bits(), 0, "max(-0, +0, -0) must be +0");
}

/// An `fma_sum` follows its declared tree with one rounding per element: the host gives
/// `Tree::eval_fused` with `f32::mul_add` bit for bit, for every schedule and ragged lengths,
/// and differs from the same schedule's plain sum (two roundings per element) on most rows.
#[test]
fn fused_sums_follow_their_tree_with_one_rounding_per_element() {
    let n = 8;
    for name in SCHEDULES {
        let s: Schedule = name.parse().unwrap();
        let fused = compile(&row_dot_op(&s, T::F32, ReduceOp::FmaSum));
        let ir = fused.llvm_ir();
        assert!(ir.contains("@llvm.fma.f32("), "{name}: no fma in\n{ir}");
        for banned in ["fmuladd", " fast ", "reassoc", "contract"] {
            assert!(!ir.contains(banned), "{name}: `{banned}` in the IR");
        }
        let plain = compile(&row_dot(&s, T::F32));
        let mut differs = 0;
        for (k, seed) in [(1, 3), (31, 5), (70, 7), (257, 11)] {
            let mut rng = Rng(seed);
            let (x, w) = (rng.vec_f32(k), rng.vec_f32(n * k));
            let y = run(&fused, &x, Arg::buf(&w), k, n);
            let y_plain = run(&plain, &x, Arg::buf(&w), k, n);
            let tree = s.expand(k as u64);
            for o in 0..n {
                let want =
                    tree.eval_fused(0.0f32, &|i, acc| x[i as usize].mul_add(w[o * k + i as usize], acc), &|a, b| a + b);
                assert_eq!(y[o].to_bits(), want.to_bits(), "{name} k={k} row {o}");
                assert_eq!(y_plain[o].to_bits(), reference(&s, &x, &w, k, o).to_bits(), "{name} k={k} row {o} (plain)");
                differs += usize::from(y[o].to_bits() != y_plain[o].to_bits());
            }
        }
        assert!(differs >= n, "{name}: the fused sum equals the plain one on all but {differs} rows");
    }
}
