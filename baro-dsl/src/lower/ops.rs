//! Target-neutral arithmetic of every LLVM lowering: constants, IEEE float operations,
//! wrapping integer operations and conversions, each computed with the plain instruction
//! its IR operation names. f16/bf16 arithmetic converts to f32, operates and rounds back.
//! Never emits fast-math flags or `llvm.fmuladd`, and never an fma but for an explicit
//! `Expr::Fma` (one `llvm.fma`, see `fma`).

use inkwell::values::{BasicValueEnum, FloatValue, IntValue};
use inkwell::{FloatPredicate as F, IntPredicate as P};

use super::convert;
use super::expr::{reg_ty, Val};
use super::ir::Ir;
use super::{fail, R};
use crate::ir::{BinOp, Const, Dot4Kind, ScalarType, UnOp};

impl<'a, 'ctx> Ir<'a, 'ctx> {
    /// A register value of type `t` from its canonical 64-bit pattern.
    pub(crate) fn scalar_from_bits64(&self, bits: IntValue<'ctx>, t: ScalarType) -> R<BasicValueEnum<'ctx>> {
        let cx = self.cx;
        Ok(match t {
            ScalarType::Bool => self.icmp(inkwell::IntPredicate::NE, bits, self.i64(0))?.into(),
            ScalarType::F32 => self.bits_f32(self.trunc(bits, cx.i32_type())?)?.into(),
            ScalarType::I64 | ScalarType::U64 => bits.into(),
            t => self.trunc(bits, reg_ty(cx, t).into_int_type())?.into(),
        })
    }

    pub(crate) fn konst(&self, c: Const) -> BasicValueEnum<'ctx> {
        let cx = self.cx;
        match c.ty {
            ScalarType::F32 => cx.f32_type().const_float(f32::from_bits(c.bits as u32) as f64).into(),
            t => reg_ty(cx, t).into_int_type().const_int(c.bits, false).into(),
        }
    }

