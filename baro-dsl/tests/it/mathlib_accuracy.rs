//! Accuracy of baro's math twins against the correctly rounded f32 of the f64 `std` function
//! (the numbers stated in `mathlib`'s doc comments come from here), and the NaN and special
//! value rules. Must never loosen a bound without changing the doc comment to match.

use baro_dsl::ir::MathFn;
use baro_dsl::mathlib;

/// Inputs: every 4096th f32 bit pattern (both signs), a dense sweep of [-110, 110], and
/// special values.
fn inputs() -> Vec<f32> {
    let mut v: Vec<f32> = (0..(1u64 << 32)).step_by(4096).map(|b| f32::from_bits(b as u32)).collect();
    let n = 400_000;
    v.extend((0..n).map(|i| -110.0 + 220.0 * (i as f32) / (n as f32)));
    v.extend([
        0.0,
        -0.0,
        1.0,
        -1.0,
        f32::MIN_POSITIVE,
        1e-45,
        -1e-45,
        f32::MAX,
        f32::MIN,
        f32::INFINITY,
        f32::NEG_INFINITY,
    ]);
    v.extend([88.72283, 88.72284, -103.9, -104.0, -87.3, 20.0, 20.000002, -17.0, 0.5, 2.0]);
    v
}

fn reference(func: MathFn, x: f32) -> f32 {
    let x = x as f64;
    let y = match func {
        MathFn::Exp => x.exp(),
        MathFn::Log => x.ln(),
        MathFn::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        MathFn::Silu => {
            if x == f64::NEG_INFINITY {
                -0.0
            } else {
                x / (1.0 + (-x).exp())
            }
        }
        MathFn::Softplus => {
            if x > 30.0 {
                x
            } else {
                x.exp().ln_1p()
            }
        }
        MathFn::Rsqrt => 1.0 / x.sqrt(),
    };
    y as f32
}

/// Distance in representable f32 values; NaN vs NaN is 0, NaN vs number is infinite.
fn ulps(a: f32, b: f32) -> u64 {
    if a.is_nan() || b.is_nan() {
        return if a.is_nan() && b.is_nan() { 0 } else { u64::MAX };
    }
    let key = |x: f32| {
        let b = x.to_bits() as i64;
        if b < 0x8000_0000 {
            b
        } else {
            0x8000_0000 - b
        }
    };
    (key(a) - key(b)).unsigned_abs()
}

/// Below this, e^x is subnormal and silu(x) = x·e^x/(1+e^x) inherits e^x's absolute error.
const SILU_SUBNORMAL: f32 = -87.33;

fn max_ulps(func: MathFn) -> (u64, f32) {
    let mut worst = (0, 0.0);
    for x in inputs() {
        if func == MathFn::Silu && x < SILU_SUBNORMAL {
            continue;
        }
        let d = ulps(mathlib::eval(func, x), reference(func, x));
        if d > worst.0 {
            worst = (d, x);
        }
    }
    println!("{}: max {} ulps at x = {:e}", func.name(), worst.0, worst.1);
    worst
}

#[test]
fn twins_are_within_stated_ulps() {
    let bounds = [
        (MathFn::Exp, 1),
        (MathFn::Log, 1),
        (MathFn::Sigmoid, 2),
        (MathFn::Silu, 3),
        (MathFn::Softplus, 3),
        (MathFn::Rsqrt, 1),
    ];
    let mut failures = Vec::new();
    for (f, bound) in bounds {
        let (d, x) = max_ulps(f);
        if d > bound {
            failures.push(format!("{}: {} ulps at {:e} (bound {})", f.name(), d, x, bound));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn silu_absolute_error_where_exp_is_subnormal() {
    let mut worst = 0.0f64;
    for x in inputs().into_iter().filter(|&x| x < SILU_SUBNORMAL && x.is_finite()) {
        worst = worst.max((mathlib::silu(x) as f64 - reference(MathFn::Silu, x) as f64).abs());
    }
    println!("silu below {SILU_SUBNORMAL}: max absolute error {worst:e}");
    assert!(worst < 1e-42, "{worst:e}");
}

#[test]
fn nan_inputs_come_back_unchanged() {
    for bits in [0x7fc0_0000u32, 0xffc0_0001, 0x7f80_0001, 0x7fff_ffff] {
        let x = f32::from_bits(bits);
        for f in MathFn::ALL {
            assert_eq!(mathlib::eval(f, x).to_bits(), bits, "{}", f.name());
        }
    }
}

#[test]
fn special_values() {
    assert_eq!(mathlib::exp(f32::INFINITY), f32::INFINITY);
    assert_eq!(mathlib::exp(f32::NEG_INFINITY).to_bits(), 0);
    assert_eq!(mathlib::exp(89.0), f32::INFINITY);
    assert_eq!(mathlib::exp(0.0), 1.0);
    assert_eq!(mathlib::log(0.0), f32::NEG_INFINITY);
    assert_eq!(mathlib::log(-0.0), f32::NEG_INFINITY);
    assert_eq!(mathlib::log(1.0), 0.0);
    assert_eq!(mathlib::log(f32::INFINITY), f32::INFINITY);
    assert_eq!(mathlib::log(-1.0).to_bits(), 0x7fc0_0000);
    assert_eq!(mathlib::rsqrt(-1.0).to_bits(), 0x7fc0_0000);
    assert_eq!(mathlib::rsqrt(0.0), f32::INFINITY);
    assert_eq!(mathlib::rsqrt(-0.0), f32::NEG_INFINITY);
    assert_eq!(mathlib::silu(f32::NEG_INFINITY).to_bits(), (-0.0f32).to_bits());
    assert_eq!(mathlib::silu(f32::INFINITY), f32::INFINITY);
    assert_eq!(mathlib::sigmoid(f32::NEG_INFINITY), 0.0);
    assert_eq!(mathlib::sigmoid(f32::INFINITY), 1.0);
    assert_eq!(mathlib::softplus(f32::NEG_INFINITY), 0.0);
    assert_eq!(mathlib::softplus(f32::INFINITY), f32::INFINITY);
    // exp of the smallest-subnormal neighbourhood
    assert_eq!(mathlib::exp(-103.28), (-103.28f64).exp() as f32);
}

/// The IR expansion uses only basic operations: no `Call` survives.
#[test]
fn expansion_leaves_no_calls() {
    use baro_dsl::ir::{Access, Buf, Expr, Kernel, ParamKind, ScalarType, Stmt};
    let mut k = Kernel::new("calls");
    let x = k.add_param("x", ParamKind::Buffer { elem: ScalarType::F32, access: Access::ReadWrite });
    k.grid = vec![Expr::index(1)];
    let v = Expr::load(Buf::Param(x), Expr::index(0));
    let nested = MathFn::ALL.into_iter().fold(v, |e, f| Expr::call(f, e));
    k.body = vec![Stmt::Store { buf: Buf::Param(x), index: Expr::index(0), value: nested }];
    let e = mathlib::expand_calls(&k);
    let Stmt::Store { value, .. } = &e.body[0] else { panic!("expected a store") };
    assert!(!value.any(&|x| matches!(x, Expr::Call { .. })));
    assert_eq!(e.type_of(value), Ok(ScalarType::F32));
}
