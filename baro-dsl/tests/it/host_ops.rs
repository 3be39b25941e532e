//! Non-reduction code on the host JIT against plain Rust: integer ops (shifts, masks, i8/u8
//! loads, conversions, defined division by zero), f16 arithmetic, float min/max, shared
//! memory with a barrier, `For` with a step and `If`.

use crate::host_common;

use baro_dsl::ir::{BinOp, Buf, Expr, Kernel, ScalarType as T, Stmt, UnOp};
use baro_dsl::runtime::Arg;
use half::f16;
use host_common::*;
use proptest::prelude::*;

/// Q4-style unpack: `y[i] = ((b[i/2] >> 4*(i%2)) & 0xf) as i32 - 8) * s[i/2] as i32`.
fn nibbles() -> Kernel {
    let mut k = Kernel::new("nibbles");
    let b = input(&mut k, "b", T::U8);
    let s = input(&mut k, "s", T::I8);
    let y = output(&mut k, "y", T::I32);
    let n = scalar(&mut k, "n", T::INDEX);
    k.grid = vec![ix(1)];
    let body = par_for(&mut k, p(n), |i| {
        let byte = ld(b, bin(BinOp::Div, v(i), ix(2)));
        let shift = Expr::cast(T::U8, mul(bin(BinOp::Rem, v(i), ix(2)), ix(4)));
        let nib = bin(BinOp::And, bin(BinOp::Shr, byte, shift), c(T::U8, 0xf));
        let q = bin(BinOp::Sub, Expr::cast(T::I32, nib), c(T::I32, 8));
        vec![st(y, v(i), mul(q, Expr::cast(T::I32, ld(s, bin(BinOp::Div, v(i), ix(2))))))]
    });
    k.body = vec![body];
    k
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn nibble_unpack_matches_rust(bytes in proptest::collection::vec(any::<u8>(), 0..64), scales in proptest::collection::vec(any::<i8>(), 64)) {
        let n = bytes.len() * 2;
        let mut y = vec![0i32; n];
        compile(&nibbles()).launch(&mut [Arg::buf(&bytes), Arg::buf(&scales), Arg::buf_mut(&mut y), Arg::from(n)]).unwrap();
        for i in 0..n {
            let q = ((bytes[i / 2] >> (4 * (i % 2))) & 0xf) as i32 - 8;
            prop_assert_eq!(y[i], q * scales[i / 2] as i32);
        }
    }

    #[test]
    fn int_ops_match_wrapping_rust(a in proptest::collection::vec(any::<i32>(), 1..40), seed in any::<u64>()) {
        let mut rng = Rng(seed | 1);
        let b: Vec<i32> = a.iter().map(|_| match rng.next() % 4 { 0 => 0, 1 => -1, _ => rng.next() as i32 }).collect();
        let n = a.len();
        let ops = [BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div, BinOp::Rem, BinOp::Shl, BinOp::Shr, BinOp::And, BinOp::Xor, BinOp::Min];
        for op in ops {
            let mut k = Kernel::new(format!("i32_{}", op.name()));
            let x = input(&mut k, "a", T::I32);
            let yb = input(&mut k, "b", T::I32);
            let out = output(&mut k, "y", T::I32);
            let nn = scalar(&mut k, "n", T::INDEX);
            k.grid = vec![ix(1)];
            let body = par_for(&mut k, p(nn), |i| vec![st(out, v(i), bin(op, ld(x, v(i)), ld(yb, v(i))))]);
            k.body = vec![body];
            let mut y = vec![0i32; n];
            compile(&k).launch(&mut [Arg::buf(&a), Arg::buf(&b), Arg::buf_mut(&mut y), Arg::from(n)]).unwrap();
            for i in 0..n {
                let (l, r) = (a[i], b[i]);
                let expect = match op {
                    BinOp::Add => l.wrapping_add(r),
                    BinOp::Sub => l.wrapping_sub(r),
                    BinOp::Mul => l.wrapping_mul(r),
                    BinOp::Div => if r == 0 { 0 } else { l.wrapping_div(r) },
                    BinOp::Rem => if r == 0 { 0 } else { l.wrapping_rem(r) },
                    BinOp::Shl => l.wrapping_shl(r as u32),
                    BinOp::Shr => l.wrapping_shr(r as u32),
                    BinOp::And => l & r,
                    BinOp::Xor => l ^ r,
                    _ => l.min(r),
                };
                prop_assert_eq!(y[i], expect, "{} {} {}", l, op.name(), r);
            }
        }
    }

    #[test]
    fn f16_arithmetic_rounds_through_f32(a in proptest::collection::vec(any::<u16>(), 1..50), b in proptest::collection::vec(any::<u16>(), 50)) {
        let n = a.len();
        let a: Vec<f16> = a.into_iter().map(f16::from_bits).collect();
        let b: Vec<f16> = b.into_iter().map(f16::from_bits).collect();
        for op in [BinOp::Add, BinOp::Mul, BinOp::Div] {
            let mut k = Kernel::new(format!("f16_{}", op.name()));
            let x = input(&mut k, "a", T::F16);
            let yb = input(&mut k, "b", T::F16);
            let out = output(&mut k, "y", T::F16);
            let nn = scalar(&mut k, "n", T::INDEX);
            k.grid = vec![ix(1)];
            let body = par_for(&mut k, p(nn), |i| vec![st(out, v(i), bin(op, ld(x, v(i)), ld(yb, v(i))))]);
            k.body = vec![body];
            let mut y = vec![f16::ZERO; n];
            compile(&k).launch(&mut [Arg::buf(&a), Arg::buf(&b), Arg::buf_mut(&mut y), Arg::from(n)]).unwrap();
            for i in 0..n {
                let (l, r) = (a[i].to_f32(), b[i].to_f32());
                let f = match op { BinOp::Add => l + r, BinOp::Mul => l * r, _ => l / r };
                let e = f16::from_f32(f);
                prop_assert!(y[i].to_bits() == e.to_bits() || (y[i].is_nan() && e.is_nan()), "{} {} {}", l, op.name(), r);
            }
        }
    }
}

