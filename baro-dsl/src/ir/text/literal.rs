//! Reads the number in a constant (`1.5:f32`, `-3:i8`, `0x7fc00001:f32`) into exact bits.
//!
//! A literal either denotes one value exactly or is refused: hex is the raw bit pattern and
//! must fit the type; an f32 decimal rounds to nearest as IEEE says; an f16/bf16 decimal must be
//! exact (decimal → f16 through f64 could round twice, so it is never rounded here).

use crate::ir::{Const, ScalarType};

/// The constant `text` denotes in type `ty`, or what was expected of it.
pub(super) fn constant(text: &str, ty: ScalarType) -> Result<Const, String> {
    if let Some(hex) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        let bits = u64::from_str_radix(hex, 16).map_err(|_| format!("hex digits after `0x` ({ty} bits)"))?;
        let max = if ty == ScalarType::Bool { 1 } else { u64::MAX >> (64 - ty.bits()) };
        if bits > max {
            return Err(format!(
                "a bit pattern of at most {} bits ({ty})",
                if ty == ScalarType::Bool { 1 } else { ty.bits() }
            ));
        }
        return Ok(Const::new(ty, bits));
    }
    match ty {
        ScalarType::F32 => {
            let v: f32 = text.parse().map_err(|_| "an f32 decimal (like `1.5`, `-2e-7`) or hex bits".to_string())?;
            if !v.is_finite() {
                return Err("a finite f32 decimal (write infinities and NaNs as hex bits)".to_string());
            }
            Ok(Const::f32(v))
        }
        ScalarType::F16 | ScalarType::BF16 => {
            let what = || format!("a decimal that is exact in {ty}, or hex bits");
            let v: f64 = text.parse().map_err(|_| what())?;
            let bits = if ty == ScalarType::F16 {
                let h = half::f16::from_f64(v);
                (h.to_f64() == v && v.is_finite()).then(|| h.to_bits())
            } else {
                let h = half::bf16::from_f64(v);
                (h.to_f64() == v && v.is_finite()).then(|| h.to_bits())
            };
            bits.map(|b| Const::new(ty, b as u64)).ok_or_else(what)
        }
        _ => {
            let (min, max): (i128, i128) = match ty {
                ScalarType::Bool => (0, 1),
                t if t.is_signed() => (-(1i128 << (t.bits() - 1)), (1i128 << (t.bits() - 1)) - 1),
                t => (0, (1i128 << t.bits()) - 1),
            };
            let range = || format!("an integer from {min} to {max} ({ty})");
            let v: i128 = text.parse().map_err(|_| range())?;
            if v < min || v > max {
                return Err(range());
            }
            Ok(Const::new(ty, v as u64))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ScalarType as T;

    #[test]
    fn decimals_and_hex_give_the_same_bits() {
        assert_eq!(constant("-0.0", T::F32), Ok(Const::f32(-0.0)));
        assert_eq!(constant("0x80000000", T::F32), Ok(Const::f32(-0.0)));
        assert_eq!(constant("1e-45", T::F32), Ok(Const::new(T::F32, 1)));
        assert_eq!(constant("0x7fc00123", T::F32).map(|c| c.bits), Ok(0x7fc0_0123));
        assert_eq!(constant("1.5", T::F16), Ok(Const::new(T::F16, 0x3e00)));
        assert_eq!(constant("-2", T::BF16), Ok(Const::new(T::BF16, 0xc000)));
        assert_eq!(constant("-128", T::I8), Ok(Const::new(T::I8, 0x80)));
        assert_eq!(constant("0xff", T::I8), Ok(Const::new(T::I8, u64::MAX)));
        assert_eq!(constant("18446744073709551615", T::U64), Ok(Const::index(u64::MAX)));
    }

    #[test]
    fn inexact_or_out_of_range_literals_are_refused() {
        assert_eq!(constant("0.1", T::F16), Err("a decimal that is exact in f16, or hex bits".to_string()));
        assert_eq!(constant("128", T::I8), Err("an integer from -128 to 127 (i8)".to_string()));
        assert!(constant("1e39", T::F32).is_err());
        assert!(constant("0x1ffff", T::F16).is_err());
        assert!(constant("2", T::Bool).is_err());
        assert!(constant("-0x1", T::I32).is_err());
        assert!(constant("1.5", T::U32).is_err());
    }
}
