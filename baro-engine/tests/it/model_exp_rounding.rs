//! `names::neg_exp` (−exp in f64, rounded once to f32: the `ssm_a` a GGUF converter stores) is
//! correctly rounded, checked against a double-double reference (`common::exact_exp`): on a
//! dense sample of every f32 in [−104, 89] (below it exp rounds to 0, above it to ∞), on every
//! input of that range whose exp lies within 10⁻⁶ ulp of a rounding boundary (the committed
//! list `data/exp_f32_near_midpoint.txt`, from the exhaustive scan), on the fixtures' `A_log`
//! values, and on every f32 of the range (2.2·10⁹ inputs: each f64 `exp` result that lies
//! within 2 f64 ulps of an f32 rounding boundary, 39,991 of them, goes through the reference;
//! any other is more than the platform `exp`'s 1-ulp error away from a boundary, so rounding it
//! once to f32 is correct rounding; 16 s on 2 cores in a debug build).
//! baro's own `mathlib::exp`, which the kernels keep, is shown not to be correctly rounded on
//! the fixture values: the reason the conversion does not use it.

use crate::common;

use baro_engine::model::names::neg_exp;
use baro_engine::model::HfCheckpoint;
use common::exact_exp::exp_f32;
use common::fixture;

const LO: f32 = -104.0;
const HI: f32 = 89.0;

/// Bit patterns of every f32 in [LO, HI], as two ranges (positive, then negative).
fn ranges() -> [std::ops::RangeInclusive<u32>; 2] {
    [0..=HI.to_bits(), 0x8000_0000..=LO.to_bits()]
}

/// The inputs among `bits` where `neg_exp` is not −exp correctly rounded.
fn wrong(bits: impl Iterator<Item = u32>) -> Vec<(f32, f32, f32)> {
    bits.map(f32::from_bits)
        .filter_map(|x| {
            let (got, want) = (neg_exp(x), -exp_f32(x));
            (got.to_bits() != want.to_bits()).then_some((x, got, want))
        })
        .collect()
}

fn report(what: &str, n: usize, bad: &[(f32, f32, f32)]) {
    println!("{what}: {n} inputs, {} not correctly rounded", bad.len());
    for (x, got, want) in bad.iter().take(10) {
        println!(
            "  x = {x:e} ({:#x}): got {got:e} ({:#x}), expected {want:e} ({:#x})",
            x.to_bits(),
            got.to_bits(),
            want.to_bits()
        );
    }
    assert!(bad.is_empty(), "{what}: expected every −exp(x) correctly rounded, found {} that are not", bad.len());
}

#[test]
fn neg_exp_is_correctly_rounded_on_a_dense_sample() {
    // A prime stride, so the sample walks every low-mantissa residue: 8.7 million inputs.
    let stride = 257;
    let bits: Vec<u32> = ranges().into_iter().flat_map(|r| r.step_by(stride)).collect();
    report("every 257th f32 of [-104, 89]", bits.len(), &wrong(bits.iter().copied()));
}

#[test]
fn neg_exp_is_correctly_rounded_next_to_every_rounding_boundary() {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/exp_f32_near_midpoint.txt")).unwrap();
    let bits: Vec<u32> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            u32::from_str_radix(l.trim_start_matches("0x"), 16)
                .unwrap_or_else(|e| panic!("{l:?}: expected hex bits, {e}"))
        })
        .collect();
    assert_eq!(bits.len(), 1086, "expected the scan's 1,086 near-boundary inputs");
    // They are what the list says: within 1e-6 ulp of a midpoint, by the reference.
    for &b in &bits {
        let x = f32::from_bits(b);
        let d = common::exact_exp::exp_dd(x);
        let r = exp_f32(x);
        // The spacing on the side of r the value lies (below a power of two it halves).
        let rf = f64::from(r);
        let ulp = if d.0 > rf {
            f64::from(f32::from_bits(r.to_bits() + 1)) - rf
        } else {
            rf - f64::from(f32::from_bits(r.to_bits() - 1))
        };
        let from_mid = ((d.0 - rf).abs() / ulp - 0.5).abs();
        // The scan measured against the smaller spacing, so next to a power of two it also
        // listed values a quarter ulp from one side.
        let power_of_two = r.to_bits() & 0x007f_ffff == 0;
        assert!(from_mid < 1e-6 || power_of_two, "{x:e}: expected within 1e-6 ulp of a midpoint, found {from_mid:e}");
    }
    report("near-boundary inputs", bits.len(), &wrong(bits.iter().copied()));
}