#[test]
fn float_min_max_and_sign_ops() {
    let a = [0.0f32, -0.0, 1.0, f32::NAN, 2.0, -3.0];
    let b = [-0.0f32, 0.0, f32::NAN, 1.0, 2.0, 3.0];
    let mut k = Kernel::new("minmax");
    let x = input(&mut k, "a", T::F32);
    let yb = input(&mut k, "b", T::F32);
    let out = output(&mut k, "y", T::F32);
    let nn = scalar(&mut k, "n", T::INDEX);
    k.grid = vec![ix(1)];
    let body = par_for(&mut k, p(nn), |i| {
        let (l, r) = (ld(x, v(i)), ld(yb, v(i)));
        vec![
            st(out, mul(v(i), ix(4)), bin(BinOp::Max, l.clone(), r.clone())),
            st(out, add(mul(v(i), ix(4)), ix(1)), bin(BinOp::Min, l.clone(), r)),
            st(out, add(mul(v(i), ix(4)), ix(2)), Expr::un(UnOp::Neg, l.clone())),
            st(out, add(mul(v(i), ix(4)), ix(3)), Expr::un(UnOp::Abs, l)),
        ]
    });
    k.body = vec![body];
    let mut y = vec![0f32; 24];
    compile(&k).launch(&mut [Arg::buf(&a), Arg::buf(&b), Arg::buf_mut(&mut y), Arg::from(6usize)]).unwrap();
    let max = |l: f32, r: f32| {
        if l.is_nan() {
            l
        } else if r.is_nan() {
            r
        } else if l > r {
            l
        } else if r > l {
            r
        } else {
            f32::from_bits(l.to_bits() & r.to_bits())
        }
    };
    let min = |l: f32, r: f32| {
        if l.is_nan() {
            l
        } else if r.is_nan() {
            r
        } else if l < r {
            l
        } else if r < l {
            r
        } else {
            f32::from_bits(l.to_bits() | r.to_bits())
        }
    };
    for i in 0..6 {
        let got: Vec<u32> = y[i * 4..i * 4 + 4].iter().map(|f| f.to_bits()).collect();
        let want = vec![max(a[i], b[i]).to_bits(), min(a[i], b[i]).to_bits(), (-a[i]).to_bits(), a[i].abs().to_bits()];
        assert_eq!(got, want, "a={} b={}", a[i], b[i]);
    }
    assert_eq!(y[0].to_bits(), 0, "max(+0, -0) is +0");
    assert_eq!(y[5].to_bits(), 0x8000_0000, "min(-0, +0) is -0");
}

