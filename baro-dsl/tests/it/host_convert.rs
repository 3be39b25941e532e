//! Host lowering of conversions against the `half` crate and Rust's `as`: every f16 and bf16
//! pattern to f32, a large f32 sample (ties, subnormals, inf, NaN) to f16/bf16, integer to
//! half (one rounding), saturating float→int, wrapping int↔int. Bit for bit, NaN included
//! (the NaN rule matches `half`, see `lower::convert`).

use crate::host_common;

use baro_dsl::ir::{Expr, ScalarType as T};
use baro_dsl::runtime::Arg;
use half::{bf16, f16};
use host_common::{compile, elementwise, Rng};

fn cast(from: T, to: T) -> baro_dsl::Kernel {
    elementwise(&format!("cast_{from}_{to}"), from, to, |x| Expr::cast(to, x))
}

#[test]
fn every_f16_and_bf16_to_f32() {
    let all: Vec<u16> = (0..=u16::MAX).collect();
    let h: Vec<f16> = all.iter().map(|&b| f16::from_bits(b)).collect();
    let bh: Vec<bf16> = all.iter().map(|&b| bf16::from_bits(b)).collect();
    let mut y = vec![0f32; all.len()];
    compile(&cast(T::F16, T::F32)).launch(&mut [Arg::buf(&h), Arg::buf_mut(&mut y), Arg::from(all.len())]).unwrap();
    for (i, x) in h.iter().enumerate() {
        assert_eq!(y[i].to_bits(), x.to_f32().to_bits(), "f16 {:#06x}", all[i]);
    }
    compile(&cast(T::BF16, T::F32)).launch(&mut [Arg::buf(&bh), Arg::buf_mut(&mut y), Arg::from(all.len())]).unwrap();
    for (i, x) in bh.iter().enumerate() {
        assert_eq!(y[i].to_bits(), x.to_f32().to_bits(), "bf16 {:#06x}", all[i]);
    }
}

/// Random bit patterns, every f32 that is an f16/bf16 tie or neighbour of one, subnormals,
/// and the special values.
fn f32_sample() -> Vec<f32> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut v: Vec<u32> = (0..300_000).map(|_| rng.next() as u32).collect();
    for h in (0..=u16::MAX as u32).step_by(3) {
        let hi = h << 16;
        v.extend([hi, hi | 0x8000, hi | 0x7fff, hi | 0x8001, hi | 0xffff]);
        let f = f16::from_bits(h as u16).to_f32().to_bits();
        v.extend([f, f.wrapping_add(1 << 12), f.wrapping_add((1 << 12) + 1), f.wrapping_sub(1)]);
    }
    v.extend([
        0,
        0x8000_0000,
        1,
        0x0080_0000,
        0x7f80_0000,
        0xff80_0000,
        0x7fc0_0000,
        0x7f80_0001,
        0xffff_ffff,
        0x3380_0000,
        0x3300_0000,
        0x3300_0001,
    ]);
    v.into_iter().map(f32::from_bits).collect()
}

#[test]
fn f32_to_f16_and_bf16_round_to_nearest_even() {
    let x = f32_sample();
    let mut h = vec![f16::ZERO; x.len()];
    compile(&cast(T::F32, T::F16)).launch(&mut [Arg::buf(&x), Arg::buf_mut(&mut h), Arg::from(x.len())]).unwrap();
    for (i, &f) in x.iter().enumerate() {
        assert_eq!(h[i].to_bits(), f16::from_f32(f).to_bits(), "f32 {:#010x} -> f16", f.to_bits());
    }
    let mut b = vec![bf16::ZERO; x.len()];
    compile(&cast(T::F32, T::BF16)).launch(&mut [Arg::buf(&x), Arg::buf_mut(&mut b), Arg::from(x.len())]).unwrap();
    for (i, &f) in x.iter().enumerate() {
        assert_eq!(b[i].to_bits(), bf16::from_f32(f).to_bits(), "f32 {:#010x} -> bf16", f.to_bits());
    }
}

/// `v` (exact in f64) rounded to f32 with round-to-odd: then one more RNE rounding to f16 or
/// bf16 equals a direct RNE rounding (24 >= 11 + 2). `half`'s own `from_f64` cannot serve as
/// the reference: its bf16 path ignores the low 32 bits of the f64 when rounding.
fn round_to_odd_f32(v: f64) -> f32 {
    let f = v as f32;
    if f as f64 == v || f.to_bits() & 1 == 1 {
        return f;
    }
    // f is even and inexact: the odd neighbour on v's side of f.
    let toward_v = if (f as f64) < v {
        f.to_bits() as i64 + if f > 0.0 { 1 } else { -1 }
    } else {
        f.to_bits() as i64 - if f > 0.0 { 1 } else { -1 }
    };
    f32::from_bits(toward_v as u32)
}