/// The `A_log` of every GDN layer of both fixtures.
fn fixture_a_logs() -> Vec<f32> {
    let mut out = Vec::new();
    for name in ["tiny", "vocab"] {
        let ck = HfCheckpoint::open(&fixture(name)).unwrap();
        for l in 0..ck.config.n_layers {
            if let Some(t) = ck.tensor(&format!("model.layers.{l}.linear_attn.A_log")) {
                out.extend(t.to_f32());
            }
        }
    }
    out
}

#[test]
fn neg_exp_is_correctly_rounded_on_the_fixtures_and_baro_exp_is_not() {
    let a_logs = fixture_a_logs();
    assert!(a_logs.len() >= 12, "expected the fixtures' A_log values, found {}", a_logs.len());
    report("fixture A_log values", a_logs.len(), &wrong(a_logs.iter().map(|x| x.to_bits())));
    let baro_off = a_logs.iter().filter(|&&x| baro_dsl::mathlib::exp(x).to_bits() != exp_f32(x).to_bits()).count();
    println!(
        "baro's mathlib::exp differs from the correctly rounded exp on {baro_off} of {} fixture values",
        a_logs.len()
    );
    assert!(
        baro_off > 0,
        "expected baro's exp to be off by an ulp somewhere on the fixtures (why the conversion uses f64)"
    );
}

#[test]
fn neg_exp_outside_the_range_and_specials() {
    assert_eq!(neg_exp(-104.5).to_bits(), (-0.0f32).to_bits());
    assert_eq!(neg_exp(f32::NEG_INFINITY).to_bits(), (-0.0f32).to_bits());
    assert_eq!(neg_exp(89.5), f32::NEG_INFINITY);
    assert_eq!(neg_exp(f32::INFINITY), f32::NEG_INFINITY);
    assert!(neg_exp(f32::NAN).is_nan());
    assert_eq!(neg_exp(0.0), -1.0);
    assert_eq!(neg_exp(-0.0), -1.0);
}

/// Whether the f64 `exp(x)` lies within 2 f64 ulps of a point where its rounding to f32 changes
/// (a midpoint between two f32s), or rounds to 0 or ∞: only there can a result with at most
/// 1 f64 ulp of error (glibc's `exp` errs by less) round to the wrong f32.
fn near_rounding_boundary(x: f32) -> bool {
    let y = f64::from(x).exp();
    let r = y as f32;
    if !r.is_finite() || r == 0.0 {
        return true;
    }
    let rf = f64::from(r);
    let other = if y > rf { f32::from_bits(r.to_bits() + 1) } else { f32::from_bits(r.to_bits() - 1) };
    let mid = (rf + f64::from(other)) / 2.0;
    let ulp = f64::from_bits(y.to_bits() + 1) - y;
    (y - mid).abs() <= 2.0 * ulp
}

#[test]
fn neg_exp_is_correctly_rounded_on_every_f32() {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    let (bad, near): (Vec<_>, usize) = std::thread::scope(|s| {
        let jobs: Vec<_> = ranges()
            .into_iter()
            .flat_map(|r| {
                let (lo, hi) = (*r.start(), *r.end());
                let step = (hi - lo) / threads + 1;
                (0..threads).map(move |t| (lo + t * step, (lo + (t + 1) * step).min(hi + 1)))
            })
            .map(|(a, b)| {
                s.spawn(move || {
                    let near: Vec<u32> = (a..b).filter(|&i| near_rounding_boundary(f32::from_bits(i))).collect();
                    (wrong(near.iter().copied()), near.len())
                })
            })
            .collect();
        jobs.into_iter().map(|j| j.join().unwrap()).fold((Vec::new(), 0), |(mut bad, n), (b, m)| {
            bad.extend(b);
            (bad, n + m)
        })
    });
    let n = ranges().iter().map(|r| (r.end() - r.start() + 1) as usize).sum();
    println!("{near} of {n} inputs within 2 f64 ulps of an f32 rounding boundary (or at 0 or ∞), checked against the reference");
    report("every f32 of [-104, 89]", n, &bad);
}