/// Each workgroup of 64 copies its slice into a shared tile, waits at a barrier, and writes
/// the tile back reversed and doubled.
#[test]
fn shared_tile_with_barrier() {
    let mut k = Kernel::new("reverse_tiles");
    let x = input(&mut k, "x", T::F32);
    let y = output(&mut k, "y", T::F32);
    let groups = scalar(&mut k, "groups", T::INDEX);
    let tile = k.add_shared("tile", T::F32, 64);
    k.grid = vec![p(groups)];
    let base = mul(Expr::GroupId(0), ix(64));
    let fill = par_for(&mut k, ix(64), |i| {
        vec![Stmt::Store { buf: Buf::Shared(tile), index: v(i), value: ld(x, add(base.clone(), v(i))) }]
    });
    let drain = par_for(&mut k, ix(64), |i| {
        let t = Expr::load(Buf::Shared(tile), bin(BinOp::Sub, ix(63), v(i)));
        vec![st(y, add(base.clone(), v(i)), mul(t, Expr::f32(2.0)))]
    });
    k.body = vec![fill, Stmt::Barrier, drain];
    let xs = Rng(5).vec_f32(64 * 3);
    let mut ys = vec![0f32; 64 * 3];
    compile(&k).launch(&mut [Arg::buf(&xs), Arg::buf_mut(&mut ys), Arg::from(3usize)]).unwrap();
    for g in 0..3 {
        for i in 0..64 {
            assert_eq!(ys[g * 64 + i].to_bits(), (xs[g * 64 + 63 - i] * 2.0).to_bits());
        }
    }
}

/// `for j in (start..n).step_by(3) { if j % 2 == 0 { y[j] = x[j] + 1 } else { y[j] = -x[j] } }`
/// plus an integer count of the visited j (an exact integer accumulation).
#[test]
fn strided_for_with_if() {
    let mut k = Kernel::new("strided_if");
    let x = input(&mut k, "x", T::F32);
    let y = output(&mut k, "y", T::F32);
    let count = output(&mut k, "count", T::U32);
    let start = scalar(&mut k, "start", T::INDEX);
    let n = scalar(&mut k, "n", T::INDEX);
    k.grid = vec![ix(1)];
    let j = k.add_var("j", T::INDEX, false);
    let cnt = k.add_var("cnt", T::U32, true);
    k.body = vec![
        Stmt::Let { var: cnt, value: c(T::U32, 0) },
        Stmt::For {
            var: j,
            start: p(start),
            end: p(n),
            step: ix(3),
            body: vec![
                Stmt::If {
                    cond: bin(BinOp::Eq, bin(BinOp::Rem, v(j), ix(2)), ix(0)),
                    then_body: vec![st(y, v(j), add(ld(x, v(j)), Expr::f32(1.0)))],
                    else_body: vec![st(y, v(j), Expr::un(UnOp::Neg, ld(x, v(j))))],
                },
                Stmt::Assign { var: cnt, value: add(v(cnt), c(T::U32, 1)) },
            ],
        },
        Stmt::Store { buf: Buf::Param(count), index: ix(0), value: v(cnt) },
    ];
    let c = compile(&k);
    for (s, n) in [(0usize, 20usize), (2, 20), (5, 5), (7, 3), (1, 31)] {
        let xs = Rng(9).vec_f32(n.max(1));
        let mut ys = vec![0.5f32; n.max(1)];
        let mut cnt_out = [99u32];
        c.launch(&mut [Arg::buf(&xs), Arg::buf_mut(&mut ys), Arg::buf_mut(&mut cnt_out), Arg::from(s), Arg::from(n)])
            .unwrap();
        let mut want = vec![0.5f32; n.max(1)];
        let mut visits = 0;
        for jj in (s..n).step_by(3) {
            want[jj] = if jj % 2 == 0 { xs[jj] + 1.0 } else { -xs[jj] };
            visits += 1;
        }
        assert_eq!(bits(&ys), bits(&want), "start {s} n {n}");
        assert_eq!(cnt_out[0], visits);
    }
}

/// Every math function in one elementwise ParFor kernel, chained, against the twins.
#[test]
fn all_math_functions_in_one_kernel() {
    use baro_dsl::ir::MathFn;
    use baro_dsl::mathlib;
    let k = elementwise("math_chain", T::F32, T::F32, |e| {
        let s = Expr::call(MathFn::Silu, e.clone());
        let t = add(Expr::call(MathFn::Sigmoid, e.clone()), Expr::call(MathFn::Softplus, e.clone()));
        let u = Expr::call(MathFn::Log, Expr::call(MathFn::Exp, Expr::un(UnOp::Abs, e.clone())));
        add(add(s, t), mul(u, Expr::call(MathFn::Rsqrt, Expr::un(UnOp::Abs, e))))
    });
    let xs: Vec<f32> = Rng(11).vec_f32(5000).into_iter().map(|x| x * 10.0).collect();
    let mut ys = vec![0f32; xs.len()];
    compile(&k).launch(&mut [Arg::buf(&xs), Arg::buf_mut(&mut ys), Arg::from(xs.len())]).unwrap();
    for (i, &x) in xs.iter().enumerate() {
        let want = (mathlib::silu(x) + (mathlib::sigmoid(x) + mathlib::softplus(x)))
            + mathlib::log(mathlib::exp(x.abs())) * mathlib::rsqrt(x.abs());
        assert_eq!(ys[i].to_bits(), want.to_bits(), "x = {x}");
    }
}