#[test]
fn integers_to_half_round_once() {
    let mut rng = Rng(7);
    let mut x: Vec<i64> = (0..20_000).map(|_| (rng.next() as i64) >> (rng.next() % 64)).collect();
    x.extend([0, 1, -1, 65504, 65519, 65520, 65535, i32::MAX as i64, i32::MIN as i64, (1 << 53) - 1, -(1 << 53)]);
    // ties between bf16 neighbours that an f32 detour would round twice
    x.extend([(1 << 24) + (1 << 16) + 1, 0x0101_0001, 0x7f80_8001]);
    let x: Vec<i64> = x.into_iter().filter(|v| v.unsigned_abs() < (1 << 53)).collect();
    let mut h = vec![f16::ZERO; x.len()];
    compile(&cast(T::I64, T::F16)).launch(&mut [Arg::buf(&x), Arg::buf_mut(&mut h), Arg::from(x.len())]).unwrap();
    let mut b = vec![bf16::ZERO; x.len()];
    compile(&cast(T::I64, T::BF16)).launch(&mut [Arg::buf(&x), Arg::buf_mut(&mut b), Arg::from(x.len())]).unwrap();
    for (i, &v) in x.iter().enumerate() {
        let odd = round_to_odd_f32(v as f64);
        assert_eq!(h[i].to_bits(), f16::from_f32(odd).to_bits(), "i64 {v} -> f16");
        assert_eq!(b[i].to_bits(), bf16::from_f32(odd).to_bits(), "i64 {v} -> bf16");
    }
    let y: Vec<u32> = (0..5000u32).map(|_| rng.next() as u32).chain([u32::MAX, 0x8080_8000]).collect();
    let mut b = vec![bf16::ZERO; y.len()];
    compile(&cast(T::U32, T::BF16)).launch(&mut [Arg::buf(&y), Arg::buf_mut(&mut b), Arg::from(y.len())]).unwrap();
    for (i, &v) in y.iter().enumerate() {
        assert_eq!(b[i].to_bits(), bf16::from_f32(round_to_odd_f32(v as f64)).to_bits(), "u32 {v} -> bf16");
    }
}

#[test]
fn float_to_int_saturates_and_int_to_int_wraps() {
    let x: Vec<f32> = [
        0.0,
        -0.0,
        1.5,
        -1.5,
        127.9,
        128.0,
        -129.0,
        3e9,
        -3e9,
        1e20,
        -1e20,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        255.5,
        256.0,
        -0.9,
    ]
    .into_iter()
    .chain(f32_sample().into_iter().step_by(97))
    .collect();
    let n = x.len();
    let mut a = vec![0i8; n];
    compile(&cast(T::F32, T::I8)).launch(&mut [Arg::buf(&x), Arg::buf_mut(&mut a), Arg::from(n)]).unwrap();
    let mut b = vec![0u8; n];
    compile(&cast(T::F32, T::U8)).launch(&mut [Arg::buf(&x), Arg::buf_mut(&mut b), Arg::from(n)]).unwrap();
    let mut c = vec![0i32; n];
    compile(&cast(T::F32, T::I32)).launch(&mut [Arg::buf(&x), Arg::buf_mut(&mut c), Arg::from(n)]).unwrap();
    let mut d = vec![0u64; n];
    compile(&cast(T::F32, T::U64)).launch(&mut [Arg::buf(&x), Arg::buf_mut(&mut d), Arg::from(n)]).unwrap();
    for (i, &f) in x.iter().enumerate() {
        assert_eq!((a[i], b[i], c[i], d[i]), (f as i8, f as u8, f as i32, f as u64), "{f:e}");
    }
    let ints: Vec<i64> = [0i64, -1, 255, 256, -129, i64::MAX, i64::MIN, 0x1234_5678_9abc].to_vec();
    let mut w = vec![0u8; ints.len()];
    compile(&cast(T::I64, T::U8)).launch(&mut [Arg::buf(&ints), Arg::buf_mut(&mut w), Arg::from(ints.len())]).unwrap();
    let mut s = vec![0i32; ints.len()];
    compile(&cast(T::I64, T::I32)).launch(&mut [Arg::buf(&ints), Arg::buf_mut(&mut s), Arg::from(ints.len())]).unwrap();
    let mut f = vec![0f32; ints.len()];
    compile(&cast(T::I64, T::F32)).launch(&mut [Arg::buf(&ints), Arg::buf_mut(&mut f), Arg::from(ints.len())]).unwrap();
    for (i, &v) in ints.iter().enumerate() {
        assert_eq!((w[i], s[i], f[i].to_bits()), (v as u8, v as i32, (v as f32).to_bits()), "{v}");
    }
    let bytes: Vec<i8> = vec![-128, -1, 0, 1, 127];
    let mut wide = vec![0u32; bytes.len()];
    compile(&cast(T::I8, T::U32))
        .launch(&mut [Arg::buf(&bytes), Arg::buf_mut(&mut wide), Arg::from(bytes.len())])
        .unwrap();
    assert_eq!(wide, bytes.iter().map(|&b| b as u32).collect::<Vec<_>>());
}
