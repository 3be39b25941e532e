//! A correctly rounded f32 `exp` for tests, independent of the platform's libm: `exp` evaluated
//! in double-double arithmetic (about 100 bits; checked against mpmath at 200 bits on every
//! input near a rounding boundary), then rounded once to f32. Slow (tens of nanoseconds); the
//! reference the load-time conversions (`names::neg_exp`) are held to, never used by them.

/// hi + lo, |lo| ≤ ulp(hi) / 2.
#[derive(Clone, Copy, Debug)]
pub struct Dd(pub f64, pub f64);

fn two_sum(a: f64, b: f64) -> Dd {
    let s = a + b;
    let bb = s - a;
    Dd(s, (a - (s - bb)) + (b - bb))
}

fn quick_two_sum(a: f64, b: f64) -> Dd {
    let s = a + b;
    Dd(s, b - (s - a))
}

fn add(a: Dd, b: Dd) -> Dd {
    let s = two_sum(a.0, b.0);
    let t = two_sum(a.1, b.1);
    let s = quick_two_sum(s.0, s.1 + t.0);
    quick_two_sum(s.0, s.1 + t.1)
}

fn mul(a: Dd, b: Dd) -> Dd {
    let p = a.0 * b.0;
    let e = a.0.mul_add(b.0, -p);
    quick_two_sum(p, e + (a.0 * b.1 + a.1 * b.0))
}

fn prod(a: f64, b: f64) -> Dd {
    let p = a * b;
    Dd(p, a.mul_add(b, -p))
}

fn div_small(a: Dd, n: f64) -> Dd {
    let q = a.0 / n;
    let rem = (-q).mul_add(n, a.0) + a.1;
    quick_two_sum(q, rem / n)
}

/// exp(x) for an f32 `x` in [−104, 89], relative error about 2⁻⁹⁶.
pub fn exp_dd(x: f32) -> Dd {
    let x = f64::from(x);
    // ln 2 in three parts: the first with 28 significant bits, so k · LN2_1 is exact.
    let ln2 = [
        f64::from_bits(0x3fe6_2e42_ff00_0000),
        f64::from_bits(0xbdc7_1843_2a1b_0e26),
        f64::from_bits(0xba59_ff03_4254_2fc3),
    ];
    let k = (x / std::f64::consts::LN_2).round();
    let r = add(add(two_sum(x, -k * ln2[0]), prod(-k, ln2[1])), prod(-k, ln2[2]));
    // exp(r) = exp(r / 256)^256, the series on |r / 256| < 0.0014.
    let rs = Dd(r.0 / 256.0, r.1 / 256.0);
    let (mut term, mut sum) = (Dd(1.0, 0.0), Dd(1.0, 0.0));
    for n in 1..16 {
        term = div_small(mul(term, rs), n as f64);
        sum = add(sum, term);
    }
    for _ in 0..8 {
        sum = mul(sum, sum);
    }
    let scale = 2f64.powi(k as i32);
    Dd(sum.0 * scale, sum.1 * scale)
}

/// `d` rounded once to the nearest f32 (ties to even cannot occur: exp of a nonzero f32 is
/// transcendental).
pub fn round_to_f32(d: Dd) -> f32 {
    let r = d.0 as f32;
    let rf = f64::from(r);
    if rf == d.0 || r.is_infinite() {
        return r;
    }
    let other = if d.0 > rf { f32::from_bits(r.to_bits() + 1) } else { f32::from_bits(r.to_bits() - 1) };
    let mid = (rf + f64::from(other)) / 2.0;
    // hi exactly on a midpoint: lo says which side the value is on.
    if d.0 == mid && (d.1 > 0.0) == (other > r) {
        other
    } else {
        r
    }
}

/// exp(x) correctly rounded to f32, for every f32 x (0 below the range, ∞ above it).
pub fn exp_f32(x: f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    if x < -104.0 {
        return 0.0;
    }
    if x > 89.0 {
        return f32::INFINITY;
    }
    round_to_f32(exp_dd(x))
}