    /// A float value as f32 (f16/bf16 bits are converted exactly).
    pub(crate) fn to_f32(&self, v: Val<'ctx>) -> R<FloatValue<'ctx>> {
        match v.ty {
            ScalarType::F32 => Ok(v.v.into_float_value()),
            ScalarType::F16 => convert::f16_to_f32(self, v.v.into_int_value()),
            ScalarType::BF16 => convert::bf16_to_f32(self, v.v.into_int_value()),
            t => fail(format!("{t} is not a float type")),
        }
    }

    /// An f32 rounded to `ty` (f32, f16 or bf16).
    pub(crate) fn round_from_f32(&self, f: FloatValue<'ctx>, ty: ScalarType) -> R<Val<'ctx>> {
        let v = match ty {
            ScalarType::F32 => f.into(),
            ScalarType::F16 => convert::f32_to_f16(self, f)?.into(),
            ScalarType::BF16 => convert::f32_to_bf16(self, f)?.into(),
            t => return fail(format!("{t} is not a float type")),
        };
        Ok(Val { v, ty })
    }

    fn f32_intrinsic(&self, name: &str, f: FloatValue<'ctx>) -> R<FloatValue<'ctx>> {
        let t = self.cx.f32_type();
        Ok(self.intrinsic(name, &[t.into()], &[f.into()])?.into_float_value())
    }

    pub(crate) fn unary(&self, op: UnOp, a: Val<'ctx>) -> R<Val<'ctx>> {
        let b = self.b;
        let ty = a.ty;
        if ty.is_float() {
            // Sign operations act on the bits directly (exact, NaN payloads kept).
            let sign_op = |mask_xor: bool| -> R<Val<'ctx>> {
                let (bits, width) = match ty {
                    ScalarType::F32 => (self.f32_bits(a.v.into_float_value())?, 32),
                    _ => (a.v.into_int_value(), 16),
                };
                let sign = bits.get_type().const_int(1u64 << (width - 1), false);
                let r = if mask_xor {
                    self.xor(bits, sign)?
                } else {
                    self.and(bits, bits.get_type().const_int((1u64 << (width - 1)) - 1, false))?
                };
                let v = if ty == ScalarType::F32 { self.bits_f32(r)?.into() } else { r.into() };
                Ok(Val { v, ty })
            };
            return match op {
                UnOp::Neg => sign_op(true),
                UnOp::Abs => sign_op(false),
                UnOp::Sqrt => self.round_from_f32(self.f32_intrinsic("llvm.sqrt", self.to_f32(a)?)?, ty),
                UnOp::Floor => self.round_from_f32(self.f32_intrinsic("llvm.floor", self.to_f32(a)?)?, ty),
                UnOp::Not => fail(format!("`not` does not apply to {ty}")),
            };
        }
        let x = a.v.into_int_value();
        let it = x.get_type();
        let v = match op {
            UnOp::Neg => b.build_int_sub(it.const_zero(), x, "")?,
            UnOp::Not => self.xor(x, it.const_all_ones())?,
            UnOp::Abs => {
                let neg = self.icmp(P::SLT, x, it.const_zero())?;
                self.sel(neg, b.build_int_sub(it.const_zero(), x, "")?, x)?
            }
            UnOp::Sqrt | UnOp::Floor => return fail(format!("`{}` does not apply to {ty}", op.name())),
        };
        Ok(Val { v: v.into(), ty })
    }

    pub(crate) fn binary(&self, op: BinOp, a: Val<'ctx>, bv: Val<'ctx>) -> R<Val<'ctx>> {
        let ty = a.ty;
        if ty.is_float() {
            return self.float_binary(op, a, bv);
        }
        let b = self.b;
        let (x, y) = (a.v.into_int_value(), bv.v.into_int_value());
        let it = x.get_type();
        let signed = ty.is_signed();
        let bool_ty = |v: IntValue<'ctx>| Ok(Val { v: v.into(), ty: ScalarType::Bool });
        let v = match op {
            BinOp::Add => self.add(x, y)?,
            BinOp::Sub => self.sub(x, y)?,
            BinOp::Mul => self.mul(x, y)?,
            BinOp::Div | BinOp::Rem => {
                // x / 0 = 0, x % 0 = 0, MIN / -1 = MIN (wrapping), MIN % -1 = 0.
                let zero = it.const_zero();
                let one = it.const_int(1, false);
                let by_zero = self.icmp(P::EQ, y, zero)?;
                let mut safe = self.sel(by_zero, one, y)?;
                if signed {
                    let min = it.const_int(1u64 << (ty.bits() - 1), false);
                    let ovf = self.and(self.icmp(P::EQ, x, min)?, self.icmp(P::EQ, y, it.const_all_ones())?)?;
                    safe = self.sel(ovf, one, safe)?;
                    let q = if op == BinOp::Div {
                        b.build_int_signed_div(x, safe, "")?
                    } else {
                        b.build_int_signed_rem(x, safe, "")?
                    };
                    let q = if op == BinOp::Rem { self.sel(ovf, zero, q)? } else { q };
                    self.sel(by_zero, zero, q)?
                } else {
                    let q = if op == BinOp::Div {
                        b.build_int_unsigned_div(x, safe, "")?
                    } else {
                        b.build_int_unsigned_rem(x, safe, "")?
                    };
                    self.sel(by_zero, zero, q)?
                }
            }
            BinOp::Min | BinOp::Max => {
                let lt = self.icmp(if signed { P::SLT } else { P::ULT }, x, y)?;
                if op == BinOp::Min {
                    self.sel(lt, x, y)?
                } else {
                    self.sel(lt, y, x)?
                }
            }
            BinOp::And => self.and(x, y)?,
            BinOp::Or => self.or(x, y)?,
            BinOp::Xor => self.xor(x, y)?,
            BinOp::Shl | BinOp::Shr => {
                let amt = self.and(y, it.const_int(ty.bits() as u64 - 1, false))?;
                match (op, signed) {
                    (BinOp::Shl, _) => self.shl(x, amt)?,
                    (_, true) => self.ashr(x, amt)?,
                    (_, false) => self.lshr(x, amt)?,
                }
            }
            BinOp::Eq => return bool_ty(self.icmp(P::EQ, x, y)?),
            BinOp::Ne => return bool_ty(self.icmp(P::NE, x, y)?),
            BinOp::Lt => return bool_ty(self.icmp(if signed { P::SLT } else { P::ULT }, x, y)?),
            BinOp::Le => return bool_ty(self.icmp(if signed { P::SLE } else { P::ULE }, x, y)?),
            BinOp::Gt => return bool_ty(self.icmp(if signed { P::SGT } else { P::UGT }, x, y)?),
            BinOp::Ge => return bool_ty(self.icmp(if signed { P::SGE } else { P::UGE }, x, y)?),
        };
        Ok(Val { v: v.into(), ty })
    }

    /// `fma(a, b, c)`: `llvm.fma.f32`, one rounding on every target (NVPTX `fma.rn.f32`,
    /// AMDGPU `v_fma_f32`/`v_fmac_f32`; on the host's generic x86-64, which has no FMA
    /// instruction, LLVM calls the process's `fmaf`, correctly rounded in glibc and musl).
    /// The only fma the lowering emits: `a * b + c` stays a multiply and an add.
    pub(crate) fn fma(&self, a: Val<'ctx>, b: Val<'ctx>, c: Val<'ctx>) -> R<Val<'ctx>> {
        if [a.ty, b.ty, c.ty] != [ScalarType::F32; 3] {
            return fail(format!("`fma` of {}, {} and {}: expected f32 operands", a.ty, b.ty, c.ty));
        }
        let t = self.cx.f32_type();
        let v = self.intrinsic("llvm.fma", &[t.into()], &[a.v, b.v, c.v])?;
        Ok(Val { v, ty: ScalarType::F32 })
    }

    /// A 4-way byte dot in exact integer operations (`Dot4Kind::eval`): each byte extended
    /// to i32 by its signedness, multiplied, and added to `c` with wrapping adds. The host's
    /// lowering, and a GPU's where it has no dot instruction.
    pub(crate) fn dot4_exact(
        &self,
        kind: Dot4Kind,
        a: IntValue<'ctx>,
        b: IntValue<'ctx>,
        c: IntValue<'ctx>,
    ) -> R<IntValue<'ctx>> {
        let (i8t, i32t) = (self.cx.i8_type(), self.cx.i32_type());
        let byte = |w: IntValue<'ctx>, i: u32, signed: bool| -> R<IntValue<'ctx>> {
            let x = self.trunc(self.lshr(w, self.i32(8 * i))?, i8t)?;
            Ok(if signed { self.b.build_int_s_extend(x, i32t, "")? } else { self.zext(x, i32t)? })
        };
        let mut acc = c;
        for i in 0..4 {
            let p = self.mul(byte(a, i, kind.a_signed())?, byte(b, i, true)?)?;
            acc = self.add(acc, p)?;
        }
        Ok(acc)
    }

    fn float_binary(&self, op: BinOp, a: Val<'ctx>, bv: Val<'ctx>) -> R<Val<'ctx>> {
        let ty = a.ty;
        let b = self.b;
        let (x, y) = (self.to_f32(a)?, self.to_f32(bv)?);
        let cmp = |p: F| -> R<Val<'ctx>> { Ok(Val { v: self.fcmp(p, x, y)?.into(), ty: ScalarType::Bool }) };
        let f = match op {
            BinOp::Add => b.build_float_add(x, y, "")?,
            BinOp::Sub => b.build_float_sub(x, y, "")?,
            BinOp::Mul => b.build_float_mul(x, y, "")?,
            BinOp::Div => b.build_float_div(x, y, "")?,
            BinOp::Min | BinOp::Max => return self.float_min_max(op == BinOp::Max, a, bv, x, y),
            BinOp::Eq => return cmp(F::OEQ),
            BinOp::Ne => return cmp(F::UNE),
            BinOp::Lt => return cmp(F::OLT),
            BinOp::Le => return cmp(F::OLE),
            BinOp::Gt => return cmp(F::OGT),
            BinOp::Ge => return cmp(F::OGE),
            _ => return fail(format!("`{}` does not apply to {ty}", op.name())),
        };
        self.round_from_f32(f, ty)
    }

    /// max/min: a NaN operand is returned as is (the first one if both are), `max(-0, +0)`
    /// is +0 and `min(-0, +0)` is -0. Selects between the original values, so no rounding.
    fn float_min_max(
        &self,
        max: bool,
        a: Val<'ctx>,
        bv: Val<'ctx>,
        x: FloatValue<'ctx>,
        y: FloatValue<'ctx>,
    ) -> R<Val<'ctx>> {
        let ir = self;
        let (ab, bb) = if a.ty == ScalarType::F32 {
            (ir.f32_bits(x)?, ir.f32_bits(y)?)
        } else {
            (a.v.into_int_value(), bv.v.into_int_value())
        };
        let equal_bits = if max { ir.and(ab, bb)? } else { ir.or(ab, bb)? };
        let (first, second) = if max { (F::OGT, F::OLT) } else { (F::OLT, F::OGT) };
        let r = ir.sel(ir.fcmp(second, x, y)?, bb, equal_bits)?;
        let r = ir.sel(ir.fcmp(first, x, y)?, ab, r)?;
        let r = ir.sel(ir.fcmp(F::UNO, y, y)?, bb, r)?;
        let r = ir.sel(ir.fcmp(F::UNO, x, x)?, ab, r)?;
        let v = if a.ty == ScalarType::F32 { ir.bits_f32(r)?.into() } else { r.into() };
        Ok(Val { v, ty: a.ty })
    }

