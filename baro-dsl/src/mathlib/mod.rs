//! baro's math functions (exp, log, sigmoid, silu, softplus, rsqrt), defined from IEEE basic
//! operations so that every target computes the same bits.
//!
//! Each function is written once (`algo`) over an abstract arithmetic and interpreted twice:
//! as plain Rust (the twins below: references for tests and the engine) and as IR
//! (`expand_calls`, which every lowering runs before it sees the kernel). This module must
//! never use an fma, a libm transcendental, or any operation a target may round differently.
//!
//! NaN rule (all functions): a NaN input is returned unchanged, bit for bit (by a select, so
//! no target's NaN propagation rule is involved). An invalid input (log or rsqrt of a
//! negative number) gives the canonical quiet NaN `0x7fc00000`.
//!
//! Accuracy is measured by `tests/it/mathlib_accuracy.rs` against the correctly rounded f32 of
//! the f64 `std` function, over ~1e6 inputs per function (a uniform-in-bits sweep of all
//! finite f32 plus a dense sweep of the interesting range and the special values).

mod algo;
mod eval;
mod expand;

pub use expand::{expand_call, expand_calls};

use eval::Eval;

/// e^x. Cephes-style: n = floor(x·log2e + 0.5), r = (x − n·ln2_hi) − n·ln2_lo, a degree-5
/// Horner polynomial, then scaling by 2^n in two exact-exponent steps. x > 88.72283 → +inf,
/// x < −104 → +0. Measured: at most 1 ulp from the correctly rounded result, subnormal
/// results included.
pub fn exp(x: f32) -> f32 {
    algo::exp(&Eval, x)
}

/// ln x. Exponent and mantissa split from the bits (subnormals scaled by 2^23 first), m
/// folded into [√½, √2), Cephes' degree-8 series. log(±0) = −inf, log(+inf) = +inf, log of a
/// negative number is NaN. Measured: at most 1 ulp.
pub fn log(x: f32) -> f32 {
    algo::log(&Eval, x)
}

/// With e = e^−|x|: 1 / (1 + e) for x ≥ 0, e / (1 + e) for x < 0 (so tiny results keep
/// their precision). Measured: at most 2 ulps.
pub fn sigmoid(x: f32) -> f32 {
    algo::sigmoid(&Eval, x)
}

/// x · sigmoid(x); silu(−inf) = −0. Measured: at most 3 ulps for x ≥ −87.33; below, where
/// e^x is subnormal, the absolute error stays under 1e-43.
pub fn silu(x: f32) -> f32 {
    algo::silu(&Eval, x)
}

/// ln(1 + e^x): x for x > 20, else log1p(e^x) computed as log(u)·(e / (u − 1)) with
/// u = 1 + e^x (Goldberg's trick, which stays accurate where 1 + e^x rounds; e^x itself when
/// u rounds to 1). Measured: at most 3 ulps.
pub fn softplus(x: f32) -> f32 {
    algo::softplus(&Eval, x)
}

/// 1 / sqrt(x) (two correctly rounded operations). Measured: at most 1 ulp.
pub fn rsqrt(x: f32) -> f32 {
    algo::rsqrt(&Eval, x)
}

/// The twin of a `MathFn`.
pub fn eval(func: crate::ir::MathFn, x: f32) -> f32 {
    use crate::ir::MathFn;
    match func {
        MathFn::Exp => exp(x),
        MathFn::Log => log(x),
        MathFn::Sigmoid => sigmoid(x),
        MathFn::Silu => silu(x),
        MathFn::Softplus => softplus(x),
        MathFn::Rsqrt => rsqrt(x),
    }
}
