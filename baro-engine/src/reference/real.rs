//! The float type the reference forward pass computes in: `f32` (the precision the engine and
//! transformers' fixtures use) or `f64` (a high-precision answer to measure the f32 one
//! against). Every operation here is one IEEE basic operation or one `std` (libm) function;
//! nothing here fuses or reorders arithmetic.

use std::fmt::Debug;
use std::ops::{Add, Div, Mul, Neg, Sub};

/// A float the reference computes in.
pub trait Real:
    Copy
    + Debug
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + Send
    + Sync
    + 'static
{
    const ZERO: Self;
    const ONE: Self;
    /// The name, for messages.
    const NAME: &'static str;

    fn from_f32(x: f32) -> Self;
    fn from_usize(n: usize) -> Self;
    /// Rounds an f64 constant once.
    fn from_f64(x: f64) -> Self;
    fn to_f64(self) -> f64;
    fn exp(self) -> Self;
    fn ln_1p(self) -> Self;
    fn sqrt(self) -> Self;
    fn is_nan(self) -> bool;
    fn powf(self, e: Self) -> Self;
    fn cos(self) -> Self;
    fn sin(self) -> Self;

    /// A zero-centred RMSNorm weight `w` as applied, 1 + w, rounded once to `Self`.
    fn one_plus(w: f32) -> Self;
    /// The GDN decay rate −exp(A_log). For f32 this is exactly the value `names.rs` stores in a
    /// GGUF `ssm_a` (`names::neg_exp`, correctly rounded), so the safetensors and GGUF paths see
    /// the same bits.
    fn neg_exp(a_log: f32) -> Self;
}

impl Real for f32 {
    const ZERO: f32 = 0.0;
    const ONE: f32 = 1.0;
    const NAME: &'static str = "f32";

    fn from_f32(x: f32) -> f32 {
        x
    }
    fn from_usize(n: usize) -> f32 {
        n as f32
    }
    fn from_f64(x: f64) -> f32 {
        x as f32
    }
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn exp(self) -> f32 {
        f32::exp(self)
    }
    fn ln_1p(self) -> f32 {
        f32::ln_1p(self)
    }
    fn sqrt(self) -> f32 {
        f32::sqrt(self)
    }
    fn is_nan(self) -> bool {
        f32::is_nan(self)
    }
    fn powf(self, e: f32) -> f32 {
        f32::powf(self, e)
    }
    fn cos(self) -> f32 {
        f32::cos(self)
    }
    fn sin(self) -> f32 {
        f32::sin(self)
    }
    fn one_plus(w: f32) -> f32 {
        1.0 + w
    }
    fn neg_exp(a_log: f32) -> f32 {
        crate::model::names::neg_exp(a_log)
    }
}

impl Real for f64 {
    const ZERO: f64 = 0.0;
    const ONE: f64 = 1.0;
    const NAME: &'static str = "f64";

    fn from_f32(x: f32) -> f64 {
        f64::from(x)
    }
    fn from_usize(n: usize) -> f64 {
        n as f64
    }
    fn from_f64(x: f64) -> f64 {
        x
    }
    fn to_f64(self) -> f64 {
        self
    }
    fn exp(self) -> f64 {
        f64::exp(self)
    }
    fn ln_1p(self) -> f64 {
        f64::ln_1p(self)
    }
    fn sqrt(self) -> f64 {
        f64::sqrt(self)
    }
    fn is_nan(self) -> bool {
        f64::is_nan(self)
    }
    fn powf(self, e: f64) -> f64 {
        f64::powf(self, e)
    }
    fn cos(self) -> f64 {
        f64::cos(self)
    }
    fn sin(self) -> f64 {
        f64::sin(self)
    }
    fn one_plus(w: f32) -> f64 {
        1.0 + f64::from(w)
    }
    fn neg_exp(a_log: f32) -> f64 {
        -f64::from(a_log).exp()
    }
}
