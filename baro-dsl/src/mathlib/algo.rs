//! The math functions written once, over an abstract arithmetic (`Arith`), so that the
//! plain-Rust twins and the IR expansion perform exactly the same operation sequence.
//!
//! Only IEEE basic operations appear here (add, sub, mul, div, sqrt, floor, compare, select,
//! wrapping int ops, saturating float→int, bitcasts). Never add an fma, a libm call or an
//! operation whose result a target may round differently.

/// The basic operations the math functions are built from. `F` is an f32 value, `I` an i32
/// value, `B` a bool. Methods take `&self` so calls can nest.
pub(crate) trait Arith {
    type F: Clone;
    type I: Clone;
    type B: Clone;
    fn fc(&self, v: f32) -> Self::F;
    fn ic(&self, v: i32) -> Self::I;
    /// Marks a value used more than once (the IR binds it with a `let`).
    fn share_f(&self, v: Self::F) -> Self::F;
    fn share_i(&self, v: Self::I) -> Self::I;
    fn add(&self, a: Self::F, b: Self::F) -> Self::F;
    fn sub(&self, a: Self::F, b: Self::F) -> Self::F;
    fn mul(&self, a: Self::F, b: Self::F) -> Self::F;
    fn div(&self, a: Self::F, b: Self::F) -> Self::F;
    fn neg(&self, a: Self::F) -> Self::F;
    fn sqrt(&self, a: Self::F) -> Self::F;
    fn floor(&self, a: Self::F) -> Self::F;
    fn lt(&self, a: Self::F, b: Self::F) -> Self::B;
    fn gt(&self, a: Self::F, b: Self::F) -> Self::B;
    fn feq(&self, a: Self::F, b: Self::F) -> Self::B;
    /// Unordered not-equal: true when either operand is NaN.
    fn fne(&self, a: Self::F, b: Self::F) -> Self::B;
    fn sel(&self, c: Self::B, a: Self::F, b: Self::F) -> Self::F;
    fn isel(&self, c: Self::B, a: Self::I, b: Self::I) -> Self::I;
    fn iadd(&self, a: Self::I, b: Self::I) -> Self::I;
    fn isub(&self, a: Self::I, b: Self::I) -> Self::I;
    fn iand(&self, a: Self::I, b: Self::I) -> Self::I;
    fn ior(&self, a: Self::I, b: Self::I) -> Self::I;
    fn ishl(&self, a: Self::I, n: u32) -> Self::I;
    /// Arithmetic shift right.
    fn ishr(&self, a: Self::I, n: u32) -> Self::I;
    /// Truncation toward zero, saturating, NaN → 0.
    fn to_int(&self, a: Self::F) -> Self::I;
    /// Round to nearest even.
    fn to_float(&self, a: Self::I) -> Self::F;
    fn bits(&self, a: Self::F) -> Self::I;
    fn f32_from_bits(&self, a: Self::I) -> Self::F;
}

const LOG2E: f32 = std::f32::consts::LOG2_E;
/// ln 2 split so that `n * LN2_HI` is exact for |n| < 2^15 (9 significant bits).
#[allow(clippy::excessive_precision)]
const LN2_HI: f32 = 0.693_359_375;
#[allow(clippy::excessive_precision)]
const LN2_LO: f32 = -2.121_944_4e-4;
/// The largest x with a finite exp(x) (bits 0x42b17217).
const EXP_HI: f32 = f32::from_bits(0x42b1_7217);
/// Below this, exp(x) < 2^-150 and rounds to +0.
const EXP_LO: f32 = -104.0;
/// Cephes expf coefficients, highest degree first (its published digits, kept for tracing).
#[allow(clippy::excessive_precision)]
const EXP_POLY: [f32; 6] =
    [1.987_569_1e-4, 1.398_199_9e-3, 8.333_452e-3, 4.166_579_6e-2, 1.666_666_5e-1, 5.000_000_1e-1];
/// Cephes logf coefficients, highest degree first (its published digits).
#[allow(clippy::excessive_precision)]
const LOG_POLY: [f32; 9] = [
    7.037_683_6e-2,
    -1.151_461e-1,
    1.167_699_9e-1,
    -1.242_014_1e-1,
    1.424_932_3e-1,
    -1.666_805_8e-1,
    2.000_071_4e-1,
    -2.499_999_4e-1,
    3.333_333_1e-1,
];
const SQRT_HALF: f32 = std::f32::consts::FRAC_1_SQRT_2;
const CANONICAL_NAN: u32 = 0x7fc0_0000;

fn horner<A: Arith>(a: &A, coefs: &[f32], x: A::F) -> A::F {
    let mut p = a.fc(coefs[0]);
    for &c in &coefs[1..] {
        p = a.add(a.mul(p, x.clone()), a.fc(c));
    }
    p
}

/// exp(x) without the NaN pass-through (callers add it once).
fn exp_core<A: Arith>(a: &A, x: A::F) -> A::F {
    let n = a.share_f(a.floor(a.add(a.mul(x.clone(), a.fc(LOG2E)), a.fc(0.5))));
    let r = a.sub(x.clone(), a.mul(n.clone(), a.fc(LN2_HI)));
    let r = a.share_f(a.sub(r, a.mul(n.clone(), a.fc(LN2_LO))));
    let z = a.share_f(a.mul(r.clone(), r.clone()));
    let p = a.add(a.add(a.mul(horner(a, &EXP_POLY, r.clone()), z), r), a.fc(1.0));
    // 2^n in two normal factors, so that the only rounding happens in the last multiply
    // (results down to the subnormal range are correctly scaled).
    let ni = a.share_i(a.to_int(n));
    let n1 = a.share_i(a.ishr(ni.clone(), 1));
    let n2 = a.isub(ni, n1.clone());
    let s1 = a.f32_from_bits(a.ishl(a.iadd(n1, a.ic(127)), 23));
    let s2 = a.f32_from_bits(a.ishl(a.iadd(n2, a.ic(127)), 23));
    let y = a.mul(a.mul(p, s1), s2);
    let y = a.sel(a.gt(x.clone(), a.fc(EXP_HI)), a.fc(f32::INFINITY), y);
    a.sel(a.lt(x, a.fc(EXP_LO)), a.fc(0.0), y)
}