    /// Numeric conversion (see `Expr::Cast`): float→float and int→float round to nearest
    /// even (once), float→int truncates and saturates (NaN → 0), int↔int wraps, →bool is
    /// `!= 0` (NaN → false), bool→number is 0 or 1.
    pub(crate) fn cast(&self, a: Val<'ctx>, to: ScalarType) -> R<Val<'ctx>> {
        let cx = self.cx;
        let b = self.b;
        let from = a.ty;
        if from == to {
            return Ok(a);
        }
        if to == ScalarType::Bool {
            let v = if from.is_float() {
                self.fcmp(F::ONE, self.to_f32(a)?, cx.f32_type().const_zero())?
            } else {
                let x = a.v.into_int_value();
                self.icmp(P::NE, x, x.get_type().const_zero())?
            };
            return Ok(Val { v: v.into(), ty: to });
        }
        if from.is_float() && to.is_float() {
            return self.round_from_f32(self.to_f32(a)?, to);
        }
        if from.is_float() {
            let f = self.to_f32(a)?;
            let it = reg_ty(cx, to).into_int_type();
            let name = if to.is_signed() { "llvm.fptosi.sat" } else { "llvm.fptoui.sat" };
            let v = self.intrinsic(name, &[it.into(), cx.f32_type().into()], &[f.into()])?;
            return Ok(Val { v, ty: to });
        }
        // from is an integer or bool
        let x = a.v.into_int_value();
        let signed = from.is_signed();
        if to.is_float() {
            if to == ScalarType::F32 {
                let f = if signed {
                    b.build_signed_int_to_float(x, cx.f32_type(), "")?
                } else {
                    b.build_unsigned_int_to_float(x, cx.f32_type(), "")?
                };
                return Ok(Val { v: f.into(), ty: to });
            }
            let x64 = if from.bits() == 64 {
                x
            } else if signed {
                b.build_int_s_extend(x, cx.i64_type(), "")?
            } else {
                self.zext(x, cx.i64_type())?
            };
            let h = convert::int_to_half(self, x64, signed, to == ScalarType::BF16)?;
            return Ok(Val { v: h.into(), ty: to });
        }
        let it = reg_ty(cx, to).into_int_type();
        let (fw, tw) = (x.get_type().get_bit_width(), it.get_bit_width());
        let v = if fw == tw {
            x
        } else if fw > tw {
            self.trunc(x, it)?
        } else if signed {
            b.build_int_s_extend(x, it, "")?
        } else {
            self.zext(x, it)?
        };
        Ok(Val { v: v.into(), ty: to })
    }
}
