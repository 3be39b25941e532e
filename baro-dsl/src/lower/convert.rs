//! Float conversions built from integer operations only, identical on every LLVM target:
//! f16/bf16 ↔ f32 (round to nearest even) and integer → f16/bf16 (one rounding).
//!
//! These never call a libcall (`__truncsfbf2` and friends need not exist in a JIT or on a
//! GPU). NaN rule, chosen to match the `half` crate bit for bit: f16/bf16 → f32 sets the
//! quiet bit and keeps the payload; f32 → f16 gives `sign | 0x7e00 | (payload >> 13)`;
//! f32 → bf16 gives `(bits >> 16) | 0x0040`.

use inkwell::values::{FloatValue, IntValue};
use inkwell::IntPredicate as P;

use super::ir::Ir;
use super::R;

/// f16 bits (i16) → f32, exact.
pub(crate) fn f16_to_f32<'ctx>(ir: &Ir<'_, 'ctx>, h: IntValue<'ctx>) -> R<FloatValue<'ctx>> {
    let h = ir.zext(h, ir.cx.i32_type())?;
    let sign = ir.shl(ir.and(h, ir.i32(0x8000))?, ir.i32(16))?;
    let exp = ir.and(ir.lshr(h, ir.i32(10))?, ir.i32(0x1f))?;
    let man = ir.and(h, ir.i32(0x3ff))?;
    let man13 = ir.shl(man, ir.i32(13))?;
    // inf / NaN
    let is_nan = ir.icmp(P::NE, man, ir.i32(0))?;
    let special = ir.or(ir.or(sign, ir.i32(0x7f80_0000))?, man13)?;
    let special = ir.sel(is_nan, ir.or(special, ir.i32(0x0040_0000))?, special)?;
    // normal: rebias the exponent
    let normal = ir.or(ir.or(sign, ir.shl(ir.add(exp, ir.i32(112))?, ir.i32(23))?)?, man13)?;
    // zero / subnormal: man · 2^-24, exact in f32
    let sub = ir.b.build_unsigned_int_to_float(man, ir.cx.f32_type(), "")?;
    let sub = ir.b.build_float_mul(sub, ir.cx.f32_type().const_float(2f64.powi(-24)), "")?;
    let sub = ir.or(ir.f32_bits(sub)?, sign)?;
    let r = ir.sel(ir.icmp(P::EQ, exp, ir.i32(0x1f))?, special, normal)?;
    let r = ir.sel(ir.icmp(P::EQ, exp, ir.i32(0))?, sub, r)?;
    ir.bits_f32(r)
}

/// bf16 bits (i16) → f32, exact.
pub(crate) fn bf16_to_f32<'ctx>(ir: &Ir<'_, 'ctx>, h: IntValue<'ctx>) -> R<FloatValue<'ctx>> {
    let h = ir.zext(h, ir.cx.i32_type())?;
    let is_nan = ir.icmp(P::UGT, ir.and(h, ir.i32(0x7fff))?, ir.i32(0x7f80))?;
    let h = ir.sel(is_nan, ir.or(h, ir.i32(0x40))?, h)?;
    ir.bits_f32(ir.shl(h, ir.i32(16))?)
}

/// `(x & round_bit) != 0 && (x & (3 * round_bit - 1)) != 0` as 0/1 in i32: round half to even.
fn round_up<'ctx>(ir: &Ir<'_, 'ctx>, x: IntValue<'ctx>, round_bit: IntValue<'ctx>) -> R<IntValue<'ctx>> {
    let zero = ir.i32(0);
    let half = ir.icmp(P::NE, ir.and(x, round_bit)?, zero)?;
    let mask = ir.sub(ir.mul(round_bit, ir.i32(3))?, ir.i32(1))?;
    let odd_or_more = ir.icmp(P::NE, ir.and(x, mask)?, zero)?;
    ir.zext(ir.and(half, odd_or_more)?, ir.cx.i32_type())
}