/// Passes a NaN input through unchanged (by select, so its bits survive on every target).
fn nan_through<A: Arith>(a: &A, x: A::F, y: A::F) -> A::F {
    a.sel(a.fne(x.clone(), x.clone()), x, y)
}

pub(crate) fn exp<A: Arith>(a: &A, x: A::F) -> A::F {
    let x = a.share_f(x);
    nan_through(a, x.clone(), exp_core(a, x))
}

/// log(x) without the NaN pass-through.
fn log_core<A: Arith>(a: &A, x: A::F) -> A::F {
    // Subnormals are scaled into the normal range first (exact).
    let is_sub = a.lt(x.clone(), a.fc(f32::MIN_POSITIVE));
    let xs = a.sel(is_sub.clone(), a.mul(x.clone(), a.fc(8_388_608.0)), x.clone());
    let b = a.share_i(a.bits(xs));
    let e = a.isub(a.iand(a.ishr(b.clone(), 23), a.ic(0xff)), a.ic(126));
    let e = a.isub(e, a.isel(is_sub, a.ic(23), a.ic(0)));
    // m in [0.5, 1); below sqrt(1/2) use 2m - 1 and e - 1 so that f lies in [-0.29, 0.41].
    let m = a.share_f(a.f32_from_bits(a.ior(a.iand(b, a.ic(0x007f_ffff)), a.ic(0x3f00_0000))));
    let small = a.lt(m.clone(), a.fc(SQRT_HALF));
    let e = a.isub(e, a.isel(small.clone(), a.ic(1), a.ic(0)));
    let f = a.share_f(a.sub(a.sel(small, a.add(m.clone(), m.clone()), m), a.fc(1.0)));
    let z = a.share_f(a.mul(f.clone(), f.clone()));
    let y = a.mul(a.mul(horner(a, &LOG_POLY, f.clone()), f.clone()), z.clone());
    let fe = a.share_f(a.to_float(e));
    let y = a.add(y, a.mul(fe.clone(), a.fc(LN2_LO)));
    let y = a.add(y, a.mul(a.fc(-0.5), z));
    let r = a.add(a.add(f, y), a.mul(fe, a.fc(LN2_HI)));
    let r = a.sel(a.feq(x.clone(), a.fc(f32::INFINITY)), x.clone(), r);
    let r = a.sel(a.feq(x.clone(), a.fc(0.0)), a.fc(f32::NEG_INFINITY), r);
    a.sel(a.lt(x, a.fc(0.0)), a.f32_from_bits(a.ic(CANONICAL_NAN as i32)), r)
}

pub(crate) fn log<A: Arith>(a: &A, x: A::F) -> A::F {
    let x = a.share_f(x);
    nan_through(a, x.clone(), log_core(a, x))
}

/// sigmoid(x) without the NaN pass-through: with e = exp(-|x|) (never overflows),
/// 1 / (1 + e) for x >= 0 and e / (1 + e) for x < 0, so tiny results stay accurate.
fn sigmoid_core<A: Arith>(a: &A, x: A::F) -> A::F {
    let neg = a.lt(x.clone(), a.fc(0.0));
    let e = a.share_f(exp_core(a, a.sel(neg.clone(), x.clone(), a.neg(x))));
    let d = a.share_f(a.add(a.fc(1.0), e.clone()));
    a.sel(neg, a.div(e, d.clone()), a.div(a.fc(1.0), d))
}

pub(crate) fn sigmoid<A: Arith>(a: &A, x: A::F) -> A::F {
    let x = a.share_f(x);
    nan_through(a, x.clone(), sigmoid_core(a, x))
}

pub(crate) fn silu<A: Arith>(a: &A, x: A::F) -> A::F {
    let x = a.share_f(x);
    let y = a.mul(x.clone(), sigmoid_core(a, x.clone()));
    // -inf · 0 would be a NaN whose bits differ between targets; the limit is -0.
    let y = a.sel(a.feq(x.clone(), a.fc(f32::NEG_INFINITY)), a.fc(-0.0), y);
    nan_through(a, x, y)
}

pub(crate) fn softplus<A: Arith>(a: &A, x: A::F) -> A::F {
    let x = a.share_f(x);
    let e = a.share_f(exp_core(a, x.clone()));
    let u = a.share_f(a.add(a.fc(1.0), e.clone()));
    // log1p(e) = log(u) · e / (u - 1) (Goldberg): exact-ish even when u rounds.
    let l = a.mul(log_core(a, u.clone()), a.div(e.clone(), a.sub(u.clone(), a.fc(1.0))));
    let y = a.sel(a.feq(u, a.fc(1.0)), e, l);
    let y = a.sel(a.gt(x.clone(), a.fc(20.0)), x.clone(), y);
    nan_through(a, x, y)
}

pub(crate) fn rsqrt<A: Arith>(a: &A, x: A::F) -> A::F {
    let x = a.share_f(x);
    let y = a.div(a.fc(1.0), a.sqrt(x.clone()));
    let y = a.sel(a.lt(x.clone(), a.fc(0.0)), a.f32_from_bits(a.ic(CANONICAL_NAN as i32)), y);
    nan_through(a, x, y)
}