#[test]
fn expression_lets_bind_their_values() {
    let k = baro_dsl::testkernels::expression_lets();
    let xs = Rng(11).vec_f32(37);
    let mut ys = vec![0f32; 37];
    compile(&k).launch(&mut [Arg::buf(&xs), Arg::buf_mut(&mut ys), Arg::from(37usize)]).unwrap();
    let want: Vec<u32> = xs
        .iter()
        .map(|&x| {
            let a = x * 2.0;
            let b = a + 1.0;
            (b * a - (-a) * 0.5).to_bits()
        })
        .collect();
    assert_eq!(bits(&ys), want);
}

/// `fma(a, b, c)` rounds once: the host gives `f32::mul_add` (IEEE fusedMultiplyAdd) bit for bit,
/// on inputs chosen so that one rounding and two differ, while `a * b + c` in the same kernel
/// stays a multiply then an add (no contraction).
#[test]
fn fma_rounds_once_and_a_multiply_add_twice() {
    let k = baro_dsl::testkernels::fma_and_mul_add(); // (a, b, c, y, z, n)
    let c = compile(&k);
    let ir = c.llvm_ir();
    assert_eq!(ir.matches("call float @llvm.fma.f32(").count(), 1, "one fma, the explicit one:\n{ir}");
    for banned in ["fmuladd", " fast ", "reassoc", "contract"] {
        assert!(!ir.contains(banned), "`{banned}` in the IR");
    }
    let p = |e: i32| 2f32.powi(e);
    // Inputs where the two roundings differ: `c = -(a·b)` rounded leaves fma the product's
    // rounding error and mul-then-add 0; a product that overflows f32 though the sum does not;
    // one below half the smallest subnormal; an exact zero whose sign only fma keeps.
    let mut cases: Vec<(f32, f32, f32)> = vec![
        (p(64), p(64), -p(127)),
        (p(-75), p(-75), p(-149)),
        (-1e-30, 1e-30, 0.0),
        (1.0 + p(-23), 1.0 - p(-23), -1.0),
    ];
    let mut rng = Rng(29);
    while cases.len() < 300 {
        let (a, b) = (rng.f32(), rng.f32());
        if a.mul_add(b, -(a * b)) != 0.0 {
            cases.push((a, b, -(a * b)));
        }
    }
    let differing = cases.len();
    // Any inputs: fma must still be `mul_add` where the two roundings agree.
    cases.extend((0..300).map(|_| (rng.f32(), rng.f32(), rng.f32())));
    let (a, b, cc): (Vec<f32>, Vec<f32>, Vec<f32>) =
        (cases.iter().map(|t| t.0).collect(), cases.iter().map(|t| t.1).collect(), cases.iter().map(|t| t.2).collect());
    let n = cases.len();
    let (mut y, mut z) = (vec![0f32; n], vec![0f32; n]);
    c.launch(&mut [
        Arg::buf(&a),
        Arg::buf(&b),
        Arg::buf(&cc),
        Arg::buf_mut(&mut y),
        Arg::buf_mut(&mut z),
        Arg::from(n),
    ])
    .unwrap();
    for i in 0..n {
        let (fused, split) = (a[i].mul_add(b[i], cc[i]), a[i] * b[i] + cc[i]);
        if i < differing {
            assert_ne!(fused.to_bits(), split.to_bits(), "case {i} was chosen for fma and mul+add to differ");
        }
        assert_eq!(y[i].to_bits(), fused.to_bits(), "fma({}, {}, {})", a[i], b[i], cc[i]);
        assert_eq!(z[i].to_bits(), split.to_bits(), "{} * {} + {}", a[i], b[i], cc[i]);
    }
    assert_eq!(
        y[..4].iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        [p(127).to_bits(), p(-148).to_bits(), (-0f32).to_bits(), (-p(-46)).to_bits()]
    );
    assert_eq!(
        z[..4].iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        [f32::INFINITY.to_bits(), p(-149).to_bits(), 0, 0]
    );
}