/// f32 → f16 bits (i16), round to nearest even.
pub(crate) fn f32_to_f16<'ctx>(ir: &Ir<'_, 'ctx>, f: FloatValue<'ctx>) -> R<IntValue<'ctx>> {
    let x = ir.f32_bits(f)?;
    let sign = ir.and(x, ir.i32(0x8000_0000))?;
    let exp = ir.and(x, ir.i32(0x7f80_0000))?;
    let man = ir.and(x, ir.i32(0x007f_ffff))?;
    let hsign = ir.lshr(sign, ir.i32(16))?;
    // inf / NaN
    let nan_bit = ir.sel(ir.icmp(P::NE, man, ir.i32(0))?, ir.i32(0x200), ir.i32(0))?;
    let special = ir.or(ir.or(ir.or(hsign, ir.i32(0x7c00))?, nan_bit)?, ir.lshr(man, ir.i32(13))?)?;
    // half exponent (signed): e32 - 127 + 15
    let hexp = ir.sub(ir.lshr(exp, ir.i32(23))?, ir.i32(112))?;
    let overflow = ir.or(hsign, ir.i32(0x7c00))?;
    // subnormal result: shift = 14 - hexp, in [14, 24] where used (clamped to stay defined)
    let is_sub = ir.icmp(P::SLE, hexp, ir.i32(0))?;
    let shift = ir.sel(is_sub, ir.sub(ir.i32(14), hexp)?, ir.i32(14))?;
    let underflow = ir.icmp(P::SGT, shift, ir.i32(24))?;
    let shift = ir.sel(underflow, ir.i32(24), shift)?;
    let m = ir.or(man, ir.i32(0x0080_0000))?;
    let sub_man = ir.lshr(m, shift)?;
    let rb = ir.shl(ir.i32(1), ir.sub(shift, ir.i32(1))?)?;
    let sub = ir.or(hsign, ir.add(sub_man, round_up(ir, m, rb)?)?)?;
    let sub = ir.sel(underflow, hsign, sub)?;
    // normal result
    let hexp_c = ir.sel(is_sub, ir.i32(0), hexp)?;
    let normal = ir.or(ir.or(hsign, ir.shl(hexp_c, ir.i32(10))?)?, ir.lshr(man, ir.i32(13))?)?;
    let normal = ir.add(normal, round_up(ir, man, ir.i32(0x1000))?)?;
    let r = ir.sel(is_sub, sub, normal)?;
    let r = ir.sel(ir.icmp(P::SGE, hexp, ir.i32(0x1f))?, overflow, r)?;
    let r = ir.sel(ir.icmp(P::EQ, exp, ir.i32(0x7f80_0000))?, special, r)?;
    ir.trunc(r, ir.cx.i16_type())
}

/// f32 → bf16 bits (i16), round to nearest even.
pub(crate) fn f32_to_bf16<'ctx>(ir: &Ir<'_, 'ctx>, f: FloatValue<'ctx>) -> R<IntValue<'ctx>> {
    let x = ir.f32_bits(f)?;
    let hi = ir.lshr(x, ir.i32(16))?;
    let is_nan = ir.icmp(P::UGT, ir.and(x, ir.i32(0x7fff_ffff))?, ir.i32(0x7f80_0000))?;
    let rounded = ir.add(hi, round_up(ir, x, ir.i32(0x8000))?)?;
    let r = ir.sel(is_nan, ir.or(hi, ir.i32(0x40))?, rounded)?;
    ir.trunc(r, ir.cx.i16_type())
}

/// A 64-bit integer (`signed` says how to read it) → f16 (`bf16 == false`) or bf16 bits,
/// with a single round to nearest even (going through f32 would round twice).
pub(crate) fn int_to_half<'ctx>(ir: &Ir<'_, 'ctx>, v: IntValue<'ctx>, signed: bool, bf16: bool) -> R<IntValue<'ctx>> {
    let i64t = ir.cx.i64_type();
    let (p, bias, max_exp): (u64, u64, u64) = if bf16 { (8, 127, 0xff) } else { (11, 15, 0x1f) };
    let neg = if signed { ir.icmp(P::SLT, v, ir.i64(0))? } else { ir.cx.bool_type().const_zero() };
    let mag = ir.sel(neg, ir.sub(ir.i64(0), v)?, v)?;
    let is_zero = ir.icmp(P::EQ, mag, ir.i64(0))?;
    let lz = ir
        .intrinsic("llvm.ctlz", &[i64t.into()], &[mag.into(), ir.cx.bool_type().const_zero().into()])?
        .into_int_value();
    let lz = ir.sel(is_zero, ir.i64(0), lz)?;
    let e = ir.sub(ir.i64(63), lz)?;
    let n = ir.shl(mag, lz)?; // leading one at bit 63
    let keep = ir.lshr(n, ir.i64(64 - p))?;
    let rest = ir.shl(n, ir.i64(p))?;
    let top = ir.i64(1 << 63);
    let above = ir.icmp(P::UGT, rest, top)?;
    let tie_odd = ir.and(ir.icmp(P::EQ, rest, top)?, ir.trunc(keep, ir.cx.bool_type())?)?;
    let keep = ir.add(keep, ir.zext(ir.or(above, tie_odd)?, i64t)?)?;
    let carry = ir.icmp(P::EQ, keep, ir.i64(1 << p))?;
    let keep = ir.sel(carry, ir.lshr(keep, ir.i64(1))?, keep)?;
    let e = ir.add(e, ir.zext(carry, i64t)?)?;
    let biased = ir.add(e, ir.i64(bias))?;
    let mant = ir.and(keep, ir.i64((1 << (p - 1)) - 1))?;
    let r = ir.or(ir.shl(biased, ir.i64(p - 1))?, mant)?;
    let inf = ir.i64(max_exp << (p - 1));
    let r = ir.sel(ir.icmp(P::UGE, biased, ir.i64(max_exp))?, inf, r)?;
    let r = ir.sel(is_zero, ir.i64(0), r)?;
    let sign = ir.shl(ir.zext(neg, i64t)?, ir.i64(15))?;
    let r = ir.or(r, sign)?;
    ir.trunc(r, ir.cx.i16_type())
}
